package manager

import (
	"context"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager/ring"
	"github.com/kshard/kshard/shard"
)

func asParticipant(r Runnable) ring.Participant {
	switch v := r.(type) {
	case controller.Controller:
		return controllerParticipant{v}
	case Sharded:
		return shardedParticipant{v}
	}
	return nil
}

type controllerParticipant struct{ c controller.Controller }

func (p controllerParticipant) Admit(_ context.Context, set shard.PartitionSet) error {
	return p.c.Admit(set)
}

func (p controllerParticipant) Replay(ctx context.Context, set shard.PartitionSet) error {
	return p.c.Replay(ctx, set)
}

func (p controllerParticipant) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if fence {
		return p.c.Revoke(ctx, set, controller.GracePeriod(0))
	}
	return p.c.Revoke(ctx, set)
}

type shardedParticipant struct{ s Sharded }

// A Sharded runnable's Activate is its gate (a singleton starts in it), so
// it runs on the loop, where no revoke can overtake it; it has nothing to
// replay.
func (p shardedParticipant) Admit(ctx context.Context, set shard.PartitionSet) error {
	return p.s.Activate(ctx, set)
}

func (shardedParticipant) Replay(context.Context, shard.PartitionSet) error { return nil }

// A Sharded runnable has no grace period to skip: its Revoke is its drain.
func (p shardedParticipant) Revoke(ctx context.Context, set shard.PartitionSet, _ bool) error {
	return p.s.Revoke(ctx, set)
}
