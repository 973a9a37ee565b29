// Package chaos holds kshard's e2e fault suite: replicas of the test operator
// as OS processes on a real control plane, under crashes, restarts, outages,
// partitions, flapping and slow reconcilers, with records checked for overlap.
//
// The safety scenarios (lease_test.go) run a blind-writing operator (writes
// without resourceVersion preconditions, recorded just before they are sent)
// and check the writes themselves: no two replicas' writing reconciles of a
// key overlap, no write leaves a replica after its lease validity passed,
// no stale write lands over a newer one, and every object ends with its last
// write. A paused replica (SIGSTOP for 1.5–3×LeaseDuration) and a live
// member's Lease deleted or relabelled run one round in every test run;
// `make chaos-safety ROUNDS=20` runs many rounds of them.
//
// The proof-of-death scenarios (inplace_test.go) give every replica a Pod
// whose kubelet the harness plays: a crash restarted in place must fail
// over well before LeaseDuration, on the kubelet's report, and a pod
// force-deleted with its process must not count as proof (the Lease is
// waited out). One round each runs in every test run; `make chaos-inplace
// ROUNDS=20` runs many.
//
// Every round checks, besides overlaps and lost updates, that no reconcile
// read an existing object from its cache as NotFound, that every update was
// reconciled within the round's liveness bound (livenessBound, extended by
// the faults the scenario records), and at its end that every watched
// ConfigMap is in exactly one live replica's sharded cache (every replica's
// full cache) with its partition label on the gate-free cache
// (checkCaches). The kill, restart,
// scaling and outage scenarios also run on the sharded caches: -sharded
// (the API server's shard selectors, make chaos-sharded) and -labels (the
// gate-free cache by partition labels, make chaos-labels).
// TestLabelTampering runs on the latter whatever the flags say: it strips,
// edits and replaces partition labels through the API server while updates
// flow, and checks that the replicas restore every label by themselves
// (its changes are logged in tamper.log beside the records).
package chaos
