#!/usr/bin/env bash
# make first-run: how long a newcomer's first `make demo`
# takes on this machine with empty caches — a fresh clone, an empty Go
# module cache and build cache, and an empty kshard binary cache, all in a
# temporary directory — measured at three points: the first line the demo
# prints, kshard built, the control plane up, and the handoff report. The Go module
# proxy is the one configured (go env GOPROXY). Output: the demo's lines
# with their seconds since start, then one summary line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/kshard-firstrun-XXXXXX)
cleanup() { chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
git clone -q "$root" "$work/kshard"
export GOMODCACHE="$work/gomodcache" GOCACHE="$work/gocache" KSHARD_CACHE_DIR="$work/kshard-cache" GOFLAGS=-modcacherw
unset KSHARD_BIN_DIR KSHARD_TOOLS_DIR
cd "$work/kshard"
echo "first-run: fresh clone of $(git rev-parse --short HEAD), empty caches in $work; load average $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
hack/demo.sh 2>&1 | while IFS= read -r line; do
  printf '%ss %s\n' "$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%7.1f", n - s }')" "$line"
done | tee "$work/demo.log"
at() { awk -v pat="$1" 'index($0, pat) { sub(/s$/, "", $1); print $1; exit }' "$work/demo.log"; }
first=$(awk 'NR==1 { sub(/s$/, "", $1); print $1 }' "$work/demo.log")
echo "first-run: first output after ${first:-?}s, kshard built after $(at 'kshard demo: built in')s, control plane up after $(at 'control plane up')s, handoff report after $(at 'Handoff gap')s (load average at the end $(cut -d' ' -f1-3 /proc/loadavg))"
