package handoff

import "github.com/kshard/kshard/shard"

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
}

// Clone returns a copy of r that shares no storage with it.
func (r Record) Clone() Record {
	r.Claim = r.Claim.Clone()
	return r
}

// Observed is one Lease of the ring as this replica's informer holds it,
// already parsed by the shell.
type Observed struct {
	Record
	// Version is the Lease's resourceVersion. It is opaque: the core only
	// compares it for equality, to tell whether a Lease has changed.
	Version string
}

// LeaseRef names one version of a member's Lease.
type LeaseRef struct {
	Identity string
	// Version is the resourceVersion to compare against (Confirm) or to use
	// as the delete precondition (GarbageCollect).
	Version string
}
