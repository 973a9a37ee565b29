// Package demo is `kshard demo`: a private control plane (etcd,
// kube-apiserver, kube-controller-manager from
// manager/kshardtest/controlplane), the Widget CRD, and example-operator
// replicas run as OS processes of the example-operator binary, watched
// through a live table while they reconcile, hand off
// a leaving replica's partitions and take in a new one.
//
// # What is measured, and how
//
// The handoff gap is the time from SIGTERM to the leaving replica until
// every partition it held is claimed by another live, active replica and
// its own claim is empty, as the demo's Lease informer delivers those
// writes. A replica activates a claimed partition as soon as it observes
// that no one else claims it, so this is the time those keys had no owner,
// plus one watch delay. The time until all partitions are active again is
// also read from the replicas' kshard_partitions metrics, polled every
// 100ms.
//
// # Processes
//
// Every replica runs in its own process group, so a terminal's Ctrl-C
// reaches only the demo, which then stops the replicas gracefully (SIGTERM,
// then SIGKILL after a grace period or a second Ctrl-C) and the control
// plane, in that order. Pdeathsig kills replicas if the demo itself dies.
package demo
