#!/usr/bin/env bash
# Builds (or finds in the cache) the kubebuilder CLI and the controller-gen
# its scaffold uses, both pinned by this tools module, and the
# ServiceMonitor CRD generated from the pinned prometheus-operator API; prints
# the directory holding them. The cache root is the control plane's
# (KSHARD_CACHE_DIR, else $XDG_CACHE_HOME/kshard, else ~/.cache/kshard), and
# the entry's name hashes this module's go.mod, go.sum and the recipe below,
# so a changed pin builds a new entry and a second run builds nothing.
# Concurrent runs build once (a file lock).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Part of the cache key: change it when what is built or how changes.
recipe="kubebuilder controller-gen servicemonitor-crd v1"
root=${KSHARD_CACHE_DIR:-${XDG_CACHE_HOME:+$XDG_CACHE_HOME/kshard}}
root=${root:-$HOME/.cache/kshard}
version=$(awk '$1=="sigs.k8s.io/kubebuilder/v4" && $2 ~ /^v/ {print $2}' "$here/go.mod")
if [[ -z "$version" ]]; then
  echo "ensure.sh: $here/go.mod does not require sigs.k8s.io/kubebuilder/v4" >&2
  exit 1
fi
key=$( { cat "$here/go.mod" "$here/go.sum"; echo "$recipe"; } | sha256sum | cut -c1-12)
dir="$root/kubebuilder-$version-$key"
if [[ -f "$dir/done" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$root"
exec 9>"$root/kubebuilder.lock"
flock 9
if [[ ! -f "$dir/done" ]]; then
  echo "ensure.sh: building kubebuilder $version and controller-gen into $dir (first time only)" >&2
  tmp="$dir.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp/crds"
  # Module mode: this module is outside the repository's workspace.
  (cd "$here" && GOWORK=off go build -o "$tmp/" \
    sigs.k8s.io/kubebuilder/v4 sigs.k8s.io/controller-tools/cmd/controller-gen)
  (cd "$here" && GOWORK=off "$tmp/controller-gen" crd \
    paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
    output:crd:dir="$tmp/crds")
  test -x "$tmp/kubebuilder" && test -x "$tmp/controller-gen" &&
    test -s "$tmp/crds/monitoring.coreos.com_servicemonitors.yaml"
  touch "$tmp/done"
  rm -rf "$dir"
  mv "$tmp" "$dir"
fi
echo "$dir"
