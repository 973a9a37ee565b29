#!/usr/bin/env bash
# make kit-check: prove the test kit works for a user who has kshard only in
# the module cache. It zips this checkout into a file:// module proxy as a
# fresh version, creates a scratch module outside the repo that requires that
# version (no replace), and runs the scratch module's 3-replica rolling
# restart test through the kit. By default the control-plane binaries are
# built through the kit's own tools module into an empty KSHARD_CACHE_DIR
# (quick when the Go build cache already holds the Kubernetes packages,
# ~25 min on a loaded 2-core machine when it does not); KIT_BIN_DIR=dir uses
# prebuilt binaries instead (KSHARD_BIN_DIR), e.g. in CI.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

check_tidy .
publish
scratch_module example.com/kitcheck scratch/kit_test.go.in github.com/kshard/kshard
if [[ -n "${KIT_BIN_DIR:-}" ]]; then
  export KSHARD_BIN_DIR="$KIT_BIN_DIR"
else
  unset KSHARD_BIN_DIR
  export KSHARD_CACHE_DIR="$work/cache"
fi
cd "$scratch"
start=$(date +%s)
go test -race -count=1 -v -timeout 60m . 2>&1 | tee "$work/test.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|kit-check:|kshard: (building|control-plane binaries built)|control plane up'
echo "kit-check: test run took $(( $(date +%s) - start ))s (binaries: ${KIT_BIN_DIR:-built through the kit into $work/cache})"
