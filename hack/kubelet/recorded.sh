#!/usr/bin/env bash
# The recorded part of make kubelet-e2e, run by e2e.sh after deploy/'s (or
# alone, with the node up): the e2e test operator (e2e/testoperator) built
# into an image here and run as hack/kubelet/recorded's StatefulSet, each
# process recording every reconcile and ring event into a hostPath
# directory, under a ConfigMap writer (e2e/kubelet write) through the same
# scenarios; then the test kit's checker (e2e/kubelet check) over the
# records: no two processes reconciling a key at once, no partition active
# in two, no lost update, no existing object read as NotFound, every update
# reconciled within KSHARD_KUBELET_WITHIN (default 30s).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
eval "$("$KUBELET_HACK/node.sh" env)"
ctr="ctr --address $CONTAINERD_ADDRESS -n k8s.io"
step() { log "== $*"; }
NS=kshard-e2e
STS=kshard-e2e
CHECK=
. "$KUBELET_HACK/scenarios.sh"

step "the recorded workload: the e2e test operator, its image and the checker"
t=$SECONDS
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$REPO_ROOT" && CGO_ENABLED=0 nice -n 10 go build -o "$bin/testoperator" ./e2e/testoperator &&
  nice -n 10 go build -tags kubelete2e -o "$bin/driver" ./e2e/kubelet)
(cd "$KUBELET_HACK/pause" && GOWORK=off go run ./pack -binary "$bin/testoperator" -user 65532:65532 \
  -ref localhost/kshard/testoperator:e2e -out "$bin/testoperator.tar")
$ctr images import "$bin/testoperator.tar" >&2
RECORDS=$NODE_RUN/records
mkdir -p "$RECORDS"
chmod 1777 "$RECORDS"
export RECORDS
kubectl apply -k "$KUBELET_HACK/recorded"
kubectl -n kshard-e2e rollout status statefulset/kshard-e2e --timeout=300s
log "recorded workload Ready in $((SECONDS - t)) s"
"$bin/driver" write -namespace kshard-e2e -records "$RECORDS" 2> >(tee "$bin/writer.log" >&2) &
writer=$!
trap 'kill -TERM "$writer" 2>/dev/null || true; rm -rf "$bin"' EXIT
# -s: the writer may not have opened its log yet.
until grep -qs "ConfigMaps created" "$bin/writer.log"; do
  kill -0 "$writer" 2>/dev/null || die "the writer exited before creating its ConfigMaps"
  sleep 0.2
done
scenarios
kill -TERM "$writer"
wait "$writer"
step "the test kit's checker over $(ls "$RECORDS" | wc -l) record files"
# -await: the replicas still reconcile the writer's last updates.
"$bin/driver" check -records "$RECORDS" -within "${KSHARD_KUBELET_WITHIN:-30s}" -await 30s
log "recorded workload: all scenarios passed the checker"
