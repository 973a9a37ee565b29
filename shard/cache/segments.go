package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// DefaultMaxSegments bounds how many informers a Segmented keeps before it
// compacts them into one.
const DefaultMaxSegments = 4

// SegmentedOptions configure a Segmented.
type SegmentedOptions struct {
	// Partitioner maps objects to partitions by the server's hash
	// (shard.Config.Scheme namespace or uid). Required unless LabelKey is
	// set.
	Partitioner shard.RangePartitioner
	// LabelKey, when set, makes segments select objects by the ring's
	// partition label (shard.PartitionLabelKey) instead of a shard
	// selector: a segment of partitions S lists and watches
	// "LabelKey in (S)", and an object is stored under the partition its
	// label names. Every API server applies label selectors, so Filtered
	// is implied. Partitions is then the ring's partition count.
	LabelKey   string
	Partitions int
	// ListWatch lists and watches the resource; the Segmented sets
	// ListOptions.ShardSelector (or LabelSelector) on every call when
	// Filtered. Required.
	ListWatch toolscache.ListerWatcherWithContext
	// Example is an object of the resource's type (for the informers).
	// Required.
	Example runtime.Object
	// Filtered: the API server applies shard selectors to this resource
	// (ProbeShardFiltering said so). Otherwise the Segmented falls back to
	// one informer of the whole resource, filtered on the client only.
	Filtered bool
	// Reprobe, for a Segmented that starts unfiltered because the probe
	// had no object to test with (ShardProbe.Retry), asks again whether
	// the server filters the resource. Run calls it on a goroutine it
	// owns once the informer of the whole resource caches an object.
	// Filtered: the Segmented moves to the server's filter (one segment
	// lists the held partitions with the selector and replaces the whole
	// informer once synced, so no partition stops being synced). Retry:
	// asked again once an object is cached, no sooner than after a delay
	// that doubles from 1 s to 5 minutes. Anything else is final.
	// Default nil: the mode never changes.
	Reprobe func(ctx context.Context) ShardProbe
	// MaxSegments: more informers than this are compacted into one, off
	// the handoff path. Default DefaultMaxSegments.
	MaxSegments int
	// Transform is applied to every object before it is stored (an
	// informer transform). Default: none.
	Transform toolscache.TransformFunc
	// Indexers are added to every segment's informer besides the
	// namespace index.
	Indexers toolscache.Indexers
	// Logger defaults to logr.Discard().
	Logger logr.Logger

	// leaving, when set, is told of every object that leaves a segment (a
	// DELETED event, or a relist without it) before the segment's store
	// drops it, and of every object whose label moves it, within one
	// segment, to another partition or to one no longer held (a MODIFIED
	// event, or a relist), before the store changes: a Labelled keeps
	// serving an object that left a label selector, or that its segment
	// now hides, until it knows where it went.
	leaving func(obj runtime.Object)
	// afterRunStart, when set (tests only), runs in Run once it has
	// started, before it waits for its context: where a Hold racing
	// Run's start lands.
	afterRunStart func()
}

// Segmented is an informer of one resource that holds only the objects of
// the partitions it is asked to hold (Hold), on Kubernetes' sharded list and
// watch: every gain of partitions starts a segment, an informer whose shard
// selector is only the gained ranges, so nothing cached is listed again; a
// segment stops once all its partitions are released; more than MaxSegments
// are compacted into one informer of everything held, which replaces them
// once synced and caught up with them (handOver). Every listed item and watch event is checked against the
// segment's partitions on the client before the store (a server that
// ignored the selector cannot put foreign objects in it). It implements
// ring.PartitionCache.
type Segmented struct {
	opts SegmentedOptions
	log  logr.Logger

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run
	stopped  bool            // Run has returned or is stopping: start nothing
	wg       sync.WaitGroup
	held     shard.PartitionSet
	segments []*segment // oldest first
	handlers []*segmentedHandler
	changed  chan struct{}
	filtered bool // segments list with the server's filter: opts.Filtered, or Reprobe proved it

	objectSeen chan struct{} // the whole informer cached an object, for Reprobe

	handOverChecks atomic.Int64 // caughtUp evaluations, for tests to know a handover waits
	listed         atomic.Int64 // objects the server returned to LISTs
	unfiltered     atomic.Int64 // LISTs with a shard selector the server did not apply (UnfilteredLists)
}

// segment is one informer and the partitions it was started for.
type segment struct {
	parts    shard.PartitionSet
	inf      toolscache.SharedIndexInformer
	cancel   context.CancelFunc
	synced   atomic.Bool
	compacts bool // started to replace every older segment
	filtered bool // lists with a selector (else: the whole resource)
	// listRV is the resourceVersion of its last LIST, received the newest
	// of the watch events it kept: how far a compaction's handover checks
	// it has come (caughtUp).
	listRV, received atomic.Uint64
}

// NewSegmented validates opts and returns a Segmented holding nothing; call
// Run, then Hold.
func NewSegmented(opts SegmentedOptions) (*Segmented, error) {
	switch {
	case opts.LabelKey != "" && opts.Partitions < 1:
		return nil, fmt.Errorf("cache: SegmentedOptions.Partitions=%d with LabelKey %q; pass the ring's partition count", opts.Partitions, opts.LabelKey)
	case opts.LabelKey == "" && opts.Partitioner.Count() == 0:
		return nil, errors.New("cache: SegmentedOptions.Partitioner is nil; use the ring's shard.Config.RangePartitioner (scheme namespace or uid)")
	case opts.ListWatch == nil:
		return nil, errors.New("cache: SegmentedOptions.ListWatch is nil")
	case opts.Example == nil:
		return nil, errors.New("cache: SegmentedOptions.Example is nil; pass an object of the resource's type")
	case opts.MaxSegments < 0:
		return nil, fmt.Errorf("cache: SegmentedOptions.MaxSegments=%d is negative", opts.MaxSegments)
	}
	if opts.MaxSegments == 0 {
		opts.MaxSegments = DefaultMaxSegments
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.LabelKey != "" {
		opts.Filtered = true
	} else {
		opts.Partitions = opts.Partitioner.Count()
	}
	return &Segmented{
		opts: opts, log: opts.Logger, held: shard.NewPartitionSet(opts.Partitions),
		changed: make(chan struct{}, 1), filtered: opts.Filtered, objectSeen: make(chan struct{}, 1),
	}, nil
}

// Run owns the segments' informers until ctx ends, then stops them and
// waits for them.
func (s *Segmented) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	held := s.held.Clone()
	s.held = shard.NewPartitionSet(held.Size())
	if s.opts.Reprobe != nil && !s.filtered {
		s.wg.Go(func() { s.reprobe(ctx) })
	}
	// What was asked before Run, in the critical section that sets ctx: a
	// Hold landing between the two would otherwise start the segments of
	// its set, and this stale one then take back what it gained, leaving
	// those partitions unsynced until the next Hold.
	if !held.IsEmpty() {
		s.holdLocked(held)
	}
	s.mu.Unlock()
	if s.opts.afterRunStart != nil {
		s.opts.afterRunStart()
	}
	<-ctx.Done()
	s.mu.Lock()
	s.stopped = true
	for _, seg := range s.segments {
		seg.cancel()
	}
	s.segments = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// Hold sets the partitions whose objects the informer holds: gained ones
// are listed by a new segment (synced once it is) unless a running segment
// still lists them, released ones are hidden at once and their segment
// stopped when nothing of it is held any more, or restarted for the rest
// when it has not synced yet.
func (s *Segmented) Hold(set shard.PartitionSet) {
	mustBeSized("Segmented.Hold", set, s.opts.Partitions)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdLocked(set)
}

// holdLocked is Hold with s.mu held.
func (s *Segmented) holdLocked(set shard.PartitionSet) {
	if s.stopped {
		return
	}
	if s.ctx == nil {
		s.held = set.Clone() // started by Run
		return
	}
	gained, released := set.Difference(s.held), s.held.Difference(set)
	s.held = set.Clone()
	if !released.IsEmpty() {
		s.segments = slices.DeleteFunc(s.segments, func(seg *segment) bool {
			kept := seg.parts.Intersect(s.held)
			switch {
			case kept.IsEmpty():
			case s.filtered && !seg.compacts && !seg.synced.Load() && !kept.Equal(seg.parts):
				// Still listing partitions no longer held: restart it
				// for the rest. Otherwise a segment caches its released
				// partitions' objects (hidden, never served) until its last
				// partition goes, and a ring that changes twice in a moment,
				// as at formation, leaves a replica caching its first share
				// (measured: 1.5× the memory of its final one). Its
				// partitions were not synced, so none of them was active.
				gained = gained.Union(kept)
			default:
				return false
			}
			seg.cancel()
			s.forget(seg)
			return true
		})
		s.signal()
	}
	if s.filtered && !gained.IsEmpty() {
		// A gained partition that a running segment still lists (released
		// a moment ago and hidden since, its watch kept) is that segment's
		// again: it never stopped caching it. A new segment for it would
		// list it again, and when it synced, reads and events would move
		// to a store that may lag the old one's: a Get missing an object
		// that exists, an event dropped by both (one not yet speaking, the
		// other no longer).
		covered := shard.NewPartitionSet(gained.Size())
		for _, seg := range s.segments {
			if seg.filtered {
				covered = covered.Union(seg.parts.Intersect(gained))
			}
		}
		if !covered.IsEmpty() {
			gained = gained.Difference(covered)
			s.signal()
		}
	}
	switch {
	case gained.IsEmpty():
	case !s.filtered:
		// Fallback: one informer of everything, started once.
		if len(s.segments) == 0 {
			s.start(shard.FullPartitionSet(set.Size()), false)
		} else {
			s.signal()
		}
	case len(s.segments)+1 > s.opts.MaxSegments || s.wholeRuns():
		// A compaction replaces the whole informer of a fallback that
		// moved to the server's filter only once it covers every held
		// partition: one of the gained alone would leave it running.
		s.start(s.held.Clone(), true)
	default:
		s.start(gained, false)
	}
}

// start runs a segment for parts. Call with s.mu held.
func (s *Segmented) start(parts shard.PartitionSet, compacts bool) {
	ctx, cancel := context.WithCancel(s.ctx)
	seg := &segment{parts: parts, cancel: cancel, compacts: compacts, filtered: s.filtered}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for name, f := range s.opts.Indexers {
		indexers[name] = f
	}
	seg.inf = toolscache.NewSharedIndexInformerWithOptions(s.listWatchFor(parts, seg), s.opts.Example, toolscache.SharedIndexInformerOptions{Indexers: indexers})
	if s.opts.Transform != nil {
		_ = seg.inf.SetTransform(s.opts.Transform)
	}
	if !seg.filtered && s.opts.Reprobe != nil {
		_, _ = seg.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { s.noteObject() }})
	}
	for _, h := range s.handlers {
		s.register(seg, h)
	}
	s.segments = append(s.segments, seg)
	s.log.V(1).Info("starting a cache segment", "partitions", parts.String(), "compaction", compacts, "segments", len(s.segments))
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		seg.inf.Run(ctx.Done())
	}()
	go func() {
		defer s.wg.Done()
		if !toolscache.WaitForCacheSync(ctx.Done(), seg.inf.HasSynced) {
			return
		}
		if seg.compacts {
			s.handOver(ctx, seg)
			return
		}
		seg.synced.Store(true)
		s.mu.Lock()
		defer s.mu.Unlock()
		if slices.Contains(s.segments, seg) { // else stopped by Hold as it synced
			s.log.V(1).Info("cache segment synced", "partitions", parts.String())
			s.signal()
		}
	}()
}

// Bounds of a compaction's handover (handOver).
const (
	// handOverPoll is how often a synced compaction checks whether it has
	// caught up with the segments it replaces.
	handOverPoll = 20 * time.Millisecond
	// handOverLimit is how long it waits for that at most: a handler that
	// does not return holds its segment's events back, and the partitions
	// only the compaction lists (gained with it) stay unsynced meanwhile.
	handOverLimit = 30 * time.Second
)

// handOver makes the synced compaction seg the speaker of its partitions
// and stops the segments it replaces, once it has caught up with them
// (caughtUp): until then they speak, so reads never go back to an older
// state or miss an object, and no event is dropped by both sides, one not
// speaking yet and the other stopped before its handlers had it. The
// objects a replaced segment still holds that seg has seen go are passed
// on as deletions: seg's LIST showed their absence, not the DELETED.
func (s *Segmented) handOver(ctx context.Context, seg *segment) {
	deadline := time.Now().Add(handOverLimit)
	tick := time.NewTicker(handOverPoll)
	defer tick.Stop()
	told := map[string]bool{} // vanished objects leaving was told of
	for {
		s.mu.Lock()
		if !slices.Contains(s.segments, seg) {
			s.mu.Unlock()
			return // stopped by Hold meanwhile
		}
		if ready := s.caughtUp(seg); ready || time.Now().After(deadline) {
			gone := s.vanished(seg)
			if untold := s.untold(gone, told); len(untold) > 0 {
				// They vanish from reads with the replaced segments, and
				// leaving must hear of that first (it takes the Labelled's
				// lock, which is taken before s.mu: not under s.mu). Then
				// check again.
				s.mu.Unlock()
				for _, obj := range untold {
					s.opts.leaving(obj)
				}
				continue
			}
			if !ready {
				s.log.Info("a cache compaction takes over before the segments it replaces have caught up: a watch event in flight may be missed until the next change of its object", "partitions", seg.parts.String(), "waited", handOverLimit)
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
		case <-tick.C:
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
	s.handOverChecks.Add(1)
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
			p, ok := s.partitionOf(obj)
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
			p, ok := s.partitionOf(obj)
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
	if s.opts.leaving == nil {
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
	return resourceVersion(obj)
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

// segmentListWatch turns client-go's watch-list off for a segment: its
// initial state comes from a LIST, whose response is checked as a whole
// (UnfilteredLists), which a stream of events is not. The server filters a
// watch-list by the selector too, but streaming is slower where it
// matters: measured at 100,000 objects (bench phase 9, 2026-11-26),
// streamed segments formed 3 replicas in 6.3 s against 4.3 s, rolled them
// in 18 s against 11 s with a handoff p99 of 1.52 s against 0.89 s (each
// move waits for its new owner's segment), and peaked higher (247 MiB
// against 235).
type segmentListWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to LIST.
func (segmentListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// listWatchFor is the resource's list and watch restricted to parts: the
// selector sent to the server when it filters, and a client-side check of
// every item and event in any case.
func (s *Segmented) listWatchFor(parts shard.PartitionSet, seg *segment) toolscache.ListerWatcher {
	matcher := func(obj runtime.Object) bool {
		p, ok := s.partitionOf(obj)
		return ok && parts.Has(p)
	}
	shardSelector, labelSelector := "", ""
	switch {
	case s.opts.LabelKey != "":
		labelSelector, _ = shard.LabelSelectorIn(s.opts.LabelKey, parts)
	case s.filtered:
		shardSelector, _ = s.opts.Partitioner.Selector(parts)
	}
	selector := shardSelector // the one whose application is checked
	setSelector := func(o *metav1.ListOptions) {
		o.ShardSelector = shardSelector
		o.LabelSelector = andSelectors(o.LabelSelector, labelSelector)
	}
	inner := s.opts.ListWatch
	return segmentListWatch{&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			setSelector(&o)
			var list runtime.Object
			var err error
			if labelSelector != "" {
				// In pages: a segment listing a replica's whole share at
				// its start would otherwise arrive as one response.
				list, err = listInPages(ctx, inner, o, nil)
			} else {
				list, err = inner.ListWithContext(ctx, o)
			}
			if err != nil {
				return nil, err
			}
			if lm, err := meta.ListAccessor(list); err == nil {
				rv, _ := strconv.ParseUint(lm.GetResourceVersion(), 10, 64)
				raise(&seg.listRV, rv)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			listed := len(items)
			s.listed.Add(int64(listed))
			kept := slices.DeleteFunc(items, func(o runtime.Object) bool { return !matcher(o) })
			if selector != "" && (len(kept) < listed || echoesAnother(list, selector)) {
				// Another API server behind the same address may lack the
				// gate: the client-side check keeps the store exact.
				if s.unfiltered.Add(1) == 1 {
					s.log.Info("the API server returned objects outside the shard selector to a LIST; filtering on the client (HA control plane with the ShardedListAndWatch gate on some servers only?)")
				}
			}
			if s.opts.leaving != nil {
				reportVanished(seg.inf.GetStore(), kept, s.opts.leaving)
				for _, o := range kept {
					if s.movesWithin(seg, o) {
						s.opts.leaving(o)
					}
				}
			}
			if len(kept) < listed {
				if err := meta.SetList(list, kept); err != nil {
					return nil, err
				}
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			setSelector(&o)
			w, err := inner.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
				default:
					return ev, true // bookmarks and errors carry no object of a partition
				}
				if !matcher(ev.Object) {
					return ev, false
				}
				if s.opts.leaving != nil && (ev.Type == watch.Deleted || ev.Type == watch.Modified && s.movesWithin(seg, ev.Object)) {
					s.opts.leaving(ev.Object)
				}
				raise(&seg.received, objectRV(ev.Object))
				return ev, true
			}), nil
		},
	}}
}

// movesWithin reports whether obj, a new state of an object that seg
// lists, is stored under a partition no longer held (seg still lists the
// released partitions of its own until it stops, hiding their objects), or
// under another partition than seg's stored copy (a label edited from one
// of seg's partitions to another, which the server sends as MODIFIED, not
// as a DELETED and an ADDED). Either way the object may vanish from reads
// with no deletion, which the Labelled must hear of first. The stored copy
// may lag the event; a later state arriving through the handlers settles
// what a lagging comparison got wrong.
func (s *Segmented) movesWithin(seg *segment, obj runtime.Object) bool {
	p, ok := s.partitionOf(obj)
	if !ok {
		return false
	}
	s.mu.Lock()
	held := s.held.Has(p)
	s.mu.Unlock()
	if !held {
		return true
	}
	stored, exists, err := seg.inf.GetStore().Get(obj)
	if err != nil || !exists {
		return false
	}
	was, ok := s.partitionOf(stored)
	return ok && was != p
}

// reportVanished tells leaving of every object in store that a relist's
// items no longer have: the store is about to drop it.
func reportVanished(store toolscache.Store, items []runtime.Object, leaving func(runtime.Object)) {
	if len(store.ListKeys()) == 0 {
		return
	}
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		if k, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
			listed[k] = true
		}
	}
	for _, obj := range store.List() {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil && !listed[k] {
			if o, ok := obj.(runtime.Object); ok {
				leaving(o)
			}
		}
	}
}

// andSelectors joins two label selectors: objects must match both. The
// ListWatch's own selector (a cache that holds only some labels, say) is
// kept beside the partition label's.
func andSelectors(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// echoesAnother reports whether a LIST response says the server applied
// another selector than the one sent. No echo at all says nothing: the
// server filters custom resources without one (Kubernetes 1.36).
func echoesAnother(list runtime.Object, selector string) bool {
	a, ok := list.(metav1.ListMetaAccessor)
	if !ok {
		return false
	}
	m, ok := a.GetListMeta().(*metav1.ListMeta)
	return ok && m.ShardInfo != nil && m.ShardInfo.Selector != selector
}

// UnfilteredLists counts the LISTs sent with a shard selector whose
// response shows the server did not apply it: it held objects outside the
// selector (the client dropped them), or echoed another selector.
func (s *Segmented) UnfilteredLists() int64 { return s.unfiltered.Load() }

// Filtered reports whether the segments list and watch with a selector the
// API server applies: SegmentedOptions.Filtered (or LabelKey), or Reprobe
// has proved since that the server filters.
func (s *Segmented) Filtered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filtered
}

// signal notes that SyncedPartitions may have changed. Never blocks.
func (s *Segmented) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// SyncedPartitions returns the held partitions whose objects are all
// cached: those of a synced segment (in the fallback, every held one once
// the full informer synced).
func (s *Segmented) SyncedPartitions() shard.PartitionSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := shard.NewPartitionSet(s.held.Size())
	for _, seg := range s.segments {
		if seg.synced.Load() {
			out = out.Union(seg.parts)
		}
	}
	return out.Intersect(s.held)
}

// Changed receives a value whenever SyncedPartitions may have changed.
func (s *Segmented) Changed() <-chan struct{} { return s.changed }

// describe counts the segments and those synced (KindMode.Informers).
func (s *Segmented) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	synced, compacting := 0, 0
	for _, seg := range s.segments {
		if seg.synced.Load() {
			synced++
		} else if seg.compacts {
			compacting++
		}
	}
	return fmt.Sprintf("%d segments, %d synced, %d compactions handing over", len(s.segments), synced, compacting)
}

// ObjectsListed returns how many objects the API server has returned to
// the segments' LISTs so far (in the fallback, the whole resource per
// LIST): the cost of the moves, which stays ∝ the moved partitions.
func (s *Segmented) ObjectsListed() int64 { return s.listed.Load() }

// Segments returns how many informers run now.
func (s *Segmented) Segments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.segments)
}

// owns reports whether seg is the segment that speaks for the partition of
// obj: it is held, in seg's partitions, and no newer synced segment has it
// (during a compaction two segments hold it; events come from one only).
// Call with s.mu held.
func (s *Segmented) owns(seg *segment, obj any) bool {
	p, ok := s.partitionOf(obj)
	return ok && s.held.Has(p) && seg.parts.Has(p) && s.speakerOf(p) == seg
}

// partitionOf returns the partition an object (or the object a
// DeletedFinalStateUnknown carries) is stored under: by the ring's partition
// function of the server's hash, or the partition its label names. ok is
// false for an object without metadata, without UID under the uid scheme, or
// without a valid partition label.
func (s *Segmented) partitionOf(obj any) (p int, ok bool) {
	if d, isDeleted := obj.(toolscache.DeletedFinalStateUnknown); isDeleted {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return -1, false
	}
	if s.opts.LabelKey != "" {
		return shard.ParsePartitionLabel(m.GetLabels()[s.opts.LabelKey], s.opts.Partitions)
	}
	return s.opts.Partitioner.PartitionOfObject(m.GetNamespace(), string(m.GetUID()))
}

// speakerOf returns the segment that speaks for partition p, held or not:
// the newest synced segment with p; before any has synced, the newest one
// (its initial list is the news); nil when no segment has p. Call with s.mu
// held.
func (s *Segmented) speakerOf(p int) *segment {
	var newest *segment
	for i := len(s.segments) - 1; i >= 0; i-- {
		o := s.segments[i]
		if !o.parts.Has(p) {
			continue
		}
		if o.synced.Load() {
			return o
		}
		if newest == nil {
			newest = o
		}
	}
	return newest
}

// countPartitions adds to counts[p] how many objects the segments store in
// partition p, for every partition, held or not: each object once, from the
// segment that speaks for its partition (a compaction and the segments it
// replaces store the same objects until it has synced). A fallback's one
// segment stores the whole resource, so every partition is counted there;
// a filtered segment stores only its own partitions, released ones among
// them until it stops. len(counts) is the ring's partition count.
func (s *Segmented) countPartitions(counts []int) {
	// The speaker of each partition, found once per call rather than once
	// per object, under s.mu; the stores, safe for concurrent reads, are
	// walked outside it, so that events wait for no walk.
	s.mu.Lock()
	speakers := make([]*segment, len(counts))
	for p := range speakers {
		speakers[p] = s.speakerOf(p)
	}
	segments := slices.Clone(s.segments)
	s.mu.Unlock()
	for _, seg := range segments {
		for _, obj := range seg.inf.GetStore().List() {
			if p, ok := s.partitionOf(obj); ok && p < len(counts) && speakers[p] == seg {
				counts[p]++
			}
		}
	}
}

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
func (*segmentedHandler) HasSyncedChecker() toolscache.DoneChecker { return alwaysDone{} }

// alwaysDone is a DoneChecker that is done from the start.
type alwaysDone struct{}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (alwaysDone) Name() string          { return "sharded cache (synced per partition)" }
func (alwaysDone) Done() <-chan struct{} { return closedChan }

// register adds reg to seg behind the ownership check. Call with s.mu held.
func (s *Segmented) register(seg *segment, reg *segmentedHandler) {
	pass := func(obj any, initial bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.passes(seg, obj, initial)
	}
	// Raised after the handler returned: a compaction's handover waits
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
// speak yet (handOver) and the event may be news to the handlers. Its
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
	p, ok := s.partitionOf(obj)
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
func (s *Segmented) GetStore() toolscache.Store { return readOnlyStore{s} }

// storeReader is what a readOnlyStore reads: a sharded informer's merged
// content.
type storeReader interface {
	List() []any
	GetByKey(key string) (any, bool, error)
}

// readOnlyStore is the Store of a sharded informer (Segmented, Labelled):
// reads of the objects it serves; writes fail, its informers own their
// stores.
type readOnlyStore struct{ s storeReader }

var errReadOnlyStore = errors.New("cache: the store of a sharded cache is read-only")

func (v readOnlyStore) Add(any) error               { return errReadOnlyStore }
func (v readOnlyStore) Update(any) error            { return errReadOnlyStore }
func (v readOnlyStore) Delete(any) error            { return errReadOnlyStore }
func (v readOnlyStore) Replace([]any, string) error { return errReadOnlyStore }
func (v readOnlyStore) Resync() error               { return nil }
func (v readOnlyStore) Bookmark(string)             {}
func (v readOnlyStore) LastStoreSyncResourceVersion() string {
	return "" // one per segment; none speaks for the view
}
func (v readOnlyStore) List() []any { return v.s.List() }
func (v readOnlyStore) GetByKey(key string) (any, bool, error) {
	return v.s.GetByKey(key)
}

func (v readOnlyStore) ListKeys() []string {
	items := v.s.List()
	keys := make([]string, 0, len(items))
	for _, obj := range items {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

func (v readOnlyStore) Get(obj any) (any, bool, error) {
	k, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return v.s.GetByKey(k)
}

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
