# Flow service: one Makefile for the local server, the tests and the Lambdas.
# `make run` starts flowd; `make test` is the one test command (CI runs it).

GO        ?= go
BIN       := bin
DATA_DIR  ?= .flowd
GOFLAGS_TEST ?= -count=1

.PHONY: all build run test bench lint fmt clean tools-check

all: build

## build: the local binaries flowd and flowctl into bin/
build:
	$(GO) build -trimpath -o $(BIN)/flowd ./cmd/flowd
	$(GO) build -trimpath -o $(BIN)/flowctl ./cmd/flowctl

## run: start flowd on FLOWD_ADDR (default 127.0.0.1:8080) with data in $(DATA_DIR)
run: build
	FLOWD_DATA_DIR=$(DATA_DIR) ./$(BIN)/flowd

## test: vet, then every test (unit, HTTP, store contracts, README walkthrough)
test: tools-check
	$(GO) vet ./...
	$(GO) test $(GOFLAGS_TEST) ./...

## bench: the Go benchmarks, recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## lint: vet and gofmt
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

## tools-check: what the tests need beyond Go, with a clear message when missing
tools-check:
	@command -v curl >/dev/null || { echo "make: the README walkthrough test needs curl (apt-get install -y curl)"; exit 1; }
	@command -v jq >/dev/null || { echo "make: the README walkthrough test needs jq (apt-get install -y jq)"; exit 1; }

clean:
	rm -rf $(BIN)
