#!/usr/bin/env bash
# make kubelet-e2e: brings up the one-node cluster (node.sh up), checks that
# a pod of the pause image runs, imports the operator image of `make image`,
# applies deploy/ through hack/kubelet/overlay and waits for the StatefulSet's
# pods to become Ready through their real probes; then takes the node down
# (KSHARD_KUBELET_KEEP=1 leaves it up for inspection; node.sh down later).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
NODE=$KUBELET_HACK/node.sh
total=$SECONDS

cleanup() {
  local rc=$?
  if [[ ${KSHARD_KUBELET_KEEP:-} == 1 ]]; then
    log "leaving the node up (KSHARD_KUBELET_KEEP=1): eval \"\$($NODE env)\"; $NODE down when done"
  else
    "$NODE" down || rc=1
  fi
  log "total $((SECONDS - total)) s, exit $rc"
  exit $rc
}
trap cleanup EXIT

step() { log "== $*"; }

step "node up"
"$NODE" up
eval "$("$NODE" env)"
ctr="ctr --address $CONTAINERD_ADDRESS -n k8s.io"

step "a pod of the pause image"
t=$SECONDS
kubectl run kshard-pause --image=localhost/kshard/pause:v1 --image-pull-policy=Never --restart=Never
kubectl wait --for=condition=Ready pod/kshard-pause --timeout=120s
kubectl get pod kshard-pause -o wide
kubectl delete pod kshard-pause --wait=true --timeout=60s
log "pause pod ran and was deleted in $((SECONDS - t)) s"

step "operator image (make image) imported"
t=$SECONDS
make -C "$REPO_ROOT" image >&2
$ctr images import "$REPO_ROOT/_output/image/example-operator.tar" >&2
$ctr images ls -q | grep -F example-operator >&2
log "operator image built and imported in $((SECONDS - t)) s"

step "deploy/ applied through hack/kubelet/overlay"
t=$SECONDS
kubectl apply -k "$KUBELET_HACK/overlay"
kubectl -n kshard-system rollout status statefulset/example-operator --timeout=300s
kubectl -n kshard-system get pods -o wide
log "StatefulSet Ready in $((SECONDS - t)) s"
