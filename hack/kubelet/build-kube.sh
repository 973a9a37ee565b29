#!/usr/bin/env bash
# Builds (or finds in the cache) the kubelet, kube-scheduler and kubectl of
# the Kubernetes release hack/tools/kubelet pins, and prints their directory.
# The same recipe as the kit's control-plane build (go build, version stamped
# into the binaries), from a module of its own so the kit's pins stay as they
# are; ~10 min the first time on a quiet 2-core machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RECIPE="go build -ldflags version-stamped v1: kubelet kube-scheduler kubectl"
version=$(kube_version)
dir=$CACHE_ROOT/kubelet-$version-$(key "$REPO_ROOT/hack/tools/kubelet/go.mod" "$REPO_ROOT/hack/tools/kubelet/go.sum")
if [[ -x $dir/kubelet && -x $dir/kube-scheduler && -x $dir/kubectl ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$CACHE_ROOT"
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "building kubelet, kube-scheduler and kubectl $version into $dir (first time only)"
start=$SECONDS
(cd "$REPO_ROOT/hack/tools/kubelet" && GOWORK=off GOFLAGS=-mod=mod nice -n 10 go build -ldflags "$(ldflags "$version")" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "built kubelet, kube-scheduler and kubectl $version in $((SECONDS - start)) s"
echo "$dir"
