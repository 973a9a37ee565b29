#!/usr/bin/env bash
# Re-pins the tools module to one Kubernetes version: k8s.io/kubernetes at
# VERSION (e.g. v1.36.3), every staging module at the matching v0.x.y, and
# etcd's server at the version that Kubernetes release requires. This version
# is the one variable naming the control plane kshard tests against. It also
# copies go.mod and go.sum into the test kit (internal/kittools).
#
# With -o DIR it writes the pinned go.mod and go.sum into DIR instead (created
# if missing) and leaves hack/tools and the kit alone: `make compat` keeps one
# such module per version it tests (hack/tools/compat/v1.MINOR), each built by
# `go run ./hack/ensure-controlplane -tools-dir DIR` into the shared cache.
set -euo pipefail
usage="usage: hack/tools/pin.sh [-o DIR] vX.Y.Z"
out=
while getopts "o:" opt; do
  case $opt in
    o) out=$OPTARG ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
KUBE_VERSION=${1:?$usage}
if [[ ! $KUBE_VERSION =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
  echo "pin.sh: $KUBE_VERSION is not a Kubernetes release version like v1.36.3" >&2
  exit 2
fi
STAGING_VERSION=v0.${KUBE_VERSION#v1.}
tools=$(cd "$(dirname "$0")" && pwd)
if [[ -n $out ]]; then
  mkdir -p "$out"
  dir=$(cd "$out" && pwd)
else
  dir=$tools
fi
cd "$dir"
# Module mode: this module is outside the repository's workspace, and go get
# here must write this module's go.sum, not a go.work.sum.
export GOWORK=off
modfile=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
if [[ -z $modfile ]]; then
  echo "pin.sh: the module proxy does not serve k8s.io/kubernetes@${KUBE_VERSION}" >&2
  exit 1
fi
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$modfile")
{
  printf 'module github.com/kshard/kshard/hack/tools\n\ngo 1.26.0\n\nreplace (\n'
  awk '/=> .\/staging\/src\//{print "\t"$1" => "$1" '"${STAGING_VERSION}"'"}' "$modfile"
  printf ')\n'
} > go.mod
rm -f go.sum
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@${KUBE_VERSION}" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@${KUBE_VERSION}" \
  "go.etcd.io/etcd/server/v3@${etcd_version}"
if [[ -n $out && ! -f go.work ]]; then
  # Outside the repository's workspace, like hack/tools (make module-check
  # fails on a module that is neither in go.work nor has its own).
  printf '%s\n' "// This pinned tools module (hack/tools/pin.sh -o) is kept out of the" \
    "// repository's workspace (go.work at the root), whose versions its" \
    "// dependencies would change; this file makes go commands run here use this" \
    "// module's go.mod alone." "go 1.26.0" "" "use ." > go.work
fi
if [[ -z $out ]]; then
  # The test kit carries copies, so it can build from the module cache alone
  # (this nested module is not in kshard's module zip).
  kit=$tools/../../internal/kittools
  cp go.mod "$kit/tools.mod"
  cp go.sum "$kit/tools.sum"
fi
echo "pinned Kubernetes ${KUBE_VERSION} (staging ${STAGING_VERSION}, etcd ${etcd_version}) in $dir"
