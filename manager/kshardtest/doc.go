// Package kshardtest tests a sharded operator under handoff: it starts a
// private control plane (package controlplane: real etcd, kube-apiserver and,
// on request, kube-controller-manager), runs N replicas of the operator's own
// manager in this process or as OS processes, records every reconcile
// interval (Recorder), injects faults (graceful leave, crash, pause,
// API-server outage) and checks the records for two replicas reconciling a
// key at once and for updates never reconciled, with the same checker
// kshard's chaos suite uses.
//
// # Setting up
//
// New starts the control plane for a test and creates the namespace for the
// ring's Leases and the test's objects. Binaries come from $KSHARD_BIN_DIR
// when it is set; otherwise they are built once from source (the kit carries
// the pinned tools module, so this works with kshard only in the module
// cache; it takes minutes) and cached under
// ~/.cache/kshard. Under `go test -short` (unit tests only) New skips the
// test instead, saying so (controlplane.SkipIfShort).
//
// # Replicas
//
// A replica is a function that builds the operator's manager from a Replica
// (its identity, rest config, manager options and recorder) and runs it until
// its context ends. StartInProcess runs it on a goroutine; StartProcess runs
// a binary whose main calls ReplicaFromEnv and then the same function. Wrap
// the reconciler with RecordReconciles (and the manager with RecordRing, to
// also check partition ownership) so that every reconcile is recorded.
//
// # Faults
//
// Env.Stop is a graceful leave (the replica drains and releases its Leases),
// Env.Crash a crash (its Leases are left to expire), Env.Pause and
// Env.Resume freeze and thaw it, and Env.StopAPIServer and
// Env.StartAPIServer make an API-server outage. For processes these are
// SIGTERM, SIGKILL, SIGSTOP and SIGCONT. In this process a replica cannot be
// killed or frozen, so the kit cuts its connection to the API server
// instead: a crashed replica's requests fail at once and its context is
// cancelled, so it neither renews nor releases its Leases; a paused
// replica's requests hang until Resume while its own clocks run on (as in a
// network partition), so its renew deadline fences it. A manager whose
// fenced reconciles outlive its stop deadline exits its process on
// purpose; in this process that ends the test binary, so run an operator
// whose reconciles may ignore cancellation as processes. A process replica
// that exits so (e.g. after a long pause) shows in Env.Exited; restart it
// as a kubelet would. Its first renew after a pause may repeat the Record
// it froze with, so the Leases may read as converged just before it exits:
// a Record of a higher generation shows that it got past its fence.
//
// # Checking
//
// The kit's writer (CreateConfigMaps, StartWriter) bumps a generation in
// ConfigMaps and records every acknowledged update. Env.Check waits until
// every update was reconciled or the timeout passed and returns the
// checker's report: Report.OK is false on any overlap or lost update, on
// an update reconciled later than Options.LivenessBound after it was
// acknowledged (the faults the Env injected extend the bound for the
// updates they overlap), and on an existing object that a reconcile read
// from its cache as NotFound (recorded with Recorder.NotFound).
//
// A replica binary built for tests can serve what its cache holds
// (ServeCacheReport); Env.CacheReport reads it and CheckCaches compares the
// replicas' caches with the API server's objects.
package kshardtest
