// Package manager runs a sharded operator replica: it owns the shared informer
// cache, the replica's Lease membership, the ring coordinator that turns
// membership into active partitions for every controller, and the metrics and
// probe servers.
//
// Connect with GetConfig ($KUBECONFIG, the in-cluster service account, then
// ~/.kube/config), or LoadConfig for a --kubeconfig flag.
//
// A Manager is shaped like controller-runtime's: build controllers with
// controller.NewControllerManagedBy(mgr), Add other Runnables, then Start.
// What differs is what Start does between "caches synced" and "stopped":
// instead of waiting to win a leader election, the replica joins a ring of
// peers (one coordination.k8s.io/v1 Lease each) and reconciles only the keys
// of the partitions it owns, taking them over and handing them back through
// the protocol of package internal/handoff (claim before act, drain before
// release). Cancelling Start's context is a graceful leave: the replica
// drains, publishes an empty claim so peers take over at once, and deletes
// its Lease.
//
// # Packages below it
//
// The Manager is assembled from packages that do not import it, so that
// another runtime (the controller-runtime adapter, controller/crshard)
// drives the same ring from the same code: shard/ring (the ring
// coordinator, the Participant contract, proofs of death, the sharded
// cache's contract), shard/fence (the fencing transport), shard/cache
// (the sharded informer cache), lease (membership) and internal/handoff (the
// protocol's decisions). manager itself is imported by operators, the test
// kit (manager/kshardtest) and kshard's binaries, never by those packages.
//
// # Pauses and stale writes
//
// Every client built from the manager's rest config (GetClient, GetConfig)
// refuses to send a write issued under a reconcile or singleton context (see
// AddSingleton) whose lease validity (last renewal sent + RenewDeadline) has
// passed, or whose epoch a fence has ended (shard/fence), reading the
// clock at the moment of sending: after a pause the process may resume with
// its partitions already taken over by a peer. A write issued without such
// a context (context.Background, a helper's context.TODO) is refused too
// once the replica has held a validity and lost it (a pause past
// RenewDeadline, a fence), until a renewal re-establishes it; before the
// replica was ever valid it passes, so setup writes work. kshard's own
// clients (Lease renewals, pod reads, the cache and its label patches) are
// built from a config without this check, so they renew the validity back.
// A request already on the wire when the pause began is beyond its reach;
// writes that must never be stale should carry a resourceVersion
// precondition.
package manager
