package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

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
	// (shard.Config.Scheme namespace or uid). Required.
	Partitioner shard.RangePartitioner
	// ListWatch lists and watches the resource; the Segmented sets
	// ListOptions.ShardSelector on every call when Filtered. Required.
	ListWatch toolscache.ListerWatcherWithContext
	// Example is an object of the resource's type (for the informers).
	// Required.
	Example runtime.Object
	// Filtered: the API server applies shard selectors to this resource
	// (ProbeShardSelector said so). Otherwise the Segmented falls back to
	// one informer of the whole resource, filtered on the client only.
	Filtered bool
	// MaxSegments: more informers than this are compacted into one, off
	// the handoff path. Default DefaultMaxSegments.
	MaxSegments int
	// Logger defaults to logr.Discard().
	Logger logr.Logger
}

// Segmented is an informer of one resource that holds only the objects of
// the partitions it is asked to hold (Hold), on Kubernetes' sharded list and
// watch: every gain of partitions starts a segment, an informer whose shard
// selector is only the gained ranges, so nothing cached is listed again; a
// segment stops once all its partitions are released; more than MaxSegments
// are compacted into one informer of everything held, which replaces them
// once synced. Every listed item and watch event is checked against the
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

	listed     atomic.Int64 // objects the server returned to LISTs
	unfiltered atomic.Int64 // LISTs with a selector that came back without its echo
}

// segment is one informer and the partitions it was started for.
type segment struct {
	parts    shard.PartitionSet
	inf      toolscache.SharedIndexInformer
	cancel   context.CancelFunc
	synced   atomic.Bool
	compacts bool // started to replace every older segment
}

// NewSegmented validates opts and returns a Segmented holding nothing; call
// Run, then Hold.
func NewSegmented(opts SegmentedOptions) (*Segmented, error) {
	switch {
	case opts.Partitioner.Count() == 0:
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
	return &Segmented{opts: opts, log: opts.Logger, held: shard.NewPartitionSet(opts.Partitioner.Count()), changed: make(chan struct{}, 1)}, nil
}

// Run owns the segments' informers until ctx ends, then stops them and
// waits for them.
func (s *Segmented) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	held := s.held.Clone()
	s.held = shard.NewPartitionSet(held.Size())
	s.mu.Unlock()
	if !held.IsEmpty() {
		s.Hold(held) // what was asked before Run
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
// are listed by a new segment (synced once it is), released ones are hidden
// at once and their segment stopped when nothing of it is held any more,
// or restarted for the rest when it has not synced yet.
func (s *Segmented) Hold(set shard.PartitionSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
			case s.opts.Filtered && !seg.compacts && !seg.synced.Load() && !kept.Equal(seg.parts):
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
	switch {
	case gained.IsEmpty():
	case !s.opts.Filtered:
		// Fallback: one informer of everything, started once.
		if len(s.segments) == 0 {
			s.start(shard.FullPartitionSet(set.Size()), false)
		} else {
			s.signal()
		}
	case len(s.segments)+1 > s.opts.MaxSegments:
		s.start(s.held.Clone(), true)
	default:
		s.start(gained, false)
	}
}

// start runs a segment for parts. Call with s.mu held.
func (s *Segmented) start(parts shard.PartitionSet, compacts bool) {
	ctx, cancel := context.WithCancel(s.ctx)
	seg := &segment{parts: parts, cancel: cancel, compacts: compacts}
	seg.inf = toolscache.NewSharedIndexInformerWithOptions(s.listWatchFor(parts), s.opts.Example, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
	})
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
		seg.synced.Store(true)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !slices.Contains(s.segments, seg) {
			return // stopped by Hold as it synced
		}
		if seg.compacts {
			// The union is cached: the segments it replaces go.
			s.segments = slices.DeleteFunc(s.segments, func(o *segment) bool {
				if o != seg && o.parts.Difference(seg.parts).Intersect(s.held).IsEmpty() {
					o.cancel()
					s.forget(o)
					return true
				}
				return false
			})
		}
		s.signal()
	}()
}

// segmentListWatch turns client-go's watch-list off for a segment: its
// initial state comes from a LIST, whose response echoes the shard selector
// the server applied (ListMeta.ShardInfo), which a streamed watch does not.
// The server filters a watch-list by the selector too, but streaming is
// slower where it matters: measured at 100,000 objects (bench phase 9,
// 2026-11-26), streamed segments formed 3 replicas in 6.3 s against 4.3 s,
// rolled them in 18 s against 11 s with a handoff p99 of 1.52 s against
// 0.89 s (each move waits for its new owner's segment), and peaked higher
// (247 MiB against 235).
type segmentListWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to LIST.
func (segmentListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// listWatchFor is the resource's list and watch restricted to parts: the
// selector sent to the server when it filters, and a client-side check of
// every item and event in any case.
func (s *Segmented) listWatchFor(parts shard.PartitionSet) toolscache.ListerWatcher {
	matcher := func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		p, ok := s.opts.Partitioner.PartitionOfObject(m.GetNamespace(), string(m.GetUID()))
		return ok && parts.Has(p)
	}
	selector := ""
	if s.opts.Filtered {
		selector, _ = s.opts.Partitioner.Selector(parts)
	}
	inner := s.opts.ListWatch
	return segmentListWatch{&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.ShardSelector = selector
			list, err := inner.ListWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			s.listed.Add(int64(len(items)))
			if selector != "" && !echoes(list, selector) {
				// Another API server behind the same address may lack the
				// gate: the client-side check below keeps the store exact.
				if s.unfiltered.Add(1) == 1 {
					s.log.Info("the API server did not echo the shard selector on a LIST; filtering on the client (HA control plane with the ShardedListAndWatch gate on some servers only?)")
				}
			}
			kept := slices.DeleteFunc(items, func(o runtime.Object) bool { return !matcher(o) })
			if err := meta.SetList(list, kept); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.ShardSelector = selector
			w, err := inner.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					return ev, matcher(ev.Object)
				}
				return ev, true // bookmarks and errors carry no object of a partition
			}), nil
		},
	}}
}

// echoes reports whether a LIST response says the server applied selector.
func echoes(list runtime.Object, selector string) bool {
	a, ok := list.(metav1.ListMetaAccessor)
	if !ok {
		return false
	}
	m, ok := a.GetListMeta().(*metav1.ListMeta)
	return ok && m.ShardInfo != nil && m.ShardInfo.Selector == selector
}

// UnfilteredLists counts the LISTs sent with a shard selector whose
// response did not echo it (the server ignored it; the client filtered).
func (s *Segmented) UnfilteredLists() int64 { return s.unfiltered.Load() }

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

// partitionOf returns the partition of a stored object (or of the object a
// DeletedFinalStateUnknown carries) by the ring's partition function; ok is
// false for an object without metadata, or without UID under the uid scheme.
func (s *Segmented) partitionOf(obj any) (p int, ok bool) {
	if d, isDeleted := obj.(toolscache.DeletedFinalStateUnknown); isDeleted {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return -1, false
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
	reg := &segmentedHandler{h: h, regs: map[*segment]toolscache.ResourceEventHandlerRegistration{}}
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
	pass := func(obj any) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.owns(seg, obj)
	}
	h := reg.h
	sr, err := seg.inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if pass(obj) {
				h.OnAdd(obj, initial)
			}
		},
		UpdateFunc: func(old, obj any) {
			if pass(obj) {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			if pass(obj) {
				h.OnDelete(obj)
			}
		},
	})
	if err == nil {
		reg.regs[seg] = sr
	}
}

// forget drops seg from every handler's registrations (it stopped).
// Call with s.mu held.
func (s *Segmented) forget(seg *segment) {
	for _, reg := range s.handlers {
		delete(reg.regs, seg)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []any
	for _, seg := range s.segments {
		items, err := seg.inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
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
func (s *Segmented) GetStore() toolscache.Store { return segmentedStore{s} }

// segmentedStore is the read-only Store of a Segmented.
type segmentedStore struct{ s *Segmented }

var errReadOnlyStore = errors.New("cache: the store of a sharded cache is read-only")

func (v segmentedStore) Add(any) error               { return errReadOnlyStore }
func (v segmentedStore) Update(any) error            { return errReadOnlyStore }
func (v segmentedStore) Delete(any) error            { return errReadOnlyStore }
func (v segmentedStore) Replace([]any, string) error { return errReadOnlyStore }
func (v segmentedStore) Resync() error               { return nil }
func (v segmentedStore) Bookmark(string)             {}
func (v segmentedStore) LastStoreSyncResourceVersion() string {
	return "" // one per segment; none speaks for the view
}
func (v segmentedStore) List() []any { return v.s.List() }
func (v segmentedStore) GetByKey(key string) (any, bool, error) {
	return v.s.GetByKey(key)
}

func (v segmentedStore) ListKeys() []string {
	items := v.s.List()
	keys := make([]string, 0, len(items))
	for _, obj := range items {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

func (v segmentedStore) Get(obj any) (any, bool, error) {
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
