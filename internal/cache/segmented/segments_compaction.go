package segmented

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// Bounds of a compaction's takeover (takeOver).
const (
	// takeoverPoll is how often a synced compaction checks whether it has
	// caught up with the segments it replaces.
	takeoverPoll = 20 * time.Millisecond
	// takeoverLimit is how long it waits for that at most: a handler that
	// does not return holds its segment's events back, and the partitions
	// only the compaction lists (gained with it) stay unsynced meanwhile.
	// A fixed bound, not one derived from shard.Timing: it waits on this
	// process's own handlers, not on peers or Leases, and past it nothing
	// unsafe happens (a late event is missed until its object next
	// changes, and the self-check relists what a store lost).
	takeoverLimit = 30 * time.Second
)

// takeOver makes the synced compaction seg the speaker of its partitions
// and stops the segments it replaces, once it has caught up with them
// (caughtUp): until then they speak, so reads never go back to an older
// state or miss an object, and no event is dropped by both sides, one not
// speaking yet and the other stopped before its handlers had it. The
// objects a replaced segment still holds that seg has seen go are passed
// on as deletions: seg's LIST showed their absence, not the DELETED.
func (s *Segmented) takeOver(ctx context.Context, seg *segment) {
	deadline := s.opts.Clock.Now().Add(takeoverLimit)
	tick := s.opts.Clock.NewTicker(takeoverPoll)
	defer tick.Stop()
	told := map[string]bool{} // vanished objects leaving was told of
	for {
		s.mu.Lock()
		if !slices.Contains(s.segments, seg) {
			s.mu.Unlock()
			return // stopped by Hold meanwhile
		}
		if ready := s.caughtUp(seg); ready || s.opts.Clock.Now().After(deadline) {
			gone := s.vanished(seg)
			if untold := s.untold(gone, told); len(untold) > 0 {
				// They vanish from reads with the replaced segments, and
				// leaving must hear of that first (it takes the Labelled's
				// lock, which is taken before s.mu: not under s.mu). Then
				// check again.
				s.mu.Unlock()
				for _, obj := range untold {
					s.opts.Leaving(obj)
				}
				continue
			}
			if !ready {
				s.log.Info("a cache compaction takes over before the segments it replaces have caught up: a watch event in flight may be missed until the next change of its object", "partitions", seg.parts.String(), "waited", takeoverLimit)
			}
			seg.synced.Store(true)
			s.segments = slices.DeleteFunc(s.segments, func(o *segment) bool {
				if o != seg && s.replaces(seg, o) {
					o.cancel()
					s.forget(o)
					return true
				}
				return false
			})
			s.signal()
			handlers := slices.Clone(s.handlers)
			s.mu.Unlock()
			for _, obj := range gone {
				for _, reg := range handlers {
					reg.h.OnDelete(obj)
				}
			}
			return
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// replaces reports whether the compaction seg replaces o: o holds nothing
// seg does not. Call with s.mu held.
func (s *Segmented) replaces(seg, o *segment) bool {
	return o.parts.Difference(seg.parts).Intersect(s.held).IsEmpty()
}

// caughtUp reports whether the compaction seg may take over from the
// segments it replaces: each has passed every watch event it received on
// to every handler, and seg's store holds each of their held objects at
// the same state or a newer one, or has passed on events beyond it (so
// the object is gone). Call with s.mu held.
func (s *Segmented) caughtUp(seg *segment) bool {
	s.takeoverChecks.Add(1)
	floor := s.dispatchedFloor(seg)
	for _, o := range s.segments {
		if o == seg || !s.replaces(seg, o) {
			continue
		}
		received := o.received.Load()
		for _, reg := range s.handlers {
			if d := reg.dispatched[o]; d != nil && d.Load() < received {
				return false
			}
		}
		for _, obj := range o.inf.GetStore().List() {
			p, ok := s.PartitionOf(obj)
			if !ok || !s.held.Has(p) || !seg.parts.Has(p) {
				continue
			}
			rv := objectRV(obj)
			if cur, ok, _ := seg.inf.GetStore().Get(obj); ok {
				if objectRV(cur) < rv {
					return false
				}
			} else if floor < rv {
				return false
			}
		}
	}
	return true
}

// dispatchedFloor is the resourceVersion up to which seg has passed every
// event on to every handler (its LIST's at least, once a handler has had
// the whole list; its LIST's when it has no handler). Its store holds at
// least that state. Call with s.mu held.
func (s *Segmented) dispatchedFloor(seg *segment) uint64 {
	if len(s.handlers) == 0 {
		return seg.listRV.Load()
	}
	floor := uint64(math.MaxUint64)
	for _, reg := range s.handlers {
		d := uint64(0)
		if c := reg.dispatched[seg]; c != nil {
			d = c.Load()
		}
		if r := reg.regs[seg]; r != nil && r.HasSynced() {
			d = max(d, seg.listRV.Load())
		}
		floor = min(floor, d)
	}
	return floor
}

// vanished returns the held objects of seg's partitions that the segments
// seg replaces serve and seg does not: gone before seg's state (caughtUp
// checked). Call with s.mu held, before seg speaks.
func (s *Segmented) vanished(seg *segment) []any {
	var out []any
	for _, o := range s.segments {
		if o == seg || !s.replaces(seg, o) {
			continue
		}
		for _, obj := range o.inf.GetStore().List() {
			p, ok := s.PartitionOf(obj)
			if !ok || !seg.parts.Has(p) || !s.owns(o, obj) {
				continue
			}
			if _, ok, _ := seg.inf.GetStore().Get(obj); !ok {
				out = append(out, obj)
			}
		}
	}
	return out
}

// untold returns the objects of gone that leaving (when set) has not been
// told of, and marks them told.
func (s *Segmented) untold(gone []any, told map[string]bool) []runtime.Object {
	if s.opts.Leaving == nil {
		return nil
	}
	var out []runtime.Object
	for _, obj := range gone {
		key, err := toolscache.MetaNamespaceKeyFunc(obj)
		o, ok := obj.(runtime.Object)
		if err != nil || !ok || told[key] {
			continue
		}
		told[key] = true
		out = append(out, o)
	}
	return out
}

// objectRV is the resourceVersion of obj or of the object a
// DeletedFinalStateUnknown carries (0 if it has none that parses).
func objectRV(obj any) uint64 {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	return cachekit.ResourceVersion(obj)
}

// raise sets c to v if v is larger.
func raise(c *atomic.Uint64, v uint64) {
	for {
		cur := c.Load()
		if v <= cur || c.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Relist lists every held partition again in one compaction, which
// replaces the running segments once it has synced and caught up with them
// (takeOver): a store that lost an object gets it back, and reads never go
// back to an older state meanwhile. It reports whether it started one:
// not before Run or after it, not while nothing is held, and not in the
// fallback, whose one informer of the whole resource a relist would only
// duplicate.
func (s *Segmented) Relist() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil || s.stopped || !s.filtered || s.held.IsEmpty() {
		return false
	}
	s.start(s.held.Clone(), true)
	return true
}
