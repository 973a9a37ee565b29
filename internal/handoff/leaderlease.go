package handoff

import "time"

// A ring that replaces a leader-elected operator holds the operator's
// leader-election Lease before it activates anything: the old leader keeps
// reconciling until it stops, and a leader-elected replica started later (a
// rollback, or an old pod that was slow to go) finds the Lease held and
// waits. JudgeLeaderLease is the rule; lease.LeaderLease carries it out.

// LeaderLease is what a replica observed of a leader-election Lease.
type LeaderLease struct {
	// Found is false when the Lease does not exist.
	Found bool
	// Holder is spec.holderIdentity ("" when released).
	Holder string
	// Duration is spec.leaseDurationSeconds.
	Duration time.Duration
	// Unchanged is how long, on this replica's clock, the Lease's
	// resourceVersion has been the one observed: expiry is judged by
	// observed time, as client-go's leader election does, never by the
	// renewTime another clock wrote.
	Unchanged time.Duration
}

// LeaderLeaseVerdict is what to do with a leader-election Lease.
type LeaderLeaseVerdict int

const (
	// LeaderLeaseWait: another holder's Lease is live; activate nothing.
	LeaderLeaseWait LeaderLeaseVerdict = iota
	// LeaderLeaseTake: the Lease is missing, released or expired; write
	// the ring's holder, conditioned on the version observed.
	LeaderLeaseTake
	// LeaderLeaseHeld: the ring holds it; renew it when renewDue.
	LeaderLeaseHeld
)

// JudgeLeaderLease decides, for a ring whose holder identity is ring, what
// to do with the observed leader-election Lease l. renewEvery is how often
// the ring renews it: a Lease of the ring's unchanged for longer is written
// again (LeaderLeaseTake). leaseDuration stands in for a Lease that states
// no duration of its own.
func JudgeLeaderLease(ring string, l LeaderLease, renewEvery, leaseDuration time.Duration) LeaderLeaseVerdict {
	switch {
	case !l.Found, l.Holder == "":
		return LeaderLeaseTake
	case l.Holder == ring:
		if l.Unchanged >= renewEvery {
			return LeaderLeaseTake
		}
		return LeaderLeaseHeld
	case l.Unchanged >= l.duration(leaseDuration):
		return LeaderLeaseTake
	}
	return LeaderLeaseWait
}

// HeldBy reports whether l shows ring holding the Lease still: written by
// the ring and unchanged for less than its duration. Once that has passed,
// a leader-elected process may take it by the same rule, so it no longer
// counts until the ring has written it again.
func (l LeaderLease) HeldBy(ring string, leaseDuration time.Duration) bool {
	return l.Found && l.Holder == ring && l.Unchanged < l.duration(leaseDuration)
}

func (l LeaderLease) duration(fallback time.Duration) time.Duration {
	if l.Duration > 0 {
		return l.Duration
	}
	return fallback
}
