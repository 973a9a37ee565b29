package handoff

import (
	"slices"
	"time"
)

// The join wait. A replica joins the ring only after watching it for
// LeaseDuration: a Lease deleted or relabelled by hand before this process
// could see it leaves no tombstone here, so its holder's claims may be
// hidden; after LeaseDuration they have either reappeared or their holder
// has stopped (it fences when its renews fail or it sees its Lease gone).
// A fast join skips the wait when it can tell that no Lease vanished
// (fast).

// joinWait tracks how long this replica has watched the ring.
type joinWait struct {
	lease    time.Duration // LeaseDuration
	observed bool          // Observe has been called: the informer has listed
	// firstSeen is the local time of the first Observe.
	firstSeen time.Time
	// firstViewFinalized: every Lease of the first Observe carried the
	// member finalizer and was well-formed.
	firstViewFinalized bool
	// scanClean: the shell found no Lease with the member finalizer
	// outside the ring after its first list (Core.JoinScanClean).
	scanClean bool
}

// observe takes in an Observe's Leases at now: the first one starts the
// wait.
func (j *joinWait) observe(now time.Time, leases []Observed) {
	if j.firstSeen.IsZero() {
		j.firstSeen = now
		// Well-formed too: the defence against a stale view of a peer
		// needs the Generation of the newest state seen, which a damaged
		// Lease does not show.
		j.firstViewFinalized = !slices.ContainsFunc(leases, func(l Observed) bool {
			return !l.Gone && (!l.Finalized || l.Problem != "" || l.ClaimUnknown)
		})
	}
	j.observed = true
}

// over reports whether this replica has watched the ring for
// LeaseDuration, or may join at once (fast).
func (j *joinWait) over(now time.Time) bool {
	return j.observed && (j.fast() || now.Sub(j.firstSeen) >= j.lease)
}

// fast reports whether the join wait can be skipped: every Lease of the
// first view carried the member finalizer and was well-formed, and the
// shell's scan found no finalized Lease outside the ring. The wait exists
// for a Lease deleted or relabelled by hand before this process first
// listed the ring, whose holder may still be reconciling: a finalized
// Lease deleted by hand stays in the view, terminating, until its holder
// has stopped everything (Finalize) or a peer has seen it expired; one
// relabelled keeps its finalizer, and the scan finds it. A ring with a
// Lease that lacks the finalizer (written by an earlier kshard, say) gets
// the wait: such a Lease deleted by hand just before this process started
// would be invisible.
func (j *joinWait) fast() bool { return j.firstViewFinalized && j.scanClean }

// nextDeadline considers when the wait ends.
func (j *joinWait) nextDeadline(consider func(time.Time)) {
	if j.observed && !j.fast() {
		consider(j.firstSeen.Add(j.lease))
	}
}
