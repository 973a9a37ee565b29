// Package ringhealth is the rule by which kshard counts a ring's unclaimed
// and overlapping partitions and its malformed and foreign Leases, shared by
// the replicas' own kshard_ring_* gauges (shard/ring, from a replica's view
// of the Leases) and the one-shot reader of ring state (shard/ringstatus),
// so the two always count alike.
package ringhealth

import (
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
)

// Health is what a set of Leases says of a ring's health in the three
// numbers that must be 0 in a settled ring, and the count of Leases
// written with another ring configuration. ringstatus.Analyze reports the
// same numbers in its Ring (Unclaimed, Overlapping, Malformed, Foreign)
// from a one-shot read; ViewHealth computes them from a replica's own view
// of the Leases, for its kshard_ring_* gauges. Both count claims by the
// same rule (CountsClaim, TallyClaims).
type Health struct {
	// Unclaimed: partitions no live Lease claims. Nobody reconciles their
	// keys until one does; brief after a replica dies without a proof of
	// death (up to LeaseDuration), a fault if it lasts.
	Unclaimed int
	// Overlapping: partitions more than one live Lease claims. Normal while
	// a drain runs (the new owner claims before the old one releases); a
	// drain is stuck if it lasts.
	Overlapping int
	// Malformed: Leases with the ring label that do not follow the Lease
	// format, expired ones included (kshard status counts them so too).
	// A live one blocks every partition.
	Malformed int
	// Foreign: live Leases written with another ring configuration (their
	// params fingerprint differs): the replicas refuse to share a ring
	// with them. Not counted as Malformed.
	Foreign int
}

// ViewHealth reads one replica's view of its ring: leases are the ring's
// Leases as its Lease member parsed them (membership.Member.Snapshot, claims
// over partitions), live says which of them that replica judges live (by
// its own clock: the time it saw each change, never a remote timestamp),
// and fingerprint is its own ring configuration's (shard.Config.Fingerprint).
// It is pure: no API call, no clock.
func ViewHealth(fingerprint string, partitions int, leases []membership.Observed, live func(membership.Observed) bool) Health {
	var h Health
	claims := make([]shard.PartitionSet, 0, len(leases))
	for _, l := range leases {
		if l.Gone {
			continue
		}
		isLive := live(l)
		foreign := l.Fingerprint != "" && l.Fingerprint != fingerprint
		switch {
		case foreign && isLive:
			// Its claim is over its own configuration: read with this
			// one's partition count it may look malformed, which it is
			// not (ringstatus.Analyze re-reads it under its own params).
			h.Foreign++
		case !foreign && l.Problem != "":
			h.Malformed++
		}
		if CountsClaim(isLive, l.Fingerprint, fingerprint, l.ClaimUnknown) {
			claims = append(claims, l.Claim)
		}
	}
	unclaimed, overlapping := TallyClaims(partitions, claims)
	h.Unclaimed, h.Overlapping = len(unclaimed), len(overlapping)
	return h
}

// CountsClaim reports whether a Lease's claim counts towards the unclaimed
// and overlapping partitions: a live Lease of the ring's configuration (or
// one that names none) whose claim can be read. A Lease of another
// configuration claims over another partition count, and one whose claim
// is unreadable is reported on its own (replicas treat it as claiming
// everything).
func CountsClaim(live bool, params, ringParams string, claimUnknown bool) bool {
	return live && (params == ringParams || params == "") && !claimUnknown
}

// TallyClaims returns the partitions of [0, partitions) that no claim holds
// and those more than one holds, in ascending order.
func TallyClaims(partitions int, claims []shard.PartitionSet) (unclaimed, overlapping []int) {
	claimers := make([]int, partitions)
	for _, c := range claims {
		for p := range c.All() {
			if p < len(claimers) {
				claimers[p]++
			}
		}
	}
	unclaimed, overlapping = []int{}, []int{}
	for p, n := range claimers {
		switch {
		case n == 0:
			unclaimed = append(unclaimed, p)
		case n > 1:
			overlapping = append(overlapping, p)
		}
	}
	return unclaimed, overlapping
}
