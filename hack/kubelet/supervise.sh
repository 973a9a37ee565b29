#!/usr/bin/env bash
# Runs the node's daemons inside its network namespace (node.sh up starts it
# under `ip netns exec`; not meant to be run by hand) and owns them: it starts
# each in order, waiting for the one before to serve; marks $NODE_RUN/ready
# once the node is Ready; on SIGTERM (node.sh down), or when any daemon
# exits, stops them in reverse order and exits.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$NODE_RUN/bins.env"
R=$NODE_RUN
LOGS=$R/logs
PKI=$R/pki
KUBECTL=$BIN_KUBE/kubectl

# mount(8), which the kubelet runs for its volumes, records options in
# /run/mount/utab unless told otherwise.
export LIBMOUNT_UTAB=$R/utab

# The host's cgroup hierarchies, again (node.sh up lists them): the fresh
# /sys of `ip netns exec` has none. Mounted in this mount namespace only.
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
while read -r target fstype opts; do
  mkdir -p "$target"
  mount -t "$fstype" -o "$opts" cgroup "$target"
done < "$NODE_RUN/cgroup-mounts"

# Join the run's cgroup in every hierarchy: every process started from here,
# the containers' shims included, inherits it, so node.sh down finds them.
for h in /sys/fs/cgroup/*/; do
  [[ -e ${h}kshard-node/cgroup.procs ]] && echo $$ > "${h}kshard-node/cgroup.procs"
done

declare -A pids=()
order=()
start() {
  local name=$1
  shift
  "$@" >"$LOGS/$name.log" 2>&1 &
  pids[$name]=$!
  order+=("$name")
  log "started $name (pid $!)"
}

stopping=0
stop_all() {
  stopping=1
  local i name
  for ((i = ${#order[@]} - 1; i >= 0; i--)); do
    name=${order[i]}
    kill -TERM "${pids[$name]}" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "${pids[$name]}" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "${pids[$name]}" 2>/dev/null || true
    wait "${pids[$name]}" 2>/dev/null || true
    log "stopped $name"
  done
}
trap 'log "SIGTERM: stopping"; stop_all; exit 0' TERM INT

# await WHAT CMD... retries CMD every 0.2 s for up to 120 s; fails naming WHAT
# when a daemon exits first or the time runs out.
await() {
  local what=$1
  shift
  local t=$SECONDS name
  until "$@" >/dev/null 2>&1; do
    for name in "${order[@]}"; do
      kill -0 "${pids[$name]}" 2>/dev/null || { log "$name exited while waiting for $what; last lines of its log:"; tail -n 30 "$LOGS/$name.log" >&2; stop_all; exit 1; }
    done
    ((SECONDS - t < 120)) || { log "timed out waiting for $what"; stop_all; exit 1; }
    sleep 0.2
  done
  log "$what after $((SECONDS - t)) s"
}

# Routing between the pods' bridge and the veth (pods reach the host side
# only for replies; the API server is on this namespace's own address).
sysctl -qw net.ipv4.ip_forward=1

start etcd "$BIN_CP/etcd" --name=kshard-node --data-dir="$R/etcd" \
  --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
  --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
  --initial-cluster=kshard-node=http://127.0.0.1:2380 --unsafe-no-fsync=true --log-level=warn
await "etcd healthy" curl -sf http://127.0.0.1:2379/health

start kube-apiserver "$BIN_CP/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
  --kubelet-preferred-address-types=InternalIP \
  --kubelet-client-certificate="$PKI/kubelet-client.crt" --kubelet-client-key="$PKI/kubelet-client.key" \
  --cert-dir="$R/apiserver-certs" --profiling=false
await "kube-apiserver ready" curl -sfk "https://$NODE_IP:6443/readyz"

start kube-controller-manager "$BIN_CP/kube-controller-manager" \
  --kubeconfig="$R/kcm.kubeconfig" --controllers='*' --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10257 \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --use-service-account-credentials=false --allocate-node-cidrs=false \
  --authentication-skip-lookup=true --authorization-always-allow-paths=/healthz,/readyz,/livez
start kube-scheduler "$BIN_KUBE/kube-scheduler" \
  --kubeconfig="$R/scheduler.kubeconfig" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10259 \
  --authentication-skip-lookup=true --authorization-always-allow-paths=/healthz,/readyz,/livez
await "kube-controller-manager healthy" curl -sfk https://127.0.0.1:10257/healthz
await "kube-scheduler healthy" curl -sfk https://127.0.0.1:10259/healthz

start containerd "$BIN_CTRD/containerd" --config "$R/containerd/config.toml"
await "containerd serving" "$BIN_CTRD/ctr" --address "$R/containerd.sock" version
for img in "$R"/images/*.tar; do
  "$BIN_CTRD/ctr" --address "$R/containerd.sock" -n k8s.io images import "$img" >&2
  log "imported $(basename "$img")"
done

start kubelet "$BIN_KUBE/kubelet" --config="$R/kubelet/config.yaml" \
  --kubeconfig="$R/kubelet.kubeconfig" --root-dir="$R/kubelet/root" --cert-dir="$R/kubelet/pki" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=2
export KUBECONFIG=$R/admin.kubeconfig
await "node $NODE_NAME registered" "$KUBECTL" get node "$NODE_NAME"
await "node $NODE_NAME Ready" "$KUBECTL" wait --for=condition=Ready --timeout=2s node "$NODE_NAME"
touch "$R/ready"

# Serve until told to stop; a daemon that exits on its own ends the run.
while ((!stopping)); do
  if ! wait -n; then :; fi
  ((stopping)) && break
  for name in "${order[@]}"; do
    if ! kill -0 "${pids[$name]}" 2>/dev/null; then
      log "$name exited on its own; last lines of its log:"
      tail -n 30 "$LOGS/$name.log" >&2
      stop_all
      exit 1
    fi
  done
done
