#!/usr/bin/env bash
# make module-check: prove that kshard's published modules install and work
# as a user gets them. It checks that every module is tidy and that the
# published go.mod files (the root's and controller/crshard's) have no
# replace, publishes both at one fresh local version into a file:// module
# proxy as a release would (the adapter requiring kshard at that version),
# creates a scratch
# module outside the repo that requires only the adapter (no replace), and
# builds and runs its test: a tiny controller-runtime operator converted
# with the adapter, two replicas on a real control plane, reconciling
# ConfigMaps split between them, then leaving the ring. It also fails when
# the repository's go.work makes the published modules build with other
# versions than their users get. KIT_BIN_DIR=dir uses prebuilt control-plane
# binaries (KSHARD_BIN_DIR); otherwise the kit's cache provides them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
began=$(date +%s)

# Every module is in the repository's workspace or has a go.work of its own
# (docs/install.md): go commands run in a module that the workspace does not
# list fail, saying so.
mapfile -t uses < <(go -C "$root" work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
while read -r mod; do
  for use in "${uses[@]}"; do
    if [[ "$(realpath -m "$root/$use")" == "$(realpath -m "$root/$mod")" ]]; then continue 2; fi
  done
  if [[ ! -f "$root/$mod/go.work" ]]; then
    echo "module-check: $mod is neither in go.work nor has a go.work of its own: go commands run there fail; add it to one (docs/install.md says which)" >&2
    exit 1
  fi
done < <(cd "$root" && git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod' | xargs -n1 dirname)

# deps DIR PATTERN...: "path version" of every module providing a package
# that PATTERN's packages or their tests import, but kshard's own modules.
deps() {
  go -C "$1" list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "${@:2}" |
    grep -v '^github.com/kshard/kshard[ /]' | sort -u
}
# What the workspace builds the published modules with, and what kshard's
# users get without it.
deps "$root" ./... > "$work/root.workspace"
GOWORK=off deps "$root" ./... > "$work/root.alone"
deps "$root/controller/crshard" ./... > "$work/crshard.workspace"

# Every module, not only the published ones: a go.mod that disagrees with
# the graph (say, an e2e module's requirement of kshard below the one the
# adapter requires) breaks builds outside the workspace.
check_tidy
publish controller/crshard
scratch_module example.com/modulecheck consumer/operator_test.go.in github.com/kshard/kshard/controller/crshard
got=$(go -C "$scratch" list -m -f '{{.Version}}' github.com/kshard/kshard)
if [[ "$got" != "$version" ]]; then
  echo "module-check: the adapter at $version brings github.com/kshard/kshard $got, not the same version" >&2
  exit 1
fi
deps "$scratch" github.com/kshard/kshard/controller/crshard/... > "$work/crshard.user"

consistent() {
  if ! diff -u "$work/$2" "$work/$3" > "$work/diff"; then
    echo "module-check: $1" >&2
    cat "$work/diff" >&2
    exit 1
  fi
}
consistent "go.work changes the versions github.com/kshard/kshard is built and tested with (-: its go.mod alone, +: the workspace); raise them in its go.mod (make tidy) or keep the module that raises them out of go.work" root.alone root.workspace
consistent "the adapter is built and tested in the workspace with other versions than its users get (-: users, +: the workspace); align the go.mod files of the workspace's modules" crshard.user crshard.workspace

if [[ -n "${KIT_BIN_DIR:-}" ]]; then export KSHARD_BIN_DIR="$KIT_BIN_DIR"; fi
cd "$scratch"
start=$(date +%s)
if ! go test -race -count=1 -v -timeout 10m . > "$work/test.log" 2>&1; then
  tail -n 200 "$work/test.log"
  echo "module-check: FAIL: the consumer module's test failed (log above)" >&2
  exit 1
fi
grep -E '^(=== RUN|--- |PASS|ok)|module-check:|control plane up' "$work/test.log"
echo "module-check: ok: a module outside the repo, with kshard and the adapter at $version from a module proxy and no replace, built and ran its sharded controller-runtime operator (test $(( $(date +%s) - start ))s, whole check $(( $(date +%s) - began ))s)"
