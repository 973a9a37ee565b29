package ring

import (
	"context"

	"github.com/kshard/kshard/shard"
)

// Participant is a controller (or any part of an operator) that takes part
// in handoff: it reconciles only the partitions it was activated for.
type Participant interface {
	// Admit lets set be worked on from its return on (it opens the gate).
	// The coordinator calls it on its loop, ordered with Revoke, so it must
	// do no per-object work and return promptly. An error makes the
	// coordinator ask again.
	Admit(ctx context.Context, set shard.PartitionSet) error
	// Replay enqueues the cached objects that fall into set (their previous
	// owner may have dropped events). It runs off the coordinator's loop,
	// after Admit, and Revoke may run meanwhile: what it enqueues for a
	// revoked partition must be refused by the gate. An error makes the
	// coordinator ask again after a backoff.
	Replay(ctx context.Context, set shard.PartitionSet) error
	// Revoke stops admitting set, cancels its reconciles (at once when
	// fence, else after a grace period), and returns nil only when nothing
	// of set runs any more: that return is the report that set drained.
	// The check "is p active?" and the in-flight increment of a reconcile
	// must be one atomic step with respect to Revoke.
	Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error
}
