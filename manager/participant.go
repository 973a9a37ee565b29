package manager

import (
	"context"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// participant is a Runnable that takes part in handoff, seen uniformly by
// the coordinator whether it is a controller or a user's Sharded runnable.
type participant interface {
	// admit lets set's partitions be worked on from its return on. The
	// coordinator calls it on its loop, in order with revoke, so it must do
	// no per-object work and never wait for long.
	admit(ctx context.Context, set shard.PartitionSet) error
	// replay does the rest of an activation (a controller's cache replay),
	// off the loop and after admit; revokes may run meanwhile.
	replay(ctx context.Context, set shard.PartitionSet) error
	// revoke returns nil only when nothing of set runs any more; fence asks
	// for in-flight work to be cancelled at once, with no grace period.
	revoke(ctx context.Context, set shard.PartitionSet, fence bool) error
}

func asParticipant(r Runnable) participant {
	switch v := r.(type) {
	case controller.Controller:
		return controllerParticipant{v}
	case Sharded:
		return shardedParticipant{v}
	}
	return nil
}

type controllerParticipant struct{ c controller.Controller }

func (p controllerParticipant) admit(_ context.Context, set shard.PartitionSet) error {
	return p.c.Admit(set)
}

func (p controllerParticipant) replay(ctx context.Context, set shard.PartitionSet) error {
	return p.c.Replay(ctx, set)
}

func (p controllerParticipant) revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if fence {
		return p.c.Revoke(ctx, set, controller.GracePeriod(0))
	}
	return p.c.Revoke(ctx, set)
}

type shardedParticipant struct{ s Sharded }

// A Sharded runnable's Activate is its gate (a singleton starts in it), so
// it runs on the loop, where no revoke can overtake it; it has nothing to
// replay.
func (p shardedParticipant) admit(ctx context.Context, set shard.PartitionSet) error {
	return p.s.Activate(ctx, set)
}

func (shardedParticipant) replay(context.Context, shard.PartitionSet) error { return nil }

// A Sharded runnable has no grace period to skip: its Revoke is its drain.
func (p shardedParticipant) revoke(ctx context.Context, set shard.PartitionSet, _ bool) error {
	return p.s.Revoke(ctx, set)
}
