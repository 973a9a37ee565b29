# Shared by the hack/kubelet scripts (sourced, not run): where things are
# cached and how a build is keyed. Every build lands in the kit's cache
# (KSHARD_CACHE_DIR, default ~/.cache/kshard) under a directory named by its
# version and a hash of its pins and recipe, so a change of pins builds anew
# and an unchanged one is reused.
# shellcheck shell=bash
KUBELET_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$KUBELET_HACK/../.." && pwd)
CACHE_ROOT=${KSHARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kshard}
# Where a running node keeps its state; short, since containerd's shim
# sockets live below it and a unix socket path is limited to 108 bytes.
NODE_RUN=${KSHARD_NODE_RUN:-/run/kshard-node}
# The network namespace of the node and the veth pair joining it to the host.
NODE_NETNS=kshard-node
HOST_VETH=ksn-host
NODE_VETH=ksn-node
HOST_IP=10.233.0.1
NODE_IP=10.233.0.2
POD_CIDR=10.234.0.0/24
SERVICE_CIDR=10.96.0.0/16
NODE_NAME=kshard-node

log() { printf '%s kubelet-e2e: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

# key FILE... prints a short hash over the files' bytes and $RECIPE.
key() {
  { cat "$@"; printf '%s' "${RECIPE:-}"; } | sha256sum | cut -c1-12
}

# kube_version prints the k8s.io/kubernetes version the tools module pins.
kube_version() {
  awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$REPO_ROOT/hack/tools/kubelet/go.mod"
}

# ldflags VERSION stamps the version as release builds (and the kit's
# control-plane build) do, so /version and kubectl version report it.
ldflags() {
  local v=${1#v}
  local major=${v%%.*} rest=${v#*.}
  local minor=${rest%%.*}
  local pkg=k8s.io/component-base/version
  printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean' \
    "$pkg" "$1" "$pkg" "$major" "$pkg" "$minor" "$pkg"
}
