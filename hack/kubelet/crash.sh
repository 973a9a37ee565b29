#!/usr/bin/env bash
# Kills the operator process of one pod under the runtime (SIGKILL through
# ctr, as an OOM kill or a crash would end it: no SIGTERM, no graceful
# leave) and measures, from the kubelet's own statuses and the restarted
# process's log, how fast the crash is proven and the replica's partitions
# are held again. Only a container's first crash restarts at once (the
# kubelet backs off after), so use each pod once. Run with the node up:
#   hack/kubelet/crash.sh example-operator-1
# Prints one line of figures; exits non-zero when the pod does not restart
# in place, its status lacks the proof (exit code 137, reason Error, the
# incarnation as message) or the new process does not take its Lease over.
# With RECORDS=DIR (the recorded workload's hostPath), it records the kill
# and the death for the test kit's checker as the harness does (KindKill at
# the SIGKILL, KindExit when the kubelet's status showed the container
# terminated: no earlier than the real death, so the checker can only err
# towards reporting), for the process whose record file was written last.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
eval "$("$KUBELET_HACK/node.sh" env)"
pod=${1:?usage: hack/kubelet/crash.sh POD [NAMESPACE]}
ns=${2:-kshard-system}
ctr="ctr --address $CONTAINERD_ADDRESS -n k8s.io"
cs='{.status.containerStatuses[0]'
cid=$(kubectl -n "$ns" get pod "$pod" -o jsonpath="$cs.containerID}")
rc=$(kubectl -n "$ns" get pod "$pod" -o jsonpath="$cs.restartCount}")
[[ $cid == containerd://* ]] || die "pod $ns/$pod has no running container (containerID '$cid')"
now() { date +%s.%N; }
watch=$(mktemp)
trap 'rm -f "$watch"' EXIT
# Every status the API server sends, stamped on arrival.
kubectl -n "$ns" get pod "$pod" -w -o jsonpath="rc=$cs.restartCount} ready=$cs.ready} state=$cs.state}{\"\\n\"}" |
  while IFS= read -r l; do echo "$(now) $l"; done > "$watch" &
wpid=$!
# The watch's first event (the current state) shows it is established.
until grep -q "rc=$rc ready=true" "$watch"; do sleep 0.05; done
victim=
if [[ -n ${RECORDS:-} ]]; then
  victim=$(ls -t "$RECORDS/$pod"-*.jsonl 2>/dev/null | head -n 1)
  [[ -n $victim ]] || die "no record file of $pod in $RECORDS"
  victim=$(basename "$victim" .jsonl)
  victim=${victim#"$pod"-}
fi
t0=$(now)
$ctr tasks kill -s SIGKILL "${cid#containerd://}" 2>/dev/null
next=$((rc + 1))
deadline=$((SECONDS + 60))
until grep -q "rc=$next ready=true" "$watch"; do
  ((SECONDS < deadline)) || { kill "$wpid"; die "pod $ns/$pod did not restart in place and become Ready within 60 s"; }
  sleep 0.05
done
kill "$wpid" 2>/dev/null || true
first() { awk -v p="$1" 'index($0, p) {print $1; exit}' "$watch"; }
t_term=$(first 'state={"terminated"')
t_run=$(first "rc=$next ready=false state={\"running\"")
t_ready=$(first "rc=$next ready=true")
last=$(kubectl -n "$ns" get pod "$pod" -o jsonpath="$cs.lastState.terminated}")
code=$(jq -r .exitCode <<<"$last")
reason=$(jq -r .reason <<<"$last")
msg=$(jq -r .message <<<"$last")
lastid=$(jq -r .containerID <<<"$last")
[[ $code == 137 && $reason == Error && $msg == kshard.io/incarnation=* && $lastid == "$cid" ]] ||
  die "pod $ns/$pod: the last state is not the proof kshard reads: $last"
if [[ -n $victim ]]; then
  printf '{"kind":"kill","replica":"%s","incarnation":"%s","at":%s}\n{"kind":"exit","replica":"%s","incarnation":"%s","at":%s,"code":-1}\n' \
    "$pod" "$victim" "${t0/./}" "$pod" "$victim" "${t_term/./}" >> "$RECORDS/driver.jsonl"
fi
logts() { kubectl -n "$ns" logs "$pod" | jq -rR --arg m "$1" 'fromjson? | select(.msg == $m) | .ts' | head -n 1; }
took=$(logts "took over own Lease")
[[ -n $took ]] || die "pod $ns/$pod: the new process logged no \"took over own Lease\""
started=$(logts "serving")
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f", (b - a) * 1000}'; }
epoch() { date -d "$1" +%s.%N; }
printf '%s: kill -> terminated status %s ms, -> new process %s ms, -> running status %s ms, -> own Lease taken over %s ms, -> Ready %s ms (exit %s, %s, message %q)\n' \
  "$pod" "$(ms "$t0" "$t_term")" "$(ms "$t0" "$(epoch "$started")")" "$(ms "$t0" "${t_run:-$t_ready}")" \
  "$(ms "$t0" "$(epoch "$took")")" "$(ms "$t0" "$t_ready")" "$code" "$reason" "$msg"
