// Package controlplane runs a real, private Kubernetes control plane (etcd,
// kube-apiserver and optionally kube-controller-manager) as local processes on
// loopback ports, for kshard's integration and e2e tests and the `kshard demo`.
//
// The binaries are built from source with the pinned tools module in
// hack/tools (k8s.io/kubernetes and go.etcd.io/etcd/server/v3) and cached per
// version under $KSHARD_CACHE_DIR, $XDG_CACHE_HOME/kshard or ~/.cache/kshard,
// so only the first use pays the ~3 minute build. The package itself needs only
// the standard library and client-go, so importing it adds nothing heavy to the
// kshard module.
//
// Every control plane lives in its own temporary directory with generated
// certificates, service-account keys and static tokens for two identities: an
// admin (system:masters) and a restricted user with no permissions beyond
// discovery, for RBAC tests. Processes run in their own process groups and are
// killed as a group on Stop; logs are kept when a start or a test fails.
package controlplane
