package handoff

import (
	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/shard"
)

// State is a member's lifecycle state as published in its Lease.
type State string

const (
	// StateJoining: the replica is registered but not a ring member yet: its
	// caches are syncing, it is waiting out a previous incarnation's Lease, or
	// it is rejoining after fencing itself. Its claims still count.
	StateJoining State = "joining"
	// StateActive: the replica is a ring member; the ring's members are the
	// live Leases in this state.
	StateActive State = "active"
	// StateLeaving: the replica is shutting down gracefully. Peers drop it
	// from the ring at once, but its claims count until it publishes an empty
	// claim.
	StateLeaving State = "leaving"
)

// Record is the content the core wants in its own Lease. The shell writes the
// latest Record on every renew.
type Record struct {
	// Identity is the replica identity (holderIdentity; the Lease name derives
	// from it).
	Identity string
	// Incarnation is the random id of the process that wrote the Record.
	Incarnation string
	// State is the writer's lifecycle state.
	State State
	// Claim holds the partitions the writer may be reconciling (or is about
	// to). No other replica may activate them while the Lease is live.
	Claim shard.PartitionSet
	// Generation increases with every change of the writer's Record within
	// one incarnation, and when the writer fences itself. The writer uses it
	// to tell its own fresh writes from stale ones it sees through the watch.
	Generation uint64
	// Fingerprint is the writer's shard.Config.Fingerprint.
	Fingerprint string
	// Pod is the UID of the pod the writer runs in, when it knows it and
	// has written its incarnation into its container's termination
	// message: what lets a peer or the next incarnation prove its death
	// (proof.go). Empty: its death can only be waited out.
	Pod string
	// Warm: with a partition cache (Config.PartitionCache), the partitions
	// of the writer's target whose objects its cache holds, listed and
	// watched. A replica handing a partition over to the writer keeps it
	// active until it shows here (Config.HandoverTimeout). A set of size 0
	// means the writer does not report it (a full cache, or an older
	// kshard). Advisory: it never decides who may run a partition.
	Warm shard.PartitionSet
	// Weights: in a balanced ring (shard.Config.Balance), the quantized
	// object counts of the partitions the writer's cache holds and has
	// synced (assign.WeightBucket). The ring places partitions by the
	// largest weight any live member reports. Length 0: not reported.
	// Advisory like Warm: it decides placement, never who may run a
	// partition.
	Weights assign.Weights
	// Returning: the writer keeps its place in the ring for its identity's
	// next incarnation (Config.KeepPlaceOnLeave). Set by a leaver that was
	// active, and by the next incarnation that took its Lease over, while
	// it joins (for at most LeaseDuration). A live Lease in state leaving
	// or joining with Returning counts as a ring member (RingMember), so
	// its partitions stay placed on it and no peer takes them. Advisory
	// like Warm: it decides placement, never who may run a partition.
	Returning bool
}

// Clone returns a copy of r that shares no storage with it.
func (r Record) Clone() Record {
	r.Claim = r.Claim.Clone()
	r.Warm = r.Warm.Clone()
	r.Weights = r.Weights.Clone()
	return r
}

// Equal reports whether r and o publish the same Lease content.
func (r Record) Equal(o Record) bool {
	return r.Identity == o.Identity && r.Incarnation == o.Incarnation && r.State == o.State &&
		r.Generation == o.Generation && r.Fingerprint == o.Fingerprint && r.Pod == o.Pod && r.Claim.Equal(o.Claim) && r.Warm.Equal(o.Warm) &&
		r.Weights.Equal(o.Weights) && r.Returning == o.Returning
}

// Observed is one Lease of the ring as this replica's informer holds it,
// parsed by the shell. What a malformed or foreign Lease means is decided by
// the core (Observe), not by the shell: the shell only reports what it read.
type Observed struct {
	Record
	// Version is the Lease's resourceVersion. It is opaque: the core only
	// compares it for equality, to tell whether a Lease has changed.
	Version string
	// UID is the Lease object's uid (metadata.uid): it stays the same
	// across updates and changes when the Lease is deleted and created
	// again. Empty when unknown, which counts as changed.
	UID string
	// Gone: the Lease has left the view (deleted, or relabelled out of the
	// ring) and this is its last state, as carried by the event that removed
	// it; Version is that event's resourceVersion. Reporting it lets the core
	// keep a claim in force that it never saw while the Lease was in the
	// view (its watch lagged). A Gone Lease is never a member. Report one
	// per Lease object (UID), those of one identity in the order they left,
	// the last one last: a watch that lagged across two deletions of one
	// name sees the first object's claim only in its departure. Report it
	// for at least 2×LeaseDuration, also after the name is created again,
	// and no longer once the same object is back in the view; dropping it
	// earlier leaves the core its own tombstone, if it saw the claim.
	Gone bool
	// Problem is non-empty when the Lease carries the ring label but does
	// not follow the Lease format; it says what is wrong. Such a Lease is
	// never a member, and while it is live its claim counts as every
	// partition (a claim that cannot be read may hide one being reconciled),
	// unless it is a well-formed empty claim of another ring configuration.
	Problem string
	// ClaimUnknown: the claim annotation is missing or does not decode on a
	// Lease otherwise shaped like a member's (a newer kshard's claim format
	// lands here). It implies a Problem.
	ClaimUnknown bool
	// ClaimEmpty: the claim annotation is a well-formed claim of no
	// partition, over any partition count.
	ClaimEmpty bool
	// Finalized: the Lease carries the member finalizer, so a deletion by
	// hand leaves it in the view, Terminating, until its holder (once
	// nothing of it runs) or a peer (once it is expired) removes the
	// finalizer. A ring whose every Lease is Finalized lets a new replica
	// join without watching it for LeaseDuration first (JoinScanClean).
	Finalized bool
	// Terminating: the Lease is being deleted (its deletionTimestamp is
	// set) and waits for its finalizer. It is never a member, but its
	// claim counts like any other; its holder fences when it sees it.
	Terminating bool
}

// LeaseRef names one version of a member's Lease.
type LeaseRef struct {
	Identity string
	// Version is the resourceVersion to compare against (Confirm) or to use
	// as the delete precondition (GarbageCollect).
	Version string
}
