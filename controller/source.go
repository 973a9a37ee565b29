package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
)

// Source delivers events to a controller's Queue through its handler.
// Start registers and returns without blocking; the source stops
// delivering when ctx ends.
type Source interface {
	Start(ctx context.Context, q Queue) error
}

// SyncingSource is a Source whose initial state can be awaited. The
// controller starts its workers only after every SyncingSource has synced.
type SyncingSource interface {
	Source
	WaitForSync(ctx context.Context) error
}

// ReplayableSource is a Source that can re-deliver the objects it holds.
// Activate calls Replay on every started ReplayableSource, with a Queue that
// keeps only requests of the newly activated partitions. Informer sources
// (Kind, FromInformer) replay their cache as create events through their
// predicates and handler; Channel sources cannot, so a controller that
// starts inactive refuses them and any other Source that is not a
// ReplayableSource, unless Options.AllowUnreplayedSources is set.
type ReplayableSource interface {
	Source
	Replay(ctx context.Context, q Queue) error
}

// Informers gives the informer serving obj's kind: typed, or metadata-only
// for a *metav1.PartialObjectMetadata with TypeMeta set. The manager's cache
// (*cache.Cache in package shard/cache) implements it.
type Informers interface {
	Informer(ctx context.Context, obj Object) (Informer, error)
}

// Informer is what a source uses of an informer: a client-go
// SharedIndexInformer satisfies it, and so does the manager's sharded cache
// of a kind (internal/cache/segmented), whose handler registrations report
// synced at once because it syncs per partition, before the ring activates
// each. An alias of an interface literal, identical to shard/cache's.
type Informer = interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error
	GetStore() toolscache.Store
}

// Kind is a Source of events on obj's kind, from the informer that
// informers gives for it when the source starts.
func Kind(informers Informers, obj Object, h EventHandler, preds ...Predicate) Source {
	return &informerSource{informers: informers, obj: obj, handler: h, preds: compact(preds)}
}

// FromInformer is a Source of events from inf, which its owner runs.
func FromInformer(inf Informer, h EventHandler, preds ...Predicate) Source {
	return &informerSource{informer: inf, handler: h, preds: compact(preds)}
}

// stopper is implemented by sources that hold resources (a handler
// registration, a goroutine) the controller must release, and wait for, when
// it stops.
type stopper interface {
	stop()
}

type informerSource struct {
	informers Informers
	obj       Object
	handler   EventHandler
	preds     []Predicate

	// mu guards the fields set by Start.
	mu       sync.Mutex
	informer Informer
	reg      toolscache.ResourceEventHandlerRegistration
	started  bool
}

func (s *informerSource) String() string {
	if s.obj != nil {
		return fmt.Sprintf("kind source: %T", s.obj)
	}
	return "informer source"
}

func (s *informerSource) Start(ctx context.Context, q Queue) error {
	if s.handler == nil {
		return fmt.Errorf("%s: event handler is nil", s)
	}
	if q == nil {
		return fmt.Errorf("%s: queue is nil", s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%s: already started; a source feeds one controller once", s)
	}
	inf := s.informer
	if inf == nil {
		if s.informers == nil {
			return fmt.Errorf("%s: Informers is nil; pass the manager's cache", s)
		}
		var err error
		if inf, err = s.informers.Informer(ctx, s.obj); err != nil {
			return fmt.Errorf("%s: getting the informer: %w", s, err)
		}
	}
	reg, err := inf.AddEventHandler(&eventAdapter{ctx: ctx, log: logr.FromContextOrDiscard(ctx), handler: s.handler, preds: s.preds, q: q})
	if err != nil {
		return fmt.Errorf("%s: registering the event handler: %w", s, err)
	}
	s.informer, s.reg, s.started = inf, reg, true
	return nil
}

func (s *informerSource) WaitForSync(ctx context.Context) error {
	s.mu.Lock()
	reg := s.reg
	s.mu.Unlock()
	if reg == nil {
		return fmt.Errorf("%s: not started", s)
	}
	select {
	case <-reg.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		if reg.HasSynced() {
			return nil
		}
		return fmt.Errorf("%s: waiting for the informer to sync: %w", s, context.Cause(ctx))
	}
}

func (s *informerSource) Replay(ctx context.Context, q Queue) error {
	s.mu.Lock()
	inf, started := s.informer, s.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	for i, item := range inf.GetStore().List() {
		if i%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("%s: replay interrupted: %w", s, ctx.Err())
		}
		obj, ok := item.(Object)
		if !ok {
			continue
		}
		e := CreateEvent{Object: obj}
		if passCreate(s.preds, e) {
			s.handler.Create(ctx, e, q)
		}
	}
	return nil
}

func (s *informerSource) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reg != nil {
		_ = s.informer.RemoveEventHandler(s.reg)
		s.reg = nil
	}
}

// eventAdapter turns informer notifications into events, filters them with
// the predicates and hands them to the handler.
type eventAdapter struct {
	ctx     context.Context
	log     logr.Logger
	handler EventHandler
	preds   []Predicate
	q       Queue
}

func (a *eventAdapter) OnAdd(obj interface{}, _ bool) {
	o, ok := obj.(Object)
	if !ok {
		a.log.Error(nil, "Dropping add event: not a Kubernetes object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e := CreateEvent{Object: o}
	if passCreate(a.preds, e) {
		a.handler.Create(a.ctx, e, a.q)
	}
}

func (a *eventAdapter) OnUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(Object)
	n, ok2 := newObj.(Object)
	if !ok1 || !ok2 {
		a.log.Error(nil, "Dropping update event: not a Kubernetes object", "type", fmt.Sprintf("%T", newObj))
		return
	}
	e := UpdateEvent{ObjectOld: o, ObjectNew: n}
	for _, p := range a.preds {
		if !p.Update(e) {
			return
		}
	}
	a.handler.Update(a.ctx, e, a.q)
}

func (a *eventAdapter) OnDelete(obj interface{}) {
	e := DeleteEvent{}
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		e.DeleteStateUnknown = true
		obj = tomb.Obj
	}
	o, ok := obj.(Object)
	if !ok {
		a.log.Error(nil, "Dropping delete event: not a Kubernetes object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.Object = o
	for _, p := range a.preds {
		if !p.Delete(e) {
			return
		}
	}
	a.handler.Delete(a.ctx, e, a.q)
}

func passCreate(preds []Predicate, e CreateEvent) bool {
	for _, p := range preds {
		if !p.Create(e) {
			return false
		}
	}
	return true
}

// checkReplayable refuses, for a controller that starts inactive, a source
// that cannot be replayed, unless opts allow it.
func checkReplayable(src Source, opts Options) error {
	if _, ok := src.(ReplayableSource); ok || !opts.StartInactive || opts.AllowUnreplayedSources {
		return nil
	}
	name := fmt.Sprintf("source %T", src)
	if s, ok := src.(fmt.Stringer); ok {
		name = s.String()
	}
	return fmt.Errorf("the %s cannot be replayed when partitions are activated here, so the events it delivers while their partition is owned by another replica or moving would be lost; watch the kind with an informer source (Kind, FromInformer, Builder.Watches), or set Options.AllowUnreplayedSources to accept that", name)
}

// Channel is a Source of GenericEvents from outside the cluster. It reads ch
// until ch is closed or the controller stops. Events with a nil Object are
// dropped. Channel sources are not replayed by Activate: events of a
// partition not active when they arrive are dropped by the gate, so senders
// that need delivery must resend after activation. A controller that starts
// inactive (under a sharding manager) therefore refuses them unless
// Options.AllowUnreplayedSources is set.
func Channel(ch <-chan GenericEvent, h EventHandler, preds ...Predicate) Source {
	return &channelSource{ch: ch, handler: h, preds: compact(preds)}
}

type channelSource struct {
	ch      <-chan GenericEvent
	handler EventHandler
	preds   []Predicate

	// mu guards the fields set by Start.
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // closed when the reading goroutine has returned
}

func (s *channelSource) String() string { return "channel source" }

func (s *channelSource) Start(ctx context.Context, q Queue) error {
	if s.ch == nil {
		return errors.New("channel source: channel is nil")
	}
	if s.handler == nil {
		return errors.New("channel source: event handler is nil")
	}
	if q == nil {
		return errors.New("channel source: queue is nil")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return errors.New("channel source: already started; a source feeds one controller once")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go s.run(ctx, q, s.done)
	return nil
}

func (s *channelSource) run(ctx context.Context, q Queue, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-s.ch:
			if !ok {
				return
			}
			if e.Object == nil {
				continue
			}
			pass := true
			for _, p := range s.preds {
				if !p.Generic(e) {
					pass = false
					break
				}
			}
			if pass {
				s.handler.Generic(ctx, e, q)
			}
		}
	}
}

// stop ends the reading goroutine and waits for it.
func (s *channelSource) stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// deferredSource builds its Source when it starts rather than when the
// controller is built: the builder uses it for sources whose construction
// needs the API server (an owner's REST mapping) when that was unreachable
// at build time.
type deferredSource struct {
	name  string
	build func() (Source, error)

	mu    sync.Mutex
	inner Source
}

func (s *deferredSource) String() string { return s.name }

func (s *deferredSource) Start(ctx context.Context, q Queue) error {
	inner, err := s.build()
	if err != nil {
		return err
	}
	if err := inner.Start(ctx, q); err != nil {
		return err
	}
	s.mu.Lock()
	s.inner = inner
	s.mu.Unlock()
	return nil
}

func (s *deferredSource) started() Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner
}

func (s *deferredSource) WaitForSync(ctx context.Context) error {
	switch inner := s.started().(type) {
	case nil:
		return fmt.Errorf("%s: not started", s)
	case SyncingSource:
		return inner.WaitForSync(ctx)
	}
	return nil
}

func (s *deferredSource) Replay(ctx context.Context, q Queue) error {
	if inner, ok := s.started().(ReplayableSource); ok {
		return inner.Replay(ctx, q)
	}
	return nil
}

func (s *deferredSource) stop() {
	if inner, ok := s.started().(stopper); ok {
		inner.stop()
	}
}
