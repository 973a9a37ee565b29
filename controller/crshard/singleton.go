package crshard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kshard/kshard/shard"
)

// AddSingleton registers r to run on exactly one replica of the ring: the
// one where the partition of shard.SingletonKey(name) is active, as
// kshard's manager runs its singletons. It is started when that partition
// is admitted here and cancelled, and waited for, when it is revoked, so it
// never runs on two replicas at once. This replaces a Runnable that needed
// leader election. Register it before the manager starts.
func (r *Ring) AddSingleton(name string, run crmanager.Runnable) error {
	if name == "" || run == nil {
		return errors.New("crshard: AddSingleton needs a name and a runnable")
	}
	s := &singleton{name: name, partition: r.parts.Of("", shard.SingletonKey(name)), run: run, ring: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("crshard: a singleton was added after the ring started; add every singleton before starting the manager")
	}
	for _, o := range r.singletons {
		if o.name == name {
			return fmt.Errorf("crshard: a singleton named %q is already registered", name)
		}
	}
	r.singletons = append(r.singletons, s)
	return nil
}

// singleton is one Runnable riding the ring.
type singleton struct {
	name      string
	partition int
	run       crmanager.Runnable
	ring      *Ring

	mu     sync.Mutex // guards cancel and done: one run at a time
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs the singleton under base unless it runs already.
func (s *singleton) start(base context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(base)
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	go func() {
		defer close(done)
		if err := s.run.Start(ctx); err != nil && ctx.Err() == nil {
			s.ring.log.Error(err, "singleton failed; it runs again on its next activation", "singleton", s.name)
		}
	}()
}

// stop cancels the run and waits for it, or for ctx.
func (s *singleton) stop(ctx context.Context) error {
	s.cancelRun()
	return s.wait(ctx)
}

// cancelRun cancels the current run, if any, without waiting.
func (s *singleton) cancelRun() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

// wait waits until the current run, if any, has returned, or ctx ends.
func (s *singleton) wait(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("crshard: singleton %q did not stop: %w", s.name, context.Cause(ctx))
	}
	s.mu.Lock()
	if s.done == done {
		s.cancel, s.done = nil, nil
	}
	s.mu.Unlock()
	return nil
}
