#!/usr/bin/env bash
# Re-pins the tools module to one Kubernetes version: k8s.io/kubernetes at
# $1 (e.g. v1.36.3), every staging module at the matching v0.x.y, and etcd's
# server at the version that Kubernetes release requires. This version is the
# one variable naming the control plane kshard tests against. It also
# copies go.mod and go.sum into the test kit (manager/kshardtest/controlplane).
set -euo pipefail
KUBE_VERSION=${1:?usage: hack/tools/pin.sh vX.Y.Z}
STAGING_VERSION=v0.${KUBE_VERSION#v1.}
cd "$(dirname "$0")"
# Module mode: this module is outside the repository's workspace, and go get
# here must write this module's go.sum, not a go.work.sum.
export GOWORK=off
modfile=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
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
# The test kit carries copies, so it can build from the module cache alone
# (this nested module is not in kshard's module zip).
kit=../../manager/kshardtest/controlplane
cp go.mod "$kit/tools.mod"
cp go.sum "$kit/tools.sum"
echo "pinned Kubernetes ${KUBE_VERSION} (staging ${STAGING_VERSION}, etcd ${etcd_version})"
