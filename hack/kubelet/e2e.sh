#!/usr/bin/env bash
# make kubelet-e2e: brings up the one-node cluster (node.sh up), checks that
# a pod of the pause image runs, imports the operator image of `make image`,
# applies deploy/ through hack/kubelet/overlay and waits for the StatefulSet's
# pods to become Ready through their real probes; then runs the scenarios of
# issue 46 on it (runtime kills, rollout restart, pod deletion, eviction
# against the PDB, scaling 3 -> 5 -> 2), after each checking the ring (the
# kshard CLI: every partition claimed once, every member active and at its
# target) and that every Widget's latest generation gets reconciled; then
# takes the node down (KSHARD_KUBELET_KEEP=1 leaves it up for inspection;
# node.sh down later).
#
# Then the same scenarios on the recorded workload (hack/kubelet/recorded:
# the e2e test operator, recording every reconcile into a hostPath) under a
# ConfigMap writer, checked by the test kit's checker (e2e/kubelet).
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

. "$KUBELET_HACK/scenarios.sh"

# widgets_reconciled: bumps every Widget's spec (a new generation) and waits
# (up to 60 s) until each one's status shows that generation observed.
widgets=20
widgets_reconciled() {
  local t=$SECONDS size=$RANDOM i behind
  for ((i = 0; i < widgets; i++)); do
    kubectl -n widgets patch widget "w$i" --type=merge -p "{\"spec\":{\"size\":$size}}" >/dev/null
  done
  while :; do
    behind=$(kubectl -n widgets get widgets -o json |
      jq '[.items[] | select(.status.observedGeneration != .metadata.generation)] | length')
    ((behind == 0)) && break
    if ((SECONDS - t > 60)); then
      kubectl -n widgets get widgets -o custom-columns=NAME:.metadata.name,GEN:.metadata.generation,OBSERVED:.status.observedGeneration,BY:.status.reconciledBy >&2
      die "$behind Widgets not reconciled at their latest generation within 60 s"
    fi
    sleep 0.5
  done
  log "all $widgets Widgets reconciled at their latest generation in $((SECONDS - t)) s ($(kubectl -n widgets get widgets -o json | jq -r '[.items[].status.reconciledBy] | group_by(.) | map("\(.[0]): \(length)") | join(", ")'))"
}

step "deploy/'s StatefulSet through the scenarios, its Widgets checked after each"
for ((i = 0; i < widgets; i++)); do
  printf 'apiVersion: demo.kshard.io/v1alpha1\nkind: Widget\nmetadata: {name: w%d, namespace: widgets}\nspec: {color: blue, size: 1}\n' "$i"
  echo ---
done | kubectl apply -f - >/dev/null
CHECK=widgets_reconciled
scenarios
log "deploy/: all scenarios passed"
# Scaled to 0 rather than deleted: deleting the namespace would remove the
# replicas' RBAC before they remove their Leases' finalizers.
kubectl -n kshard-system scale statefulset/example-operator --replicas=0
kubectl -n kshard-system wait --for=delete pod -l app.kubernetes.io/name=example-operator --timeout=120s


"$KUBELET_HACK/recorded.sh"
