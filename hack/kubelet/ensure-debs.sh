#!/usr/bin/env bash
# Installs the Debian packages the node needs when missing: runc (the OCI
# runtime containerd's shim runs; cgo and libseccomp, so not built here) and
# containernetworking-plugins (bridge, host-local and loopback, the pods'
# network); iproute2, openssl, curl, jq and procps, which the scripts run.
# Debian bookworm: runc 1.1.5, plugins 1.1.1 in /usr/lib/cni.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need=()
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || need+=(containernetworking-plugins)
command -v ip >/dev/null || need+=(iproute2)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl ca-certificates)
command -v jq >/dev/null || need+=(jq)
command -v pgrep >/dev/null || need+=(procps)
if ((${#need[@]})); then
  command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get: install them (runc >= 1.1, CNI plugins bridge/host-local/loopback in /usr/lib/cni)"
  log "installing Debian packages: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
