package manager

import (
	"context"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// participant is a Runnable that takes part in handoff, seen uniformly by
// the coordinator whether it is a controller or a user's Sharded runnable.
type participant interface {
	activate(ctx context.Context, set shard.PartitionSet) error
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

func (p controllerParticipant) activate(ctx context.Context, set shard.PartitionSet) error {
	return p.c.Activate(ctx, set)
}

func (p controllerParticipant) revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if fence {
		return p.c.Revoke(ctx, set, controller.GracePeriod(0))
	}
	return p.c.Revoke(ctx, set)
}

type shardedParticipant struct{ s Sharded }

func (p shardedParticipant) activate(ctx context.Context, set shard.PartitionSet) error {
	return p.s.Activate(ctx, set)
}

// A Sharded runnable has no grace period to skip: its Revoke is its drain.
func (p shardedParticipant) revoke(ctx context.Context, set shard.PartitionSet, _ bool) error {
	return p.s.Revoke(ctx, set)
}
