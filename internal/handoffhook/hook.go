// Package handoffhook is what kshard's own simulations (internal/handoffsim,
// and shard/ring's coordinator simulation through it) hand a
// internal/handoff Core when they build it, and read back from it: a ring
// builder shared by a seed's cores, and the oracle's reads of proofs of
// death and tombstones. Production has no use for them.
//
// They reach the core through handoff.New's optional last argument, whose
// type lives here: a program outside this module cannot import this
// package, so it cannot build a Hooks, and a core built without one has
// none. There is no registration, no package state and no switch of a
// defence: a defence is turned off only by building a mutant core with a
// build tag (internal/handoff's stalewatch_mutant.go), never at run time.
package handoffhook

import (
	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/shard"
)

// RingBuilder builds the ring of a view: its members and, for a balanced
// ring, the partitions' weights. assign.NewWeighted is the core's own.
type RingBuilder func(cfg shard.Config, members []string, weights assign.Weights) (*assign.Ring, error)

// Tombstone names a departed Lease whose claim a core still counts.
type Tombstone struct {
	Identity, Incarnation string
}

// Hooks are the simulation-only operations on one core. The simulation
// sets RingBuilder and passes the Hooks to handoff.New, which sets the
// reads to those of the core it returns.
type Hooks struct {
	// RingBuilder, when set, replaces assign.NewWeighted as the core's
	// ring builder: rings depend only on their inputs, so a simulation
	// running many cores over the same views builds each once.
	RingBuilder RingBuilder

	// Set by handoff.New: Proven reports whether the core was told that
	// incarnation, in the pod with UID podUID, has ended
	// (Core.Terminated); Tombstones lists the departed Leases whose claims
	// the core still counts, sorted by identity.
	Proven     func(podUID, incarnation string) bool
	Tombstones func() []Tombstone
}
