package manager

import (
	"context"
	"fmt"
	"sync"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// singleton runs a Runnable on exactly one replica of the ring: the one where
// partition(singleton/<name>) is active. It is started on activation and
// cancelled and waited for on revoke, like any reconcile of that partition.
// Its context carries the replica's lease validity, as a reconcile's does,
// so the manager's clients refuse its writes once the validity passes or a
// fence ends the epoch it started in: cancellation alone comes too late
// after a pause, when the singleton may resume and write before the
// coordinator has run to revoke it.
type singleton struct {
	name      string
	partition int
	runnable  Runnable
	report    func(error)
	// validity is the manager's lease validity; nil runs the singleton
	// without one (its writes are never refused).
	validity controller.LeaseValidity

	mu     sync.Mutex // guards cancel and done: one run at a time
	cancel context.CancelFunc
	done   chan struct{}
	base   context.Context
}

func (s *singleton) Start(ctx context.Context) error {
	s.mu.Lock()
	s.base = ctx
	s.mu.Unlock()
	<-ctx.Done()
	return s.stop()
}

// Admit starts the singleton when its partition is admitted. It runs on the
// ring coordinator's loop, where no revoke can overtake it.
func (s *singleton) Admit(_ context.Context, set shard.PartitionSet) error {
	if !set.Has(s.partition) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || s.base == nil || s.base.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(s.base)
	if s.validity != nil {
		ctx = controller.WithLeaseValidity(ctx, s.validity)
	}
	s.cancel, s.done = cancel, make(chan struct{})
	done := s.done
	go func() {
		defer close(done)
		if err := s.runnable.Start(ctx); err != nil && ctx.Err() == nil {
			s.report(fmt.Errorf("singleton %q: %w", s.name, err))
		}
	}()
	return nil
}

// Replay has nothing to do: a singleton has no cache to replay.
func (*singleton) Replay(context.Context, shard.PartitionSet) error { return nil }

// Revoke cancels the singleton when its partition is revoked and waits for
// it; there is no grace period to skip on a fence.
func (s *singleton) Revoke(ctx context.Context, set shard.PartitionSet, _ bool) error {
	if !set.Has(s.partition) {
		return nil
	}
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("singleton %q did not stop: %w", s.name, ctx.Err())
	}
	s.mu.Lock()
	if s.done == done {
		s.cancel, s.done = nil, nil
	}
	s.mu.Unlock()
	return nil
}

func (s *singleton) stop() error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if done != nil {
		cancel()
		<-done
	}
	return nil
}
