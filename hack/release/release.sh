#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: everything a release publishes, built and
# checked locally into _output/release/VERSION/ (pushing the tags and the
# image is the maintainer's step after it, see docs/install.md):
#
#   proxy/          both modules (github.com/kshard/kshard and its adapter,
#                   controller/crshard) at VERSION in a file:// module proxy,
#                   zipped as the Go module proxy serves them (hack/kitcheck)
#   image/          the example operator's image tagged VERSION (OCI layout
#                   and a docker-load archive, hack/image) and its module
#                   list (modules.txt, from the binary's build information)
#   RELEASE_NOTES.md  CHANGELOG.md's [Unreleased] section under VERSION
#
# and proves from outside the repository that a fresh kubebuilder project
# takes the adapter with `go get` from that proxy (no replace, no go.work),
# builds with GOWORK=off, tidies, and runs its Dockerfile's go steps.
set -euo pipefail
version=${1:?usage: hack/release/release.sh vX.Y.Z}
if [[ ! "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  echo "release: VERSION=$version is not a release version vX.Y.Z" >&2
  exit 2
fi
checkout=$(cd "$(dirname "$0")/../.." && pwd)
source "$checkout/hack/kitcheck/forget.sh"
out="$checkout/_output/release/$version"
if [[ -n "$(git -C "$checkout" status --porcelain --untracked-files=no)" && -z "${RELEASE_DIRTY:-}" ]]; then
  echo "release: the checkout has uncommitted changes; a release is built from a commit: commit them (or RELEASE_DIRTY=1 to build HEAD anyway)" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d /tmp/kshard-release-XXXXXX)
cleanup() {
  # The version exists only in this run's proxy: drop it from the module
  # cache so a later run (or a real release) is not served this build.
  forget_version "$version" "$work" github.com/kshard/kshard github.com/kshard/kshard/controller/crshard
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "release $version: $*"; }

# Everything is built from a clean clone of HEAD: the module zips hold
# exactly the committed files (never _output/ or a stray binary).
root="$work/src"
git clone -q "$checkout" "$root"
commit=$(git -C "$root" rev-parse HEAD)
step "building from commit $commit"

step "publishing both modules into file://$out/proxy"
go -C "$root/hack/kitcheck" run . -root "$root" -proxy "$work/proxy" -version "$version" -nested controller/crshard
mv "$work/proxy" "$out/proxy"

step "building the example operator's image"
mkdir -p "$out/image"
CGO_ENABLED=0 GOOS=linux go -C "$root" build -trimpath -o "$work/example-operator" ./cmd/example-operator
go version -m "$work/example-operator" | sed "1s|^[^:]*:|example-operator $version (commit $commit):|" > "$out/image/modules.txt"
go -C "$root/hack/image" run . -root "$root" -out "$out/image" -binary "$work/example-operator" \
  -ref "ghcr.io/kshard/example-operator:$version"

step "writing the release notes from CHANGELOG.md"
awk -v v="$version" -v d="$(date -u +%Y-%m-%d)" '
  /^## \[Unreleased\]/ { on = 1; print "# kshard " v " (" d ")"; next }
  on && /^## / { exit }
  on { print }
' "$root/CHANGELOG.md" > "$out/RELEASE_NOTES.md"
if [[ $(grep -c '^- ' "$out/RELEASE_NOTES.md") -eq 0 ]]; then
  echo "release: CHANGELOG.md's [Unreleased] section has no entries: nothing to release" >&2
  exit 1
fi

"$root/hack/release/consumer.sh" "$version" "$out/proxy" "$work/consumer"
echo "$commit" > "$out/COMMIT"
step "done: $out"
ls -l "$out" "$out/image"
