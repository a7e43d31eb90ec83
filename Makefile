# pyexec — see README.md. `make run` starts the service, `make test` runs every test.
GO      ?= go
BIN     := bin/pyexec
PKGS    := ./...

.PHONY: all build cross run test test-go test-vm lint bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/pyexec

# cross builds the CLI for every platform it ships on; off Linux it is a
# client only (serve, doctor, env and --local say that they need Linux).
CROSS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cross:
	@for p in $(CROSS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "build $$p"; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -o bin/cross/pyexec-$$os-$$arch$$ext ./cmd/pyexec || exit 1; \
	done

run: build
	./$(BIN) serve

# test installs what the tests need (Go modules, the Python client's and the
# fuzzer's packages) and runs them all, with the race detector, then fuzzes
# the served OpenAPI document for a few minutes (python/fuzz-api.sh).
# Privileged tests run when executed as root (as in CI).
test:
	$(GO) mod download
	./scripts/install-chromium.sh
	$(GO) vet $(PKGS)
	$(MAKE) cross
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	./python/run-tests.sh -q
	./clients/typescript/test.sh
	./python/fuzz-api.sh

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
