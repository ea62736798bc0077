# execbox. `make test` is the test command the README gives and .ci/run runs.

GO         ?= go
PKG        := github.com/execbox/execbox
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X $(PKG)/internal/cli.Version=$(VERSION)
# Benchmarks: time per benchmark, and a bound on the whole run.
BENCHTIME  ?= 1s
BENCHFLAGS ?= -benchtime=$(BENCHTIME) -benchmem -count=1 -timeout=20m
STATICCHECK_VERSION ?= v0.8.2
# test-vm: whose tests (a module root: another worktree works), which
# configurations, a -test.run and -test.skip filter, the packages, the bound
# on each configuration, and any other flag of internal/vmtest (-vms, -cpus,
# -race, -mem). Which tests run on which host kind is internal/vmtest's
# selection (see VM.md); VM_RUN replaces it, VM_SKIP adds to it.
VM_SRC     ?= $(CURDIR)
VM_CONFIGS ?= v2 v1 v2-delegated rootless rootless-delegated
VM_RUN     ?=
VM_SKIP    ?=
VM_PKGS    ?=
VM_TIMEOUT ?= 30m
VM_FLAGS   ?=

# Fuzzing: time per target for make fuzz, and for the brief CI pass.
FUZZTIME       ?= 30s
SMOKE_FUZZTIME ?= 2s

.PHONY: all build test test-vm fmt-check vet bench lint fuzz fuzz-smoke clean

all: build

## build: the execbox binary, in bin/: static (no cgo), so that the
## sandbox's init and agent, which are this binary re-executed, start
## without the dynamic loader (0.8 ms each per sandbox on a 2-core VM)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/execbox ./cmd/execbox

## test: gofmt check, go vet, and every test (integration ones included) under the race detector
test: fmt-check vet
	$(GO) test -race -count=1 -timeout=20m -tags integration ./...

## test-vm: the sandbox's tests of the host kind in VMs with Debian's stock
## kernel, per configuration (v2, v1, v2-delegated, rootless,
## rootless-delegated), two guests at once; see VM.md. Needs root, qemu-system-x86,
## busybox-static and apt (the kernel is fetched once into /var/cache/execbox-vm).
test-vm:
	$(GO) run ./internal/vmtest -src '$(VM_SRC)' -configs '$(VM_CONFIGS)' \
		-run '$(VM_RUN)' -skip '$(VM_SKIP)' -pkgs '$(VM_PKGS)' -timeout '$(VM_TIMEOUT)' $(VM_FLAGS)

## fmt-check: fail, listing them, if any Go file is not gofmt-formatted
fmt-check:
	@files=$$(gofmt -l .); \
	if [ -n "$$files" ]; then echo "gofmt: these files need formatting (run gofmt -w):" >&2; echo "$$files" >&2; exit 1; fi

vet:
	$(GO) vet -tags integration ./...

## bench: every benchmark, once, bounded by BENCHTIME each (tests are skipped)
bench:
	$(GO) test -run '^$$' -bench . $(BENCHFLAGS) ./...

## fuzz: every fuzz target (func FuzzXxx in a _test.go file), FUZZTIME each;
## a failing input is written to the package's testdata/fuzz: commit it with the fix
fuzz:
	@$(MAKE) --no-print-directory fuzz-targets FUZZ_FOR=$(FUZZTIME)

## fuzz-smoke: every fuzz target briefly (SMOKE_FUZZTIME each), as CI runs them
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz-targets FUZZ_FOR=$(SMOKE_FUZZTIME)

# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime ends while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27): such a failure, with no failing
# input written, is checked by replaying the target's corpus instead.
fuzz-targets:
	@set -e; out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+' . | sort -u | \
	while IFS=: read -r file fn; do \
		name=$${fn#func }; pkg=./$$(dirname "$${file#./}"); \
		echo "fuzz: $$pkg $$name ($(FUZZ_FOR))"; \
		if ! $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_FOR) "$$pkg" >"$$out" 2>&1; then \
			cat "$$out"; \
			if grep -q 'context deadline exceeded' "$$out" && ! grep -q 'Failing input written' "$$out"; then \
				echo "fuzz: $$name: the coordinator's deadline race (go.dev/issue/75804), no failing input: replaying the corpus"; \
				$(GO) test -run "^$$name\$$" "$$pkg"; \
			else \
				exit 1; \
			fi; \
		else \
			tail -n 3 "$$out"; \
		fi; \
	done

## lint: vet plus staticcheck (fetched through the Go module proxy)
lint: fmt-check vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...

clean:
	rm -rf bin
