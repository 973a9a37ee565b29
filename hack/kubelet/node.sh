#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine for make kubelet-e2e: etcd,
# kube-apiserver, kube-controller-manager (all default controllers),
# kube-scheduler, containerd and a kubelet, every one built from pinned
# sources by the scripts beside this one and cached under ~/.cache/kshard.
#
#   node.sh up      build what is missing, start the node, wait for it Ready
#   node.sh down    stop everything and remove what up made (idempotent)
#   node.sh env     print the exports to use the cluster (KUBECONFIG, PATH)
#
# Isolation, so that down leaves nothing behind:
#   - network: everything runs in the network namespace kshard-node, joined
#     to the host by a veth pair (host 10.233.0.1, node 10.233.0.2; the
#     kubelet refuses a loopback node IP). Pods get 10.234.0.0/24 on a CNI
#     bridge inside it; nothing is routed or masqueraded on the host.
#   - mounts: the daemons share the mount namespace `ip netns exec` makes (a
#     slave of the host's), so the kubelet's volume mounts, containerd's
#     rootfs and pod-netns mounts never appear on the host and vanish with
#     the last process.
#   - processes: all of them, pods included (the kubelet's cgroupRoot), live
#     under the cgroup /kshard-node of every v1 hierarchy; down kills what is
#     in it, waits for it to empty and removes it.
#   - files: under $NODE_RUN (/run/kshard-node).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CGROUP=kshard-node
PAUSE_REF=localhost/kshard/pause:v1
APISERVER=https://$NODE_IP:6443

usage() { echo "usage: hack/kubelet/node.sh up|down|env|status" >&2; exit 2; }

# ensure_built sets BIN_CP, BIN_KUBE, BIN_CTRD and builds the pause archive.
ensure_built() {
  "$KUBELET_HACK/ensure-debs.sh"
  local t=$SECONDS
  BIN_CP=$(cd "$REPO_ROOT" && go run ./hack/ensure-controlplane -print-dir)
  log "control plane binaries: $BIN_CP ($((SECONDS - t)) s)"
  t=$SECONDS
  BIN_KUBE=$("$KUBELET_HACK/build-kube.sh")
  log "kubelet, kube-scheduler, kubectl: $BIN_KUBE ($((SECONDS - t)) s)"
  t=$SECONDS
  BIN_CTRD=$("$KUBELET_HACK/build-containerd.sh")
  log "containerd: $BIN_CTRD ($((SECONDS - t)) s)"
  mkdir -p "$NODE_RUN/images"
  (cd "$KUBELET_HACK/pause" && GOWORK=off go run ./pack -ref "$PAUSE_REF" -out "$NODE_RUN/images/pause.tar")
}

cgroup_dirs() {
  local h
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [[ -e $h/cgroup.procs ]] || continue
    echo "$h/$CGROUP"
  done
}

make_cgroups() {
  local d
  for d in $(cgroup_dirs); do
    mkdir -p "$d"
    if [[ -e $d/cpuset.cpus ]]; then
      # A new cpuset cgroup starts empty and takes no task until given cpus
      # and memory nodes.
      cat "$(dirname "$d")/cpuset.cpus" > "$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" > "$d/cpuset.mems"
    fi
  done
}

write_pki() {
  local p=$NODE_RUN/pki
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 3 \
    -subj /CN=kshard-node-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$p/apiserver.key" -out "$p/apiserver.csr" \
    -subj /CN=kube-apiserver 2>/dev/null
  printf '%s\n' "subjectAltName=IP:$NODE_IP,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
    "extendedKeyUsage=serverAuth" > "$p/apiserver.ext"
  openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -out "$p/apiserver.crt" -days 3 -extfile "$p/apiserver.ext" 2>/dev/null
  # The API server's client certificate towards the kubelet (logs, exec).
  openssl req -newkey rsa:2048 -nodes -keyout "$p/kubelet-client.key" -out "$p/kubelet-client.csr" \
    -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
  printf '%s\n' "extendedKeyUsage=clientAuth" > "$p/client.ext"
  openssl x509 -req -in "$p/kubelet-client.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -out "$p/kubelet-client.crt" -days 3 -extfile "$p/client.ext" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  # Static tokens: the node authenticates as system:node:NAME (the Node
  # authorizer and NodeRestriction apply to it); the rest are cluster admins.
  local admin kcm sched node
  admin=$(openssl rand -hex 16) kcm=$(openssl rand -hex 16) sched=$(openssl rand -hex 16) node=$(openssl rand -hex 16)
  {
    echo "$admin,kshard-admin,1,system:masters"
    echo "$kcm,system:kube-controller-manager,2,system:masters"
    echo "$sched,system:kube-scheduler,3,system:masters"
    echo "$node,system:node:$NODE_NAME,4,system:nodes"
  } > "$p/tokens.csv"
  kubeconfig "$NODE_RUN/admin.kubeconfig" "$admin"
  kubeconfig "$NODE_RUN/kcm.kubeconfig" "$kcm"
  kubeconfig "$NODE_RUN/scheduler.kubeconfig" "$sched"
  kubeconfig "$NODE_RUN/kubelet.kubeconfig" "$node"
}

kubeconfig() {
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kshard-node
  cluster:
    server: $APISERVER
    certificate-authority: $NODE_RUN/pki/ca.crt
users:
- name: user
  user:
    token: $2
contexts:
- name: kshard-node
  context: {cluster: kshard-node, user: user}
current-context: kshard-node
EOF
}

write_configs() {
  local r=$NODE_RUN
  mkdir -p "$r/cni" "$r/containerd" "$r/kubelet" "$r/logs"
  cat > "$r/cni/10-kshard.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kshard-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "kshard0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$r/cni/ipam"}
    },
    {"type": "loopback"}
  ]
}
EOF
  cat > "$r/containerd/config.toml" <<EOF
version = 4
root = "$r/containerd/root"
state = "$r/containerd/state"
# Nothing from the host's /etc/containerd, nothing written outside \$NODE_RUN.
imports = []

[plugins.'io.containerd.server.v1.grpc']
  address = "$r/containerd.sock"

[plugins.'io.containerd.server.v1.ttrpc']
  address = "$r/containerd.sock.ttrpc"

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = "$r/s"

# No NRI plugins here; left on it would create /var/run/nri.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$PAUSE_REF'

[plugins.'io.containerd.cri.v1.runtime']
  # The process lacks CAP_SYS_RESOURCE: lowering a score would fail.
  restrict_oom_score_adj = true
  # Pod netns mounts below state, inside this mount namespace.
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = ['$r/cdi']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '$(command -v runc)'
        # runc's state, by default in /run/containerd/runc.
        Root = '$r/runc'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$r/cni'
    max_conf_num = 1

[plugins.'io.containerd.internal.v1.opt']
  path = '$r/containerd/opt'

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
EOF
  cat > "$r/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd here, and these machines mount cgroup v1.
cgroupDriver: cgroupfs
failCgroupV1: false
# Pods (and their QoS cgroups) below the run's own cgroup.
cgroupRoot: /$CGROUP
containerRuntimeEndpoint: unix://$r/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $r/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
# A shared build machine: evict only on real exhaustion, never collect the
# imported images (nothing can pull them back).
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
EOF
}

up() {
  if [[ -e $NODE_RUN/supervisor.pid ]] && kill -0 "$(cat "$NODE_RUN/supervisor.pid")" 2>/dev/null; then
    die "a node is already running (pid $(cat "$NODE_RUN/supervisor.pid")); hack/kubelet/node.sh down first"
  fi
  down_quiet
  ensure_built
  write_pki
  write_configs
  # The network: a namespace, loopback up, a veth pair to the host.
  ip netns add "$NODE_NETNS"
  ip link add "$HOST_VETH" type veth peer name "$NODE_VETH"
  ip link set "$NODE_VETH" netns "$NODE_NETNS"
  ip addr add "$HOST_IP/30" dev "$HOST_VETH"
  ip link set "$HOST_VETH" up
  ip -n "$NODE_NETNS" link set lo up
  ip -n "$NODE_NETNS" addr add "$NODE_IP/30" dev "$NODE_VETH"
  ip -n "$NODE_NETNS" link set "$NODE_VETH" up
  ip -n "$NODE_NETNS" route add default via "$HOST_IP"
  make_cgroups
  # `ip netns exec` mounts a fresh /sys (so it shows the namespace's network
  # devices), which hides the host's cgroup mounts below it; the supervisor
  # mounts the same hierarchies again from this list.
  findmnt -rn -t cgroup,cgroup2 -o TARGET,FSTYPE,OPTIONS > "$NODE_RUN/cgroup-mounts"
  cat > "$NODE_RUN/bins.env" <<EOF
BIN_CP=$BIN_CP
BIN_KUBE=$BIN_KUBE
BIN_CTRD=$BIN_CTRD
EOF
  log "starting the node (logs in $NODE_RUN/logs)"
  setsid ip netns exec "$NODE_NETNS" "$KUBELET_HACK/supervise.sh" \
    </dev/null >"$NODE_RUN/logs/supervise.log" 2>&1 &
  echo $! > "$NODE_RUN/supervisor.pid"
  local t=$SECONDS
  until [[ -e $NODE_RUN/ready ]]; do
    if ! kill -0 "$(cat "$NODE_RUN/supervisor.pid")" 2>/dev/null; then
      tail -n 30 "$NODE_RUN/logs/supervise.log" >&2
      die "the node's supervisor exited; logs in $NODE_RUN/logs"
    fi
    ((SECONDS - t < 300)) || die "the node did not start within 300 s; logs in $NODE_RUN/logs"
    sleep 1
  done
  log "node up in $((SECONDS - t)) s; use it with: eval \"\$(hack/kubelet/node.sh env)\""
}

# down stops every process of the run (by its cgroup), then removes the
# network namespace, the cgroups and the files. Safe to run at any time.
down_quiet() {
  local pid
  if [[ -e $NODE_RUN/supervisor.pid ]]; then
    pid=$(cat "$NODE_RUN/supervisor.pid")
    # The supervisor stops the kubelet, then containerd, then the control
    # plane, each with SIGTERM; what is left is killed below.
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  local d procs left
  for round in $(seq 1 40); do
    left=0
    for d in $(cgroup_dirs); do
      [[ -d $d ]] || continue
      procs=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
      if [[ -n $procs ]]; then
        left=1
        # shellcheck disable=SC2086
        kill -KILL $procs 2>/dev/null || true
      fi
    done
    ((left)) || break
    sleep 0.25
  done
  ((left == 0)) || log "warning: processes remain in cgroup $CGROUP after 10 s"
  for d in $(cgroup_dirs); do
    [[ -d $d ]] || continue
    # Deepest first: a cgroup is removed only once its children are.
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if ip netns list | grep -qw "$NODE_NETNS"; then
    ip netns del "$NODE_NETNS"
  fi
  # ip netns add made /run/netns (a bind mount on itself); when no other
  # namespace is named there, remove it too.
  if [[ -d /run/netns && -z $(ls -A /run/netns) ]]; then
    umount -n /run/netns 2>/dev/null || true  # -n: no /run/mount/utab
    rmdir /run/netns 2>/dev/null || true
  fi
  ip link del "$HOST_VETH" 2>/dev/null || true
  if [[ -d $NODE_RUN ]]; then
    if findmnt -rn -o TARGET | grep -q "^$NODE_RUN"; then
      die "mounts remain under $NODE_RUN (findmnt | grep $NODE_RUN); not removing it"
    fi
    rm -rf "$NODE_RUN"
  fi
}

down() {
  down_quiet
  local leftover=()
  for d in $(cgroup_dirs); do [[ -d $d ]] && leftover+=("cgroup $d"); done
  ip netns list | grep -qw "$NODE_NETNS" && leftover+=("netns $NODE_NETNS")
  ip link show "$HOST_VETH" >/dev/null 2>&1 && leftover+=("link $HOST_VETH")
  [[ -e $NODE_RUN ]] && leftover+=("dir $NODE_RUN")
  findmnt -rn -o TARGET | grep -q "^$NODE_RUN\|^/run/netns/$NODE_NETNS" && leftover+=("mounts")
  pgrep -f "^$CACHE_ROOT/(kubelet|containerd)-v" >/dev/null && leftover+=("processes of binaries in $CACHE_ROOT")
  if ((${#leftover[@]})); then
    die "down left: ${leftover[*]}"
  fi
  log "node down; nothing left behind"
}

env_() {
  [[ -e $NODE_RUN/bins.env ]] || die "no node is up (hack/kubelet/node.sh up)"
  . "$NODE_RUN/bins.env"
  echo "export KUBECONFIG=$NODE_RUN/admin.kubeconfig"
  echo "export PATH=$BIN_KUBE:$BIN_CTRD:\$PATH"
  echo "export CONTAINERD_ADDRESS=$NODE_RUN/containerd.sock CONTAINERD_NAMESPACE=k8s.io"
}

case ${1:-} in
  up)
    # Namespaces, cgroups, mounts and the kubelet need root.
    ((EUID == 0)) || die "node.sh up needs root (network namespace, cgroups, mounts)"
    up
    ;;
  down) down ;;
  env) env_ ;;
  status)
    env_ >/dev/null
    . "$NODE_RUN/bins.env"
    KUBECONFIG=$NODE_RUN/admin.kubeconfig "$BIN_KUBE/kubectl" get nodes,pods -A -o wide
    ;;
  *) usage ;;
esac
