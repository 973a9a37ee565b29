// Package ringview reads kshard rings from a snapshot of their Leases, for
// the `kshard status` and `kshard owner` commands. It is pure: callers list
// the Leases and pass the time to judge them by, so every rule (who is live,
// who is a member, who owns a key, which claims overlap) is table-tested
// without an API server.
//
// # Liveness from outside the ring
//
// Replicas judge a peer's liveness by when they themselves observed its Lease
// change, never by remote timestamps, so clock skew cannot expire a healthy
// peer. A one-shot reader has no such history: ringview calls a Lease live
// when spec.renewTime + spec.leaseDurationSeconds is after the reader's
// clock. renewTime is written by the replica's clock, so a skewed clock can
// make this view disagree with the replicas' for up to the skew; the
// replicas' view is the one that decides.
//
// # Claims overlap during a handoff
//
// A replica claims a partition it is assigned before the previous owner has
// released it, and activates it only once no other live Lease claims it. So
// overlapping claims are normal for the duration of a drain; an overlap that
// persists means a drain is stuck. Two replicas reconciling the same key would
// need overlapping *active* sets, which Leases do not show.
package ringview
