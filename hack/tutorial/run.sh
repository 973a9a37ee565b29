#!/usr/bin/env bash
# make tutorial-check: run docs/tutorial.md as a reader would, outside the
# repository. The checkout is published into a file:// module proxy at a
# local version (hack/kitcheck/lib.sh), which the page's `go get …@v0.1.0`
# takes instead; every other module comes from the module cache or the
# configured proxy. hack/docscheck -tutorial turns the page into one script
# that writes its files and runs its shell blocks in order, in a scratch
# directory. KIT_BIN_DIR=dir gives the kit prebuilt control-plane binaries.
set -euo pipefail
source "$(dirname "$0")/../kitcheck/lib.sh"

publish
page="$root/docs/tutorial.md"
mkdir "$work/tutorial"
go -C "$root" run ./hack/docscheck -tutorial "$page" -version "$version" > "$work/tutorial.sh"
if [[ -n "${KIT_BIN_DIR:-}" ]]; then
  export KSHARD_BIN_DIR="$KIT_BIN_DIR"
fi
export GOPROXY="file://$work/proxy,$(go env GOPROXY)" GONOSUMDB=github.com/kshard/kshard GOFLAGS=-mod=mod GOWORK=off
unset KSHARD_TOOLS_DIR
start=$(date +%s)
cd "$work/tutorial"
if ! bash "$work/tutorial.sh" > "$work/tutorial.log" 2>&1; then
  tail -n 80 "$work/tutorial.log" >&2
  echo "tutorial-check: docs/tutorial.md failed (the script: hack/docscheck -tutorial docs/tutorial.md; the last 80 lines of its log above)" >&2
  exit 1
fi
grep -E '^(=== RUN|--- |PASS|FAIL|ok)|tutorial:|answered by|dry run|serverside-applied|controller-gen' "$work/tutorial.log" | grep -v '^+ ' || true
echo "tutorial-check: docs/tutorial.md ran end to end in $(( $(date +%s) - start ))s (kshard $version from file://$work/proxy)"
