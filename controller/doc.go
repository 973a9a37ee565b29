// Package controller is kshard's reconcile core, shaped like controller-runtime:
// Sources feed events through Predicates to EventHandlers, which map them to
// Requests; a typed rate-limited workqueue feeds MaxConcurrentReconciles
// workers calling a Reconciler.
//
// # The shard gate
//
// What kshard adds is a gate between the handlers and the queue: a Request
// is admitted only if its partition (shard.Partitioner over Request.Key) is
// active in this controller. Activate admits partitions and replays the
// cached objects of every source so that no key of a newly owned partition
// is missed (a controller that starts inactive refuses sources it cannot
// replay, such as Channel, unless Options.AllowUnreplayedSources is set);
// Revoke stops admitting partitions, drops their queued requests when
// dequeued, and returns once none of their reconciles is in flight
// (cancelling their contexts after a grace period). A worker's "is the
// partition active?" check and its in-flight increment are one atomic step,
// so no reconcile can start after a drain has counted zero.
//
// A controller built standalone (New, or a Builder on a manager that does
// not shard) starts with every partition active; a sharding manager sets
// Options.StartInactive and activates partitions as it claims them.
//
// # Lease validity
//
// Under a sharding manager (Options.LeaseValidity set), a worker checks the
// replica's lease validity immediately before each reconcile and requeues
// instead of starting once it has passed; the reconcile's context carries
// the validity (ValidUntil) for the manager's client transport, which
// refuses writes issued under it once it has passed or a fence has started
// a new epoch, reading the clock rather than waiting for a timer. Renewals
// extend the validity, so a reconcile may run as long as the replica stays
// healthy; a fence cancels its context. A write already on the wire when a
// process pauses can still land late: use resourceVersion preconditions for
// writes that must never be stale.
//
// # Building controllers
//
// NewControllerManagedBy(mgr).For(obj).Owns(obj).Watches(obj, handler).Complete(r)
// builds a controller and adds it to the manager, which starts it and drives
// Activate and Revoke. Manager is the small interface a manager implements.
package controller
