# Flow service: one Makefile for the local server, the tests and the Lambdas.
# `make run` starts flowd; `make test` is the one test command (CI runs it).

GO        ?= go
BIN       := bin
DATA_DIR  ?= .flowd
# -timeout: the store contract suites on moto take a few minutes alone and
# several times that on a loaded 2-core machine; go test's default of 10
# minutes a package killed pkg/dynamostore there, not a hang.
GOFLAGS_TEST ?= -count=1 -timeout 30m

.PHONY: all build run run-aws test screenshots bench bench-compare lint fmt clean tools-check lint-template build-lambdas deploy \
	fuzz fuzz-short soak \
	build-ApiFunction build-WebhookFunction build-WorkflowHookFunction build-RunnerFunction build-CodeFunction \
	invoke-all coldstart

all: build

## build: the local binaries flowd and flowctl into bin/
build:
	$(GO) build -trimpath -o $(BIN)/flowd ./cmd/flowd
	$(GO) build -trimpath -o $(BIN)/flowctl ./cmd/flowctl

## run: start flowd on FLOWD_ADDR (default 127.0.0.1:8080) with data in $(DATA_DIR)
run:
	@echo "make: building flowd and flowctl (the first build downloads and compiles the dependencies: a few minutes)"
	@$(MAKE) --no-print-directory build
	FLOWD_DATA_DIR=$(DATA_DIR) ./$(BIN)/flowd

## run-aws: flowd on the AWS adapters against moto_server on MOTO_URL, beside `make run`:
## its own data directory ($(AWS_DATA_DIR)) and address (127.0.0.1:8081)
AWS_DATA_DIR ?= .flowd-aws
MOTO_URL     ?= http://127.0.0.1:5000
run-aws:
	@echo "make: building flowd (the first build takes a few minutes); moto_server must answer on $(MOTO_URL)"
	@$(MAKE) --no-print-directory build
	FLOWD_BACKEND=aws FLOWD_AWS_PROVISION=true AWS_ENDPOINT_URL=$(MOTO_URL) AWS_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x FLOWD_ADDR=127.0.0.1:8081 FLOWD_DATA_DIR=$(AWS_DATA_DIR) ./$(BIN)/flowd

## test: vet, the template check, then every test (unit, HTTP, store contracts, the walkthroughs of README.md and docs, Lambdas),
## and the packages with concurrency again under the race detector (RACE_PACKAGES; about 3 minutes on 2 cores)
RACE_PACKAGES := ./pkg/fairshare/ ./pkg/runworker/ ./pkg/alerts/ ./pkg/cronscheduler/ ./pkg/engine/ ./pkg/automation/ ./internal/...
test: tools-check lint-template
	$(GO) vet ./...
	$(GO) test $(GOFLAGS_TEST) ./...
	$(GO) test -race $(GOFLAGS_TEST) $(RACE_PACKAGES)
	$(MAKE) --no-print-directory fuzz-short
	$(MAKE) --no-print-directory invoke-all

## fuzz targets, as package:Target; `go test -fuzz` takes one of each per run
FUZZ_TARGETS := \
	./pkg/engine:FuzzExpression \
	./pkg/engine:FuzzTemplate \
	./pkg/engine:FuzzFlowDefinition \
	./pkg/automation:FuzzCursorOpen \
	./pkg/automation:FuzzCanonicalAllowlist \
	./pkg/flowdef:FuzzVerifySignature \
	./pkg/automation:FuzzAuthenticate \
	./pkg/httpapi:FuzzParseHookBody \
	./pkg/httpapi:FuzzJSONDepth \
	./pkg/httpapi:FuzzCheckNumbers \
	./pkg/automation:FuzzStepPatches
FUZZTIME       ?= 60s
FUZZTIME_SHORT ?= 3s

## fuzz: every fuzz target for FUZZTIME each (default 60s); finds land in the package's testdata/fuzz
## The packages fuzz at the same time (one target at a time in each, as go test requires):
## the wall time is that of the package with the most targets, not the sum.
FUZZ_PACKAGES := $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t)))))
fuzz:
	@pids=""; for p in $(FUZZ_PACKAGES); do \
		( for t in $(FUZZ_TARGETS); do \
			[ "$${t%%:*}" = "$$p" ] || continue; \
			echo "fuzz $${t#*:} in $$p for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done ) & pids="$$pids $$!"; \
	done; fail=0; for pid in $$pids; do wait $$pid || fail=1; done; exit $$fail

## fuzz-short: every fuzz target for a few seconds (part of make test)
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## soak: SOAK (default 2m) of mixed load against a real flowd, reporting errors and resident memory; not in make test
SOAK ?= 2m
soak:
	FLOWD_SOAK=$(SOAK) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 60m ./cmd/flowd/

## screenshots: the dashboard's main pages at desktop and phone width into docs/screenshots (browser test)
screenshots: tools-check
	FLOWD_SCREENSHOTS=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run TestDashboardInABrowser ./cmd/flowd

## bench: every figure of docs/benchmarks.md from one run (cmd/flowbench; loopback only, bounded, a few minutes); not in make test
BENCHFLAGS ?=
bench: build
	@command -v wrk >/dev/null || { echo "make bench: installing the load generator wrk (apt-get install -y wrk)"; \
		apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; } || \
		{ echo "make bench: wrk is missing and could not be installed; install it with: apt-get install -y wrk"; exit 1; }; }
	$(GO) run ./cmd/flowbench -flowd $(BIN)/flowd -out docs/benchmarks.md $(BENCHFLAGS)

## bench-compare: make bench, plus a before/after table of (b) and (c) against flowd built from BASE (a commit, default HEAD~1)
BASE ?= HEAD~1
bench-compare: build
	@rm -rf $(BIN)/base-src && mkdir -p $(BIN)/base-src && git archive $(BASE) | tar -x -C $(BIN)/base-src
	cd $(BIN)/base-src && $(GO) build -trimpath -o ../flowd-base ./cmd/flowd
	@rm -rf $(BIN)/base-src
	$(MAKE) --no-print-directory bench BENCHFLAGS="-baseline $(BIN)/flowd-base $(BENCHFLAGS)"

## lint: vet, staticcheck (a tool of go.mod: `go tool staticcheck`) and gofmt
lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

## tools-check: what the tests need beyond Go, with a clear message when missing
tools-check:
	@command -v curl >/dev/null || { echo "make: the walkthrough tests need curl (apt-get install -y curl)"; exit 1; }
	@command -v jq >/dev/null || { echo "make: the walkthrough tests need jq (apt-get install -y jq)"; exit 1; }
	@command -v moto_server >/dev/null || { echo "make: the AWS adapter tests need moto_server (pip install 'moto[server]')"; exit 1; }
	@command -v chromium >/dev/null || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); LOG=$$(mktemp); \
		printf "make: installing Debian's chromium for the dashboard's browser tests (apt-get install chromium)... "; \
		if { $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >$$LOG 2>&1; then \
			echo done; rm -f $$LOG; \
		else \
			echo failed; tail -n 20 $$LOG; rm -f $$LOG; \
			echo "make: could not install chromium; install it yourself (apt-get install -y chromium) and run make test again"; exit 1; \
		fi; }
	@{ command -v initdb >/dev/null && command -v pg_ctl >/dev/null; } || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); LOG=$$(mktemp); \
		printf "make: installing Debian's postgresql for the PostgreSQL store's tests, which start a throwaway cluster (apt-get install postgresql)... "; \
		if { $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; } >$$LOG 2>&1; then \
			echo done; rm -f $$LOG; \
		else \
			echo failed; tail -n 20 $$LOG; rm -f $$LOG; \
			echo "make: could not install postgresql; install it yourself (apt-get install -y postgresql) and run make test again"; exit 1; \
		fi; }

clean:
	rm -rf $(BIN) .aws-sam

# ---------------------------------------------------------------- AWS Lambda
# template.yaml builds each function with `BuildMethod: makefile`: `sam build`
# runs build-<LogicalId> with ARTIFACTS_DIR set. The functions run on
# provided.al2023 / arm64 as a static binary named bootstrap.

LAMBDAS        := api webhook workflowhook runner code
LAMBDA_GOFLAGS := -tags lambda.norpc -trimpath -ldflags "-s -w"
LAMBDA_ENV     := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
ENV            ?= default

# Logical IDs in template.yaml, and the event `make invoke-<function>` sends
# unless EVENT=<file in events/> says otherwise.
LOGICAL_api          := ApiFunction
LOGICAL_webhook      := WebhookFunction
LOGICAL_workflowhook := WorkflowHookFunction
LOGICAL_runner       := RunnerFunction
LOGICAL_code         := CodeFunction
EVENT_api            := api-list-flows.json
EVENT_webhook        := webhook-post.json
EVENT_workflowhook   := workflowhook-post.json
EVENT_runner         := runner-batch.json
EVENT_code           := code-invoke.json

## lint-template: cfn-lint template.yaml; errors and warnings both fail
lint-template:
	@command -v cfn-lint >/dev/null || { echo "make: the template check needs cfn-lint (pip install cfn-lint)"; exit 1; }
	cfn-lint template.yaml

## build-lambdas: every function's bootstrap into bin/lambda/<name>/ (linux/arm64)
build-lambdas:
	@for f in $(LAMBDAS); do \
		echo "build bin/lambda/$$f/bootstrap"; \
		$(LAMBDA_ENV) $(GO) build $(LAMBDA_GOFLAGS) -o $(BIN)/lambda/$$f/bootstrap ./functions/$$f || exit 1; \
	done

## build-<LogicalId>: what `sam build` runs for each function (needs ARTIFACTS_DIR)
build-ApiFunction build-WebhookFunction build-WorkflowHookFunction build-RunnerFunction build-CodeFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "make: $@ is run by sam build, which sets ARTIFACTS_DIR"; exit 1; }
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_GOFLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(FUNC_$(@:build-%=%))

FUNC_ApiFunction          := api
FUNC_WebhookFunction      := webhook
FUNC_WorkflowHookFunction := workflowhook
FUNC_RunnerFunction       := runner
FUNC_CodeFunction         := code

## invoke-<function>: the function's real bootstrap under the Lambda Runtime Interface Emulator, as
## `sam local invoke` runs it but without Docker or sam (deploy/cmd/lambdalocal, docs/aws.md): built for
## this machine, with template.yaml's environment, against a moto_server it starts and seeds; prints the
## answer. EVENT=<file in events/> picks another event.
## SAM=1 uses sam and Docker instead, with an env-vars file (deploy/samenv): STACK=<stack name> reads a
## deployed stack's outputs with awscli; without STACK, the stage MOTO_STAGE is provisioned on
## AWS_ENDPOINT_URL (a moto_server the container can reach: moto_server -H 0.0.0.0).
STACK      ?=
MOTO_STAGE ?= local
SAM        ?=
invoke-%:
	@test -n "$(LOGICAL_$*)" || { echo "make: no function $* (one of: $(LAMBDAS))"; exit 1; }
	@if [ "$(SAM)" = 1 ]; then $(MAKE) --no-print-directory sam-invoke-$*; else \
		$(GO) run ./deploy/cmd/lambdalocal -bin $(BIN) -function $* -event events/$(or $(EVENT),$(EVENT_$*)); fi

sam-invoke-%:
	@command -v sam >/dev/null || { echo "make: SAM=1 needs the SAM CLI and Docker; without SAM=1, make invoke-$* needs neither"; exit 1; }
	@mkdir -p .aws-sam
	@if [ -n "$(STACK)" ]; then \
		aws cloudformation describe-stacks --stack-name "$(STACK)" --output json > .aws-sam/stack.json && \
		$(GO) run ./deploy/cmd/samenv -stack-json .aws-sam/stack.json -o .aws-sam/env.json; \
	else \
		test -n "$$AWS_ENDPOINT_URL" || { echo "make: set STACK=<deployed stack>, or AWS_ENDPOINT_URL to a moto_server"; exit 1; }; \
		AWS_REGION=$${AWS_REGION:-us-east-1} AWS_ACCESS_KEY_ID=$${AWS_ACCESS_KEY_ID:-testing} AWS_SECRET_ACCESS_KEY=$${AWS_SECRET_ACCESS_KEY:-testing} \
		$(GO) run ./deploy/cmd/samenv -moto "$(MOTO_STAGE)" -o .aws-sam/env.json; \
	fi
	sam build $(LOGICAL_$*)
	sam local invoke $(LOGICAL_$*) -e events/$(or $(EVENT),$(EVENT_$*)) --config-env $(ENV) --env-vars .aws-sam/env.json \
		--add-host host.docker.internal:host-gateway

## invoke-all: every events/ file through its function's real bootstrap under the emulator (one moto_server,
## one build per function), each answer checked; part of make test
invoke-all:
	$(GO) run ./deploy/cmd/lambdalocal -bin $(BIN) -all

## coldstart: each function's real bootstrap started fresh COLDSTARTS times under the emulator against moto:
## init (to its first Runtime API poll), init CPU, the first invocation (docs/aws.md "Cold starts"); a benchmark, not in make test
COLDSTARTS ?= 5
coldstart:
	$(GO) run ./deploy/cmd/lambdalocal -bin $(BIN) -coldstart $(COLDSTARTS)

## deploy: sam build, then sam deploy with samconfig.toml's ENV environment (default or prod); not run by CI
deploy:
	sam build
	sam deploy --config-env $(ENV)
