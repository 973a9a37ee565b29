# Sourced by hack/kubelet/e2e.sh and recorded.sh (with the node's env, lib.sh
# and a step function): the ring check and the scenarios of issue 46 on one
# StatefulSet, $NS/$STS, each ended by after (ring settled, then $CHECK).
# shellcheck shell=bash
step "the kshard CLI (ring checks)"
cli=$(mktemp -d)/kshard
(cd "$REPO_ROOT" && nice -n 10 go build -o "$cli" ./cmd/kshard)

# The workload the scenarios act on: namespace, StatefulSet (ring) name,
# and the check after each scenario (empty: the ring's only).
NS=${NS:-kshard-system}
STS=${STS:-example-operator}
CHECK=${CHECK:-}

# settled N: waits (up to 120 s) until the ring has N members, all active
# and live at their targets, with no partition unclaimed or claimed twice;
# prints how long it took and how many Leases of departed replicas remain
# (with the labels component's --keep-place-on-leave=true a leaver's Lease
# stays, outside the ring, until its peers collect it as long expired).
settled() {
  local n=$1 t=$SECONDS st
  while :; do
    st=$("$cli" status -n "$NS" -o json 2>/dev/null || true)
    if [[ -n $st ]] && jq -e --argjson n "$n" '.rings[0] as $r |
        ($r.ringMembers | length) == $n and
        $r.unclaimed == 0 and $r.overlapping == 0 and $r.malformed == 0 and
        all($r.members[] | select(.identity as $i | $r.ringMembers | index($i));
          .state == "active" and .health == "live" and .partitions == .target)' \
        <<<"$st" >/dev/null; then
      break
    fi
    if ((SECONDS - t > 120)); then
      "$cli" status -n "$NS" >&2 || true
      die "the ring did not settle on $n members within 120 s"
    fi
    sleep 0.5
  done
  log "ring settled on $n members in $((SECONDS - t)) s ($(jq '.rings[0] | (.members | length) - (.ringMembers | length)' <<<"$st") Leases of departed replicas left)"
}

# after N: what every scenario ends with: the ring settled on N members,
# then the workload's own check ($CHECK: the Widgets reconciled, or nothing
# for the recorded workload, whose records are checked at the end).
after() {
  settled "$1"
  [[ -z $CHECK ]] || "$CHECK"
}

evict() {
  kubectl create --raw "/api/v1/namespaces/$NS/pods/$1/eviction" -f - <<EOF2
{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"$1","namespace":"$NS"}}
EOF2
}

# scenarios: the issue's scenarios, in order, on $NS/$STS.
scenarios() {
  local t pod out
  settled 3
  [[ -z $CHECK ]] || "$CHECK"

  step "$STS: runtime kill of each pod's process (SIGKILL under the runtime; first crash: restart in place)"
  for pod in "$STS-0" "$STS-1" "$STS-2"; do
    "$KUBELET_HACK/crash.sh" "$pod" "$NS"
    settled 3
  done
  [[ -z $CHECK ]] || "$CHECK"

  step "$STS: kubectl rollout restart"
  t=$SECONDS
  kubectl -n "$NS" rollout restart "statefulset/$STS"
  kubectl -n "$NS" rollout status "statefulset/$STS" --timeout=300s
  log "rollout restart complete in $((SECONDS - t)) s"
  after 3

  step "$STS: kubectl delete pod"
  t=$SECONDS
  kubectl -n "$NS" delete pod "$STS-1" --wait=true
  kubectl -n "$NS" rollout status "statefulset/$STS" --timeout=300s
  log "pod deleted and replaced in $((SECONDS - t)) s"
  after 3

  step "$STS: eviction against the PodDisruptionBudget (maxUnavailable 1)"
  # The disruption controller must count 3 healthy pods first.
  kubectl -n "$NS" wait "pdb/$STS" --for=jsonpath='{.status.disruptionsAllowed}'=1 --timeout=60s
  t=$SECONDS
  evict "$STS-0" >/dev/null
  log "evicted $STS-0"
  # While it is down (terminating or not yet Ready), a second eviction must
  # be refused: 429 TooManyRequests.
  if out=$(evict "$STS-2" 2>&1); then
    die "the PDB let a second pod be evicted while $STS-0 was down"
  fi
  grep -q "disruption budget\|TooManyRequests\|429" <<<"$out" || die "the second eviction failed otherwise than by the PDB: $out"
  log "second eviction refused by the PDB: $(tr '\n' ' ' <<<"$out" | cut -c1-200)"
  kubectl -n "$NS" rollout status "statefulset/$STS" --timeout=300s
  log "evicted pod replaced in $((SECONDS - t)) s"
  after 3

  step "$STS: scale 3 -> 5 -> 2"
  kubectl -n "$NS" scale "statefulset/$STS" --replicas=5
  kubectl -n "$NS" rollout status "statefulset/$STS" --timeout=300s
  after 5
  kubectl -n "$NS" scale "statefulset/$STS" --replicas=2
  kubectl -n "$NS" wait --for=delete "pod/$STS-2" "pod/$STS-3" "pod/$STS-4" --timeout=120s
  after 2
}

