# pyexec — see README.md. `make run` starts the service, `make test` runs every test.
GO      ?= go
BIN     := bin/pyexec
PKGS    := ./...
# -trimpath keeps the checkout's path out of what Go builds, and so out of
# its build cache's keys: a fresh clone in another folder (CI's) finds
# every package compiled by an earlier run on the machine.
GOFLAGS ?= -trimpath
export GOFLAGS

.PHONY: all build cross run test test-steps test-setup test-static test-go test-clients test-fuzz test-vm bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/pyexec

# cross builds the CLI for every platform it ships on; off Linux it is a
# client only (serve, doctor, env and --local say that they need Linux).
# The egress, which the CLI off Linux does not import, is vetted for darwin
# too (its tests included), so that its portable rules stay portable.
CROSS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cross:
	@for p in $(CROSS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "build $$p"; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -o bin/cross/pyexec-$$os-$$arch$$ext ./cmd/pyexec || exit 1; \
	done
	@echo "vet darwin ./internal/egress/..."
	@GOOS=darwin CGO_ENABLED=0 $(GO) vet ./internal/egress/...

run: build
	./$(BIN) serve

# test installs what the tests need (Go modules, Chromium, requests and
# httpx for the jails' interpreter, the Python client's and the fuzzer's
# packages) and runs them all, with the race detector, then fuzzes the
# served OpenAPI document for a fixed time
# (python/fuzz-api.sh). Privileged tests run when executed as root (as in
# CI). Its steps are the targets below, in this order; .ci/run times each.
TEST_STEPS := test-setup test-static test-go test-clients test-fuzz
test:
	@for step in $(TEST_STEPS); do $(MAKE) --no-print-directory $$step || exit 1; done

test-steps:
	@echo $(TEST_STEPS)

# The binaries every suite shares, built once: e2e, the Python and
# TypeScript suites and the fuzzer take pyexec and the test server launcher
# (internal/testserver/cmd/testserver) from PYEXEC_BINARY and
# PYEXEC_TESTSERVER instead of building their own.
TESTBIN := $(CURDIR)/bin/test
TESTENV := PYEXEC_BINARY=$(TESTBIN)/pyexec PYEXEC_TESTSERVER=$(TESTBIN)/testserver

test-setup:
	$(GO) mod download
	./scripts/install-chromium.sh
	./scripts/install-jail-python-libs.sh
	$(GO) build -o $(TESTBIN)/pyexec ./cmd/pyexec
	$(GO) build -o $(TESTBIN)/testserver ./internal/testserver/cmd/testserver

test-static:
	$(GO) vet $(PKGS)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(MAKE) --no-print-directory cross

# test-go starts the longest packages first: go test starts packages in
# the order given (duplicates dropped), two at a time on two cores, so a
# long one started last would run alone at the end. The order is measured
# (docs/testing.md, "Where the time went"); every package still runs, and
# PKGS other than ./... runs only what it names. internal/sandbox (150 s)
# is left at its place in ./..., after these: its suite fails if the host's
# mount table differs at its end, and these packages' servers mount and
# unmount workspace slots all the time (started beside e2e, it failed so).
SLOW_PKGS := ./e2e ./internal/api ./internal/store ./internal/engine/sessions ./internal/pool \
	./internal/pyenv/detect ./internal/engine/fleet ./internal/fleetsess ./internal/engine/executions ./internal/runner ./internal/pyenv
test-go:
	$(TESTENV) $(GO) test -race -count=1 -timeout 30m $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS)

test-clients:
	$(TESTENV) ./python/run-tests.sh -q
	$(TESTENV) ./clients/typescript/test.sh

test-fuzz:
	$(TESTENV) ./python/fuzz-api.sh

# test-vm boots a cgroup v2 only kernel in QEMU over this host's root and runs
# the jail suites and a serve smoke test there as root, in a container-like
# cgroup namespace and rootless (needs root; see scripts/test-vm.sh for the
# variables: SUITES, PARTS, ACCEL, VM_CPUS, VM_MEM, VM_TIMEOUT, TESTVM_DIR).
test-vm:
	./scripts/test-vm.sh

bench: build
	$(GO) run ./bench -pyexec $(BIN)

clean:
	rm -rf bin
