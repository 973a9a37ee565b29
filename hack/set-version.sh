#!/usr/bin/env bash
# hack/set-version.sh vX.Y.Z: the release step before tagging. kshard and
# the adapter are released together at one version (docs/install.md), so
# controller/crshard/go.mod requires github.com/kshard/kshard at the
# version being released, and go.work resolves that version to the
# checkout; this sets both. Commit, then tag the commit vX.Y.Z and
# controller/crshard/vX.Y.Z.
set -euo pipefail
version=${1:?usage: hack/set-version.sh vX.Y.Z}
if [[ ! "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  echo "set-version: $version is not a release version vX.Y.Z" >&2
  exit 1
fi
cd "$(dirname "$0")/.."
old=$(awk '$1 == "github.com/kshard/kshard" && $2 ~ /^v/ {print $2; exit}' controller/crshard/go.mod)
go -C controller/crshard mod edit -require="github.com/kshard/kshard@$version"
go work edit -dropreplace="github.com/kshard/kshard@$old" -replace="github.com/kshard/kshard@$version=./"
echo "set-version: controller/crshard requires github.com/kshard/kshard $version (was $old); go.work resolves it to the checkout"
