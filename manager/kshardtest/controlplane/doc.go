// Package controlplane runs a real, private Kubernetes control plane (etcd,
// kube-apiserver and optionally kube-controller-manager) as local processes on
// loopback ports, for the test kit (manager/kshardtest), kshard's own
// integration and e2e tests and the `kshard demo`.
//
// The binaries come from Options.BinDir or $KSHARD_BIN_DIR when either is
// set. Otherwise they are built from source with the pinned tools module
// (k8s.io/kubernetes and go.etcd.io/etcd/server/v3): the kit carries copies
// of hack/tools' go.mod and go.sum (in internal/kittools) and writes them
// out next to the cache, so the build works for a user who has kshard only
// in the module cache. Builds are cached per pin under $KSHARD_CACHE_DIR,
// $XDG_CACHE_HOME/kshard or ~/.cache/kshard (the entry's name hashes the
// module's bytes, so hack/tools and the carried copy share it), so only the
// first use pays the build (minutes). The package itself needs only
// the standard library and client-go, so importing it adds nothing heavy to the
// kshard module.
//
// Every control plane lives in its own temporary directory with generated
// certificates, service-account keys and static tokens for two identities: an
// admin (system:masters) and a restricted user with no permissions beyond
// discovery, for RBAC tests. Processes run in their own process groups and are
// killed as a group on Stop; logs are kept when a start or a test fails.
package controlplane
