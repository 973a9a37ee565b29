#!/usr/bin/env bash
# Builds (or finds in the cache) kubectl of the Kubernetes release the
# control plane is pinned to (hack/tools), and prints its path. The tests
# that drive kubectl take it from KSHARD_KUBECTL, which make sets from this,
# so CI never depends on a kubectl installed by hand and never skips them.
# Same recipe as the kit's control-plane build (go build, version stamped),
# from a copy of hack/tools whose go.sum may grow by kubectl's modules: the
# pins themselves, and so the control plane's cache key, stay as they are.
# A few minutes the first time on 2 cores; then instant.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/hack/tools
cache=${KSHARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kshard}
recipe="go build -ldflags version-stamped v1: k8s.io/kubernetes/cmd/kubectl"
version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$tools/go.mod")
[[ -n $version ]] || { echo "ensure-kubectl: no k8s.io/kubernetes pin in $tools/go.mod" >&2; exit 1; }
key=$({ cat "$tools/go.mod" "$tools/go.sum"; printf '%s' "$recipe"; } | sha256sum | cut -c1-12)
dir=$cache/kubectl-$version-$key
if [[ -x $dir/kubectl ]]; then
  echo "$dir/kubectl"
  exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$tools/go.mod" "$tools/go.sum" "$tmp/"
v=${version#v}
major=${v%%.*}
rest=${v#*.}
minor=${rest%%.*}
pkg=k8s.io/component-base/version
ldflags="-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
echo "ensure-kubectl: building kubectl $version into $dir (first time only; a few minutes)" >&2
start=$SECONDS
(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod nice -n 10 go build -ldflags "$ldflags" -o "$tmp/bin/kubectl" k8s.io/kubernetes/cmd/kubectl)
mkdir -p "$tmp/out"
mv "$tmp/bin/kubectl" "$tmp/out/kubectl"
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "ensure-kubectl: built kubectl $version in $((SECONDS - start)) s" >&2
echo "$dir/kubectl"
