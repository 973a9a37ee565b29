// Package crshard runs kshard's ring inside an unmodified controller-runtime
// manager, so that an existing controller-runtime operator reconciles
// sharded across all its replicas instead of behind one leader.
//
// It is a separate Go module (github.com/kshard/kshard/controller/crshard):
// kshard itself never requires controller-runtime. It targets
// controller-runtime v0.25.x (tested with v0.25.2) and builds and is tested
// with v0.24.1 too, pinned by a replace directive (docs/install.md); it
// reads no controller-runtime internals: only what its API exposes.
//
// # Converting an operator
//
//	ring, err := crshard.New(cfg, crshard.Options{Ring: "my-operator"})
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{LeaderElection: false, ...})
//	err = ring.NewControllerManagedBy(mgr).For(&v1.Widget{}).Owns(...).Complete(r)
//
// New must run before the manager is built from cfg: it puts kshard's
// fencing transport on cfg (shard/fence), so the manager's
// clients refuse writes of a reconcile whose lease validity has passed, and
// writes without a reconcile context while the replica, once valid, has
// lost its validity and not renewed since. The ring's own clients are
// built from cfg before that, so renewals are never refused.
// Ring.NewControllerManagedBy is controller-runtime's builder with the same
// methods; it adds the ring to the manager (once) and opts the controller
// in. Where the ring is not at hand, as in a kubebuilder reconciler's
// SetupWithManager, crshard.ControllerManagedBy(mgr) replaces
// ctrl.NewControllerManagedBy(mgr): it finds the ring main set up with the
// manager (Ring.NewManager, or ring.SetupWithManager(mgr); see
// docs/adapter.md and e2e/bench/crshardop/kubebuilder for a whole
// conversion). There is no typed variant: the ring
// partitions reconcile.Request's namespace and name, which another request
// type does not have. A controller built with controller.New opts in with
// ring.Options(mgr, options, forObj), which sets the gated queue and wraps
// options.Reconciler (forObj is the type whose cached objects are replayed
// on activation).
//
// The Lease namespace and the identity default to the pod's ($POD_NAMESPACE
// and $POD_NAME from the downward API), and every timing to kshard's
// manager's (shard.Timing), except GracefulShutdownTimeout, which stays
// below controller-runtime's manager's own. As kshard's manager, the ring
// makes a crash provable by the kubelet (Options.PodNamespace,
// TerminationMessagePath): restarted in place, a replica takes its Lease
// over at once.
// A ring that replaces a leader-elected operator holds that operator's
// leader-election Lease before it activates anything
// (Options.LeaderElectionID), so the rollout never runs the old leader and
// the ring on one key at once.
//
// # What the ring does
//
// The ring is a manager.Runnable that needs no leader election. It runs
// kshard's Lease membership (ring.NewReplica) and ring coordinator
// (shard/ring): the same handoff protocol, no second implementation. For every controller that opts in:
//   - the gate at enqueue: the controller's queue (controller-runtime's
//     priority queue, or its rate-limited queue when UsePriorityQueue is
//     false, wrapped so that handlers still find AddWithOpts) admits a request
//     only if its partition (shard.Partitioner over namespace/name) is active
//     here, and drops a dequeued request whose partition was revoked since;
//   - in-flight tracking and drain: dequeuing a request and counting it in
//     flight are one atomic step with respect to Revoke (the same gate as
//     kshard's own controllers), and it stays in flight until the worker's
//     Done; Revoke returns only when no reconcile of the revoked partitions
//     runs, after cancelling their contexts when DrainGracePeriod has passed
//     (at once on a fence). A reconciler that ignores cancellation keeps the
//     drain waiting; a fenced replica whose reconciles outlive the stop
//     deadline exits, as kshard's manager does;
//   - lease validity: a reconcile starts only while the replica's lease is
//     valid (else it is requeued) and its context carries the validity
//     (controller.WithLeaseValidity) for the fencing transport;
//   - replay on activation: what the controller's sources would enqueue for
//     the cached objects is enqueued again, for the newly active partitions
//     only and at low priority when the priority queue is on, so events the
//     previous owner dropped are not lost (see below).
//
// # Singletons
//
// Ring.AddSingleton runs a Runnable on exactly one replica, the one where
// the partition of shard.SingletonKey(name) is active, as kshard's manager
// does: it replaces a Runnable that needed leader election.
//
// # Why a builder
//
// Two hooks are needed per controller. controller.Options.NewQueue gives the
// queue, so the gate sits at enqueue, dequeuing can count a request in
// flight, and replay can add at low priority; controller-runtime's handlers
// type-assert priorityqueue.PriorityQueue, so the gated queue implements it
// over whichever queue controller-runtime would have built. But the queue
// cannot reach the reconcile's context, which must be cancelled on revoke
// and carry the lease validity: that takes wrapping the Reconciler, and
// controller-runtime's builder refuses a Reconciler in WithOptions next to
// the one given to Complete. A builder with the same methods sets both from
// one changed line per controller; a source or handler wrapper would reach
// neither the context nor the queue's dequeue.
//
// # Replay
//
// On activation the ring replays, for the newly active partitions, each
// source of a controller built with the builder:
//   - For: the keys of every cached object of the For type;
//   - Owns: nothing more, since it maps an object to its controlling owner,
//     a For object whose key the For replay enqueues;
//   - Watches and WatchesMetadata: the user's handler (a map function, say),
//     run over the cached objects of the watched kind as create events of
//     the initial list, so the requests it maps them to are replayed even
//     when they are not For objects.
//
// controller-runtime keeps each watch's predicates to itself, so a replay
// does not run them. For objects are replayed whatever the For predicates
// say; a Watches handler is run over the objects that had an event that
// passed its predicates (the builder wraps the handler to remember them,
// and forgets an object when its delete event arrives or a replay finds it
// gone), so a map function runs for the few objects its watch cares about,
// not for every cached object of the kind. Either way a replay enqueues a
// superset of the events the previous owner dropped (a replica started
// since an event judges its object by the initial list's create event, as
// any restarted controller-runtime replica does): reconcilers must tolerate
// an extra reconcile, as they tolerate a resync. What a replay
// cannot enqueue is a request that only a deleted object's event produced
// for a key that is not a For object: the object is no longer cached.
//
// WatchesRawSource sources (a channel, a custom source) cannot be replayed:
// Build refuses them, naming the source, unless AllowUnreplayed is passed
// with the source to accept that their events for partitions not active
// here when they arrive are lost. Watch a kind with Watches rather than a
// raw source.Kind. A controller built with controller.New and Ring.Options
// gets only the For replay: its sources are its own.
//
// # Sharded cache
//
// With Options.CacheMode CacheLabels and ctrl.Options{NewCache:
// ring.NewCache}, each replica's cache holds only the objects of the
// partitions it needs: kshard's gate-free label-sharded cache
// (shard/cache) behind controller-runtime's cache.Cache, driven by the
// ring as kshard's manager drives it (see cache.go and docs/adapter.md).
//
// # Readiness and metrics
//
// The ring adds a readiness check "kshard-ring" to the manager (ready =
// caches synced and ring joined; the message says why not) and registers
// kshard's ring and Lease metrics (kshard_*) in controller-runtime's
// registry, next to controller-runtime's own, which keep working. The
// sharded cache's self-check (Options.CacheCheckInterval) reports objects
// missing from it in kshard_cache_missing_objects and an error log line,
// not in readiness: controller-runtime withholds a check's reason.
//
// # Refused set-ups
//
// NewManager refuses options with LeaderElection: true (leader election
// would keep all but one replica idle). A manager built elsewhere cannot be
// asked (controller-runtime has no getter for it): the ring waits for the
// manager's Elected before it joins, and a replica not elected within a
// LeaseDuration is not ready, logging and reporting why. SetupWithManager
// and NewControllerManagedBy refuse a second ring on one manager and a
// controller opted in after the ring started (its keys would not be gated
// from the start).
package crshard
