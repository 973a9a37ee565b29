// Package operator holds the end-to-end tests of the real example-operator
// binary (cmd/example-operator), built once and run as OS processes the way
// a StatefulSet runs it: identities from POD_NAME, Leases in POD_NAMESPACE,
// stopped with SIGTERM.
//
// The scenario test runs three replicas against a control plane with the
// garbage collector and checks the product end to end: every Widget is
// reconciled, by the replica the ring (computed from the live Leases with the
// shard package) says owns it, within the ring's balance bound; every Widget
// owns its ConfigMap, which the garbage collector removes with it; replicas
// leave cleanly, exiting 0 and deleting their Leases.
//
// The bad-input tests run the binary with what users get wrong (flags,
// timings, kubeconfigs, an unreachable API server, a cluster without the
// Widget CRD) and require a non-zero exit with one line saying what is wrong
// and what to do.
package operator
