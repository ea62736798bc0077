# execbox. `make test` is the test command the README gives and .ci/run runs.

GO         ?= go
PKG        := github.com/execbox/execbox
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X $(PKG)/internal/cli.Version=$(VERSION)
# Benchmarks: time per benchmark, and a bound on the whole run.
BENCHTIME  ?= 1s
BENCHFLAGS ?= -benchtime=$(BENCHTIME) -benchmem -count=1 -timeout=20m
STATICCHECK_VERSION ?= v0.8.2

.PHONY: all build test fmt-check vet bench lint clean

all: build

## build: the execbox binary, in bin/
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/execbox ./cmd/execbox

## test: gofmt check, go vet, and every test (integration ones included) under the race detector
test: fmt-check vet
	$(GO) test -race -count=1 -tags integration ./...

## fmt-check: fail, listing them, if any Go file is not gofmt-formatted
fmt-check:
	@files=$$(gofmt -l .); \
	if [ -n "$$files" ]; then echo "gofmt: these files need formatting (run gofmt -w):" >&2; echo "$$files" >&2; exit 1; fi

vet:
	$(GO) vet -tags integration ./...

## bench: every benchmark, once, bounded by BENCHTIME each (tests are skipped)
bench:
	$(GO) test -run '^$$' -bench . $(BENCHFLAGS) ./...

## lint: vet plus staticcheck (fetched through the Go module proxy)
lint: fmt-check vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...

clean:
	rm -rf bin
