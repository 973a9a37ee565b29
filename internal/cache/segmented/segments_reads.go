package segmented

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/shard"
)

// AddEventHandler registers h with every segment, those running and those
// started later. h sees each object of a held partition from one segment.
// The registration reports synced at once: a sharded cache is synced per
// partition (SyncedPartitions), and the ring activates a partition, and
// replays its objects, only once it is; events of partitions not yet synced
// reach h too, and the shard gate drops them.
func (s *Segmented) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("cache: AddEventHandler(nil)")
	}
	reg := &segmentedHandler{h: h, regs: map[*segment]toolscache.ResourceEventHandlerRegistration{}, dispatched: map[*segment]*atomic.Uint64{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, reg)
	for _, seg := range s.segments {
		s.register(seg, reg)
	}
	return reg, nil
}

// RemoveEventHandler stops deliveries to a handler AddEventHandler added.
func (s *Segmented) RemoveEventHandler(r toolscache.ResourceEventHandlerRegistration) error {
	reg, ok := r.(*segmentedHandler)
	if !ok {
		return fmt.Errorf("cache: RemoveEventHandler: %T was not returned by this Segmented's AddEventHandler", r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.handlers, reg)
	if i < 0 {
		return nil // removed before
	}
	s.handlers = slices.Delete(s.handlers, i, i+1)
	for seg, sr := range reg.regs {
		_ = seg.inf.RemoveEventHandler(sr)
	}
	clear(reg.regs)
	return nil
}

// segmentedHandler is a handler of a Segmented and its registration with
// each segment. Its regs are guarded by the Segmented's mu.
type segmentedHandler struct {
	h    toolscache.ResourceEventHandler
	regs map[*segment]toolscache.ResourceEventHandlerRegistration
	// dispatched: per segment, the newest resourceVersion of an event
	// the segment has handled for h (passed on or not).
	dispatched map[*segment]*atomic.Uint64
}

func (*segmentedHandler) HasSynced() bool                          { return true }
func (*segmentedHandler) HasSyncedChecker() toolscache.DoneChecker { return cachekit.AlwaysDone{} }

// register adds reg to seg behind the ownership check. Call with s.mu held.
func (s *Segmented) register(seg *segment, reg *segmentedHandler) {
	pass := func(obj any, initial bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.passes(seg, obj, initial)
	}
	// Raised after the handler returned: a compaction's takeover waits
	// for it (caughtUp), so an event is never counted as passed on before
	// its segment stopped speaking.
	dispatched := &atomic.Uint64{}
	h := reg.h
	sr, err := seg.inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if pass(obj, initial) {
				h.OnAdd(obj, initial)
			}
			raise(dispatched, objectRV(obj))
		},
		UpdateFunc: func(old, obj any) {
			if pass(obj, false) {
				h.OnUpdate(old, obj)
			}
			raise(dispatched, objectRV(obj))
		},
		DeleteFunc: func(obj any) {
			if pass(obj, false) {
				h.OnDelete(obj)
			}
			raise(dispatched, objectRV(obj))
		},
	})
	if err == nil {
		reg.regs[seg] = sr
		reg.dispatched[seg] = dispatched
	}
}

// passes reports whether an event of seg about obj reaches the handlers:
// seg speaks for obj's partition, or seg is a compaction that does not
// speak yet (takeOver) and the event may be news to the handlers. Its
// watch events are: the speaking segment may not have had them yet, and
// may stop before it has. Its LIST's items are when the speaking segment
// holds an older state or none: the change that made them is one it has
// not received. Either may pass an event twice; a handler enqueues a key
// twice, no more. Call with s.mu held.
func (s *Segmented) passes(seg *segment, obj any, initial bool) bool {
	if s.owns(seg, obj) {
		return true
	}
	if !seg.compacts || seg.synced.Load() {
		return false
	}
	p, ok := s.PartitionOf(obj)
	if !ok || !s.held.Has(p) || !seg.parts.Has(p) {
		return false
	}
	if !initial {
		return true
	}
	speaker := s.speakerOf(p) // an older segment: seg would own obj otherwise
	if speaker == nil {
		return true
	}
	cur, ok, _ := speaker.inf.GetStore().Get(obj)
	return !ok || objectRV(cur) < objectRV(obj)
}

// forget drops seg from every handler's registrations (it stopped).
// Call with s.mu held.
func (s *Segmented) forget(seg *segment) {
	for _, reg := range s.handlers {
		delete(reg.regs, seg)
		delete(reg.dispatched, seg)
	}
}

// List returns the cached objects of the held partitions, each once.
func (s *Segmented) List() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, seg := range s.segments {
		for _, obj := range seg.inf.GetStore().List() {
			if s.owns(seg, obj) {
				out = append(out, obj)
			}
		}
	}
	return out
}

// ListNamespace returns the cached objects of namespace in the held
// partitions, each once.
func (s *Segmented) ListNamespace(namespace string) ([]any, error) {
	return s.ByIndex(toolscache.NamespaceIndex, namespace)
}

// ByIndex returns the cached objects of the held partitions whose index
// name has value, each once.
func (s *Segmented) ByIndex(name, value string) ([]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, seg := range s.segments {
		items, err := seg.inf.GetIndexer().ByIndex(name, value)
		if err != nil {
			return nil, err
		}
		for _, obj := range items {
			if s.owns(seg, obj) {
				out = append(out, obj)
			}
		}
	}
	return out, nil
}

// Held returns the partitions the cache was last asked to hold.
func (s *Segmented) Held() shard.PartitionSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held.Clone()
}

// GetStore returns a read-only view of the held objects (List, ListKeys,
// Get, GetByKey), for code written against an informer's store, such as a
// source's replay. Its writes fail: the segments own their stores.
func (s *Segmented) GetStore() toolscache.Store { return cachekit.ReadOnlyStore{S: s} }

// GetByKey returns the cached object of key ("namespace/name") if it is in
// a held partition.
func (s *Segmented) GetByKey(key string) (any, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.segments) - 1; i >= 0; i-- {
		seg := s.segments[i]
		obj, ok, err := seg.inf.GetStore().GetByKey(key)
		if err != nil {
			return nil, false, err
		}
		if ok && s.owns(seg, obj) {
			return obj, true, nil
		}
	}
	return nil, false, nil
}
