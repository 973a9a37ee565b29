// Package ringstatus reads kshard rings from a snapshot of their Leases: who
// is live, who is a member, who owns a key, which claims overlap, and
// whether the ring has converged on a set of replicas. It is the one reader
// of ring state outside the replicas themselves: the `kshard status` and
// `kshard owner` commands, the demo, kshard's e2e harness and its tests use
// it, and so can an operator author's tests (the test kit,
// manager/kshardtest, builds on it).
//
// Analyze is pure: callers pass the Leases and the time to judge them by,
// so every rule is table-tested without an API server. Read lists a ring's
// Leases and analyzes them as of now; Ring.Converged says why a ring has not
// converged yet, or nil.
//
// # Liveness from outside the ring
//
// Replicas judge a peer's liveness by when they themselves observed its Lease
// change, never by remote timestamps, so clock skew cannot expire a healthy
// peer. A one-shot reader has no such history: ringstatus calls a Lease live
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
package ringstatus
