// Package handoffhook reaches the parts of shard/handoff's Core that only
// the simulations use (internal/handoffsim, and manager's coordinator
// simulation through it) and that production has no use for: a ring builder
// shared by a seed's cores, the switch that turns the defence against stale
// views off, and the oracle's reads of proofs of death and tombstones.
//
// It is test support: package handoff registers the hooks at init, and only
// internal/handoffsim calls them.
package handoffhook

import "github.com/kshard/kshard/shard"

// RingBuilder builds the ring of a view: its members and, for a balanced
// ring, the partitions' weights. shard.NewWeighted is the core's own.
type RingBuilder func(cfg shard.Config, members []string, weights shard.Weights) (*shard.Ring, error)

// Tombstone names a departed Lease whose claim a core still counts.
type Tombstone struct {
	Identity, Incarnation string
}

// Hooks are the simulation-only operations on a core of type C
// (*handoff.Core). This package cannot name that type: handoff imports it
// to register them.
type Hooks[C any] struct {
	// SetRingBuilder replaces shard.NewWeighted as the core's ring
	// builder: rings depend only on their inputs, so a simulation running
	// many cores over the same views builds each once.
	SetRingBuilder func(core C, build RingBuilder)
	// SetTrustWatchOrder turns the core's defence against stale views of a
	// peer's Lease off (true) or on, to show that the stale-view fault
	// breaks the invariant without it.
	SetTrustWatchOrder func(core C, trust bool)
	// Proven reports whether the core was told that incarnation, in the pod
	// with UID podUID, has ended (Core.Terminated).
	Proven func(core C, podUID, incarnation string) bool
	// Tombstones lists the departed Leases whose claims the core still
	// counts, sorted by identity.
	Tombstones func(core C) []Tombstone
}

// registered holds the Hooks of the one core type that registered.
var registered any

// Register records the hooks of core type C; package handoff calls it at
// init.
func Register[C any](h Hooks[C]) { registered = h }

// For returns the hooks registered for core type C, and false when none
// are (the core's package is not linked in, or C is another type).
func For[C any]() (Hooks[C], bool) {
	h, ok := registered.(Hooks[C])
	return h, ok
}
