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
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/kshard-kitcheck-XXXXXX)
version="v0.0.0-local.$(date -u +%Y%m%d%H%M%S)"
modcache=$(go env GOMODCACHE)
cleanup() {
  # The version exists only for this run: drop it from the module cache.
  chmod -R u+w "$modcache/github.com/kshard/kshard@$version" 2>/dev/null || true
  rm -rf "$modcache/github.com/kshard/kshard@$version" \
    "$modcache/cache/download/github.com/kshard/kshard/@v/$version".* "$work"
}
trap cleanup EXIT
# The scratch module's go mod tidy needs what tidying kshard needs (every
# go.mod of the graph, and the modules of its dependencies' tests); a module
# cache filled by builds alone lacks some (seen: go-spew v1.1.1's go.mod,
# gopkg.in/check.v1), so let a dry tidy of the checkout fetch them first.
go -C "$root" mod tidy -diff > /dev/null
echo "kit-check: publishing $root as github.com/kshard/kshard@$version in file://$work/proxy"
go -C "$root/hack/kitcheck" run . -root "$root" -proxy "$work/proxy" -version "$version"

mkdir "$work/scratch"
cp "$root/hack/kitcheck/scratch/kit_test.go.in" "$work/scratch/kit_test.go"
printf 'module example.com/kitcheck\n\ngo 1.26.0\n\nrequire github.com/kshard/kshard %s\n' "$version" > "$work/scratch/go.mod"

# kshard comes only from the file proxy (no checksum database knows this
# version); every other module from the module cache, as the checkout's
# go.sum pins them.
export GOPROXY="file://$work/proxy" GONOSUMDB=github.com/kshard/kshard GOFLAGS=-mod=mod GOWORK=off
unset KSHARD_TOOLS_DIR
if [[ -n "${KIT_BIN_DIR:-}" ]]; then
  export KSHARD_BIN_DIR="$KIT_BIN_DIR"
else
  unset KSHARD_BIN_DIR
  export KSHARD_CACHE_DIR="$work/cache"
fi
cd "$work/scratch"
# The scratch go.sum starts from kshard's: the same versions, already
# verified when the checkout's modules were downloaded.
cp "$root/go.sum" go.sum
go mod tidy
if grep -rq "$root" go.mod go.sum; then echo "kit-check: the scratch module refers to the checkout" >&2; exit 1; fi
start=$(date +%s)
go test -race -count=1 -v -timeout 60m . 2>&1 | tee "$work/test.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|kit-check:|kshard: (building|control-plane binaries built)|control plane up'
echo "kit-check: test run took $(( $(date +%s) - start ))s (binaries: ${KIT_BIN_DIR:-built through the kit into $work/cache})"
