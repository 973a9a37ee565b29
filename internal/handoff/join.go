package handoff

import (
	"slices"
	"strings"
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

// ScannedLease is a Lease of the namespace as the join scan lists it.
type ScannedLease struct {
	// Name is the Lease's name, Ring its ring label ("" for none).
	Name, Ring string
	// Finalized: it carries the member finalizer, which every member Lease
	// of a current kshard does and which relabelling keeps.
	Finalized bool
}

// JoinScan is the join scan's verdict over a namespace's Leases.
type JoinScan struct {
	// Members are the indexes of ring's own Leases in the list (all of
	// them when Outside is -1): the ring's watch must hold each before the
	// scan counts as clean (Core.JoinScanClean), since one relabelled
	// back in just now may not have reached it yet.
	Members []int
	// Outside is the index of a member Lease that is in no ring (relabelled
	// out by hand before this process could see it; its holder may be at
	// work, unseen), or -1: with one, the scan is not clean and the
	// replica waits out its join.
	Outside int
}

// JudgeJoinScan classifies the namespace's Leases, as listed after the
// ring's first list, for a join that skips its wait. A Lease without the
// member finalizer is not a member of a current kshard, or was never one;
// one whose ring label names another ring and whose name carries that
// ring's prefix is that ring's member.
func JudgeJoinScan(ring string, leases []ScannedLease) JoinScan {
	scan := JoinScan{Outside: -1}
	for i, l := range leases {
		switch {
		case l.Ring == ring:
			scan.Members = append(scan.Members, i)
		case !l.Finalized:
		case l.Ring != "" && strings.HasPrefix(l.Name, l.Ring+"-"):
		default:
			scan.Outside = i
			return scan
		}
	}
	return scan
}
