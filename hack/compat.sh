#!/usr/bin/env bash
# make compat: kshard's version matrix. For each Kubernetes minor named
# (default: COMPAT_VERSIONS from the Makefile), builds or reuses that pin's
# control plane in the kit's cache and runs, with KSHARD_BIN_DIR pointing at
# it: the Lease membership's integration tests (internal/membership, with the `kubectl get leases -L` columns of
# docs/operations.md), the ring's (the manager's two-replica tests on real
# Leases), the labels-mode cache's, a chaos subset in labels mode (crash under
# continuous updates, rolling restart, label tampering) and the adapter's
# chaos subset, COMPAT_ROUNDS rounds each; and what a paged consistent LIST
# costs the control plane there (e2e/compat's TestPagedConsistentListCost).
# Each version's block goes into
# e2e/compat/v1.MINOR.md (date, commit, version, per step PASS/FAIL, duration
# and summary lines); e2e/compat/RESULTS.md is regenerated from those blocks,
# so versions run at different times accumulate.
#
# Pins: hack/tools/compat/v1.MINOR (written by hack/tools/pin.sh -o), or
# hack/tools itself for the minor CI pins.
#
# usage: hack/compat.sh [1.34 1.35 ...]   (env: COMPAT_ROUNDS, default 3;
# COMPAT_LOGS, default /tmp/kshard-compat: full logs of every step)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOWORK=${GOWORK:-}
rounds=${COMPAT_ROUNDS:-3}
logs=${COMPAT_LOGS:-/tmp/kshard-compat}
out=e2e/compat
versions=("$@")
if (( ${#versions[@]} == 0 )); then
  echo "usage: hack/compat.sh 1.34 [1.35 ...]" >&2
  exit 2
fi
mkdir -p "$logs" "$out"

if ! command -v kubectl >/dev/null; then
  echo "compat: kubectl is not on PATH; the matrix checks the kubectl get leases -L columns on each server: install kubectl" >&2
  exit 1
fi

# toolsDir MINOR: the tools module pinning that minor.
toolsDir() {
  local v=$1
  if [[ -f hack/tools/compat/v$v/go.mod ]]; then
    echo "hack/tools/compat/v$v"
  elif grep -Eq "^[[:space:]]*k8s\.io/kubernetes v${v//./\\.}\." hack/tools/go.mod; then
    echo "hack/tools"
  else
    return 1
  fi
}

# The ring's integration tests are the manager's on a real API server
# (shard/ring's own tests use a fake clientset); the labels-mode cache's
# are the labelled cache's tests (internal/cache/labelled, shard/cache) and the manager's label-patch
# permission tests.
ring_tests='TestTwoReplicasShareKeysAndHandOffOnLeave|TestOtherRingConfigurationRefusesToJoin|TestUnreachableAPIServerAtStartIsNotReadyAndRetries|TestGarbageLeaseBlocksUntilItExpires|TestRefusingReplicaDoesNotStallTheRing|TestOwnLeaseDeletedOrRelabelledRecovers|TestMissingLeaseNamespaceIsNamedInReadyz'
labels_cache_tests='TestLabelledCache|TestForeignLabelValuesAreRelabelledAndCounted|TestSelfCheckFindsAnObjectMissingFromTheStore'
labels_manager_tests='TestNoPatchPermissionCachesTheKindWhole|TestLabelPatchRefusedAtRuntimeIsReported'
chaos_tests='TestCrashesUnderContinuousUpdates|TestRollingRestart$|TestLabelTampering'

ensure=$(mktemp -d)/ensure-controlplane
trap 'rm -rf "$(dirname "$ensure")"' EXIT
go build -o "$ensure" ./hack/ensure-controlplane || exit 1

commit=$(git rev-parse --short HEAD)
if [[ -n $(git status --porcelain --untracked-files=no -- ':!e2e/compat') ]]; then
  commit="$commit+dirty"
fi
status=0
for v in "${versions[@]}"; do
  if ! tools=$(toolsDir "$v"); then
    echo "compat: no pin for Kubernetes $v: run hack/tools/pin.sh -o hack/tools/compat/v$v v$v.PATCH (the newest patch the module proxy serves)" >&2
    status=1
    continue
  fi
  echo "compat: Kubernetes $v from $tools"
  t0=$(date +%s)
  # The kit takes KSHARD_BIN_DIR over the tools module when it is set: the
  # previous version's export made a run of "1.36 1.37" test 1.36 twice.
  if ! bin=$(env -u KSHARD_BIN_DIR "$ensure" -tools-dir "$tools" -print-dir 2> >(tee "$logs/$v-build.log" >&2)); then
    echo "compat: building the $v control plane failed (log: $logs/$v-build.log)" >&2
    status=1
    continue
  fi
  build_s=$(( $(date +%s) - t0 ))
  kube=$("$bin/kube-apiserver" --version | awk '{print $2}')
  etcdv=$("$bin/etcd" --version | awk '/etcd Version/{print $3}')
  if [[ $kube != "v$v."* ]]; then
    echo "compat: the binaries in $bin are kube-apiserver $kube, not Kubernetes $v: check the pin in $tools" >&2
    status=1
    continue
  fi
  export KSHARD_BIN_DIR=$bin
  block=$(mktemp)
  {
    echo "## Kubernetes $kube"
    echo
    echo "$(date -u +%Y-%m-%d), commit $commit, etcd $etcdv, kubectl $(kubectl version --client 2>/dev/null | awk '/Client Version/{print $3}'), rounds $rounds, binaries from $tools (ready in ${build_s} s)"
    echo
  } > "$block"
  fails=0
  # step NAME DIR CMD...: runs CMD in DIR, logging to $logs/$v-NAME.log,
  # and records PASS/FAIL, the time taken and the tests passed/skipped.
  step() {
    local name=$1 dir=$2; shift 2
    local log=$logs/$v-$name.log start rc
    start=$(date +%s)
    echo "compat: $v $name: $*"
    (cd "$dir" && "$@") > "$log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - start ))
    local passed skipped
    passed=$(grep -c -- '^--- PASS' "$log")
    skipped=$(grep -c -- '^--- SKIP' "$log")
    local verdict=PASS
    # A step whose tests all moved away passes vacuously: no test run is a
    # failure, naming the package to look in.
    if (( rc != 0 )) || (( passed + skipped == 0 )); then verdict=FAIL; fails=$((fails + 1)); fi
    if (( rc == 0 && passed + skipped == 0 )); then
      echo "  - no test ran in $dir: $* matches none (did the tests move?)" >> "$block"
    fi
    echo "- $name: $verdict in ${took} s ($passed passed, $skipped skipped)" >> "$block"
    grep -h -A1 -- '^--- SKIP' "$log" | grep -v -- '^--- SKIP\|^--$' | sed 's/^ */  - skipped: /' >> "$block"
    if [[ $verdict == FAIL ]]; then
      echo "compat: $v $name failed (log: $log):" >&2
      grep -E -- '^--- FAIL|^FAIL|panic:' "$log" | head -20 >&2
      grep -h -- '^--- FAIL' "$log" | sed 's/^/  - /' >> "$block"
    fi
  }
  step lease . go test -race -count=1 -v -run 'TestIntegration' ./internal/membership/
  # The kubectl columns: the lease test runs `kubectl get leases -L` as
  # docs/operations.md documents and fails on missing columns; it skips that
  # check only without kubectl, which this script requires.
  if grep -q -- '^--- PASS: TestIntegrationLeaseFormatHeartbeatAndKubectl' "$logs/$v-lease.log"; then
    {
      echo "- kubectl get leases -L kshard.io/state,kshard.io/partitions on this server:"
      echo
      awk '/kubectl:$/{f=1; next} f && /^[[:space:]]+NAME/{p=1} p && !/demo-r-0|NAME/{exit} p{sub(/^[[:space:]]+/, "    "); print}' "$logs/$v-lease.log"
      echo
    } >> "$block"
  else
    echo "- kubectl columns: FAIL (TestIntegrationLeaseFormatHeartbeatAndKubectl did not pass)" >> "$block"
    fails=$((fails + 1))
  fi
  step ring . go test -race -count=1 -v -run "$ring_tests" ./manager/
  step labels-cache . go test -race -count=1 -v -run "$labels_cache_tests" ./shard/cache/ ./internal/cache/labelled/
  step labels-manager . go test -race -count=1 -v -run "$labels_manager_tests" ./manager/
  rm -f "$logs/$v-chaos.summary" "$logs/$v-adapter.summary" "$logs/$v-list-cost.summary"
  step list-cost . env KSHARD_COMPAT_SUMMARY="$logs/$v-list-cost.summary" \
    go test -count=1 -v -run TestPagedConsistentListCost ./e2e/compat/
  step chaos . env KSHARD_CHAOS_SUMMARY="$logs/$v-chaos.summary" \
    go test -race -count=1 -timeout 0 -v -run "$chaos_tests" ./e2e/chaos/ -labels -rounds="$rounds"
  step adapter e2e/bench/crshardop env KSHARD_CHAOS_SUMMARY="$logs/$v-adapter.summary" \
    go test -race -count=1 -timeout 0 -v -run TestConvertedOperatorChaos . -rounds="$rounds"
  {
    echo
    for s in list-cost chaos adapter; do
      if [[ -s $logs/$v-$s.summary ]]; then
        sed 's/^/    /' "$logs/$v-$s.summary"
      else
        echo "    ($s wrote no summary line)"
      fi
    done
    echo
    if (( fails == 0 )); then echo "Result: PASS"; else echo "Result: FAIL ($fails steps)"; status=1; fi
  } >> "$block"
  mv "$block" "$out/v$v.md"
  echo "compat: $v done: $(tail -1 "$out/v$v.md")"
done

# RESULTS.md: every version's latest block, newest Kubernetes first.
{
  echo "# Kubernetes version matrix"
  echo
  echo "Generated by \`make compat\` (hack/compat.sh) from the blocks beside it (e2e/compat/v1.MINOR.md), one per"
  echo "version, each from its own run: date, kshard commit, the binaries' versions, each step's result and the"
  echo "chaos suites' summary lines (overlaps, lost and notfound_existing must be 0). docs/install.md's"
  echo "\"Tested versions\" table summarises it."
  for f in $(ls "$out"/v1.*.md 2>/dev/null | sort -t. -k2,2nr); do
    echo
    cat "$f"
  done
} > "$out/RESULTS.md"
exit $status
