# kshard's build and test entry points. `make test` is what CI runs.
GO        ?= go
GOTEST    ?= $(GO) test
# e2e suites start real control planes and OS-process replicas; give them room.
TEST_TIMEOUT ?= 45m
FUZZTIME  ?= 10s

.PHONY: test binaries fmt-check vet unit fuzz tidy-check

## test: everything CI checks — binaries, formatting, vet, tests with -race (unit, integration and e2e against a real API server), a short fuzz run.
test: binaries fmt-check vet unit fuzz

## binaries: build (first time, ~3-5 min) or reuse the cached kube-apiserver, etcd and kube-controller-manager.
binaries:
	$(GO) run ./hack/ensure-controlplane

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GOTEST) -race -count=1 -timeout $(TEST_TIMEOUT) ./...

fuzz:
	@if [ -d shard ] && grep -qs FuzzDecodePartitionSet shard/*_test.go; then \
		$(GOTEST) -run='^$$' -fuzz=FuzzDecodePartitionSet -fuzztime=$(FUZZTIME) ./shard/; \
	fi
