#!/usr/bin/env bash
# make demo: build the kshard CLI and the example operator with a progress
# line every 15 s (the first build with an empty Go build cache takes
# minutes and the go tool prints nothing while it compiles), then run
# `kshard demo` with the arguments given (make demo ARGS='--replicas 4').
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d /tmp/kshard-demo-bin-XXXXXX)
trap 'rm -rf "$bin"' EXIT
echo "kshard demo: building the kshard CLI and the example operator (seconds with a warm Go build cache; minutes on a first run, which also downloads the Go modules)"
start=$SECONDS
go build -o "$bin/" ./cmd/kshard ./cmd/example-operator &
build=$!
while kill -0 "$build" 2>/dev/null; do
  sleep 1
  if (( (SECONDS - start) % 15 == 0 )) && kill -0 "$build" 2>/dev/null; then
    echo "kshard demo: still building ($(( SECONDS - start ))s)"
  fi
done
wait "$build"
echo "kshard demo: built in $(( SECONDS - start ))s"
# The demo finds the example operator next to its own binary.
"$bin/kshard" demo "$@"
