#!/usr/bin/env bash
# Builds (or finds in the cache) containerd, its runc shim and ctr at the
# version hack/tools/containerd pins, and prints their directory.
# CGO_ENABLED=0 as containerd's static release builds: the btrfs snapshotter
# (cgo, needs headers) is left out; the node uses overlayfs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RECIPE="CGO_ENABLED=0 go build -ldflags version v1: containerd containerd-shim-runc-v2 ctr"
mod=$REPO_ROOT/hack/tools/containerd
version=$(awk '$1=="github.com/containerd/containerd/v2"{print $2; exit}' "$mod/go.mod")
[[ -n $version ]] || die "$mod/go.mod does not require github.com/containerd/containerd/v2"
dir=$CACHE_ROOT/containerd-$version-$(key "$mod/go.mod" "$mod/go.sum")
if [[ -x $dir/containerd && -x $dir/containerd-shim-runc-v2 && -x $dir/ctr ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "building containerd $version into $dir (first time only)"
start=$SECONDS
(cd "$mod" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build \
  -tags no_btrfs \
  -ldflags "-X github.com/containerd/containerd/v2/version.Version=$version" -o "$tmp/" \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr)
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "built containerd $version in $((SECONDS - start)) s"
echo "$dir"
