package segmented

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/cache/shardprobe"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
)

// DefaultMaxSegments bounds how many informers a Segmented keeps before it
// compacts them into one.
const DefaultMaxSegments = 4

// Options configure a Segmented.
type Options struct {
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
	// (shardprobe.Filtering said so). Otherwise the Segmented falls back to
	// one informer of the whole resource, filtered on the client only.
	Filtered bool
	// Reprobe, for a Segmented that starts unfiltered because the probe
	// had no object to test with (shardprobe.Result.Retry), asks again whether
	// the server filters the resource. Run calls it on a goroutine it
	// owns once the informer of the whole resource caches an object.
	// Filtered: the Segmented moves to the server's filter (one segment
	// lists the held partitions with the selector and replaces the whole
	// informer once synced, so no partition stops being synced). Retry:
	// asked again once an object is cached, no sooner than after a delay
	// that doubles from 1 s to 5 minutes. Anything else is final.
	// Default nil: the mode never changes.
	Reprobe func(ctx context.Context) shardprobe.Result
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
	// Clock times the reprobe's backoff and a compaction's takeover.
	// Defaults to the real clock; tests pass a fake one.
	Clock clock.WithTicker

	// Leaving, when set, is told of every object that leaves a segment (a
	// DELETED event, or a relist without it) before the segment's store
	// drops it, and of every object whose label moves it, within one
	// segment, to another partition or to one no longer held (a MODIFIED
	// event, or a relist), before the store changes: the labelled cache keeps
	// serving an object that left a label selector, or that its segment
	// now hides, until it knows where it went.
	Leaving func(obj runtime.Object)
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
// once synced and caught up with them (takeOver). Every listed item and watch event is checked against the
// segment's partitions on the client before the store (a server that
// ignored the selector cannot put foreign objects in it). It implements
// ring.PartitionCache.
type Segmented struct {
	opts Options
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

	takeoverChecks atomic.Int64 // caughtUp evaluations, for tests to know a takeover waits
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
	// of the watch events it kept: how far a compaction's takeover checks
	// it has come (caughtUp).
	listRV, received atomic.Uint64
}

// New validates opts and returns a Segmented holding nothing; call
// Run, then Hold.
func New(opts Options) (*Segmented, error) {
	switch {
	case opts.LabelKey != "" && opts.Partitions < 1:
		return nil, fmt.Errorf("cache: Options.Partitions=%d with LabelKey %q; pass the ring's partition count", opts.Partitions, opts.LabelKey)
	case opts.LabelKey == "" && opts.Partitioner.Count() == 0:
		return nil, errors.New("cache: Options.Partitioner is nil; use the ring's shard.Config.RangePartitioner (scheme namespace or uid)")
	case opts.ListWatch == nil:
		return nil, errors.New("cache: Options.ListWatch is nil")
	case opts.Example == nil:
		return nil, errors.New("cache: Options.Example is nil; pass an object of the resource's type")
	case opts.MaxSegments < 0:
		return nil, fmt.Errorf("cache: Options.MaxSegments=%d is negative", opts.MaxSegments)
	}
	if opts.MaxSegments == 0 {
		opts.MaxSegments = DefaultMaxSegments
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
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
	cachekit.MustBeSized("Segmented.Hold", set, s.opts.Partitions)
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
			s.takeOver(ctx, seg)
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

// UnfilteredLists counts the LISTs sent with a shard selector whose
// response shows the server did not apply it: it held objects outside the
// selector (the client dropped them), or echoed another selector.
func (s *Segmented) UnfilteredLists() int64 { return s.unfiltered.Load() }

// Filtered reports whether the segments list and watch with a selector the
// API server applies: Options.Filtered (or LabelKey), or Reprobe
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
func (s *Segmented) Describe() string {
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
	p, ok := s.PartitionOf(obj)
	return ok && s.held.Has(p) && seg.parts.Has(p) && s.speakerOf(p) == seg
}

// PartitionOf returns the partition an object (or the object a
// DeletedFinalStateUnknown carries) is stored under: by the ring's partition
// function of the server's hash, or the partition its label names. ok is
// false for an object without metadata, without UID under the uid scheme, or
// without a valid partition label.
func (s *Segmented) PartitionOf(obj any) (p int, ok bool) {
	if d, isDeleted := obj.(toolscache.DeletedFinalStateUnknown); isDeleted {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return -1, false
	}
	if s.opts.LabelKey != "" {
		return partitionlabel.Parse(m.GetLabels()[s.opts.LabelKey], s.opts.Partitions)
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

// CountPartitions adds to counts[p] how many objects the segments store in
// partition p, for every partition, held or not: each object once, from the
// segment that speaks for its partition (a compaction and the segments it
// replaces store the same objects until it has synced). A fallback's one
// segment stores the whole resource, so every partition is counted there;
// a filtered segment stores only its own partitions, released ones among
// them until it stops. len(counts) is the ring's partition count.
func (s *Segmented) CountPartitions(counts []int) {
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
			if p, ok := s.PartitionOf(obj); ok && p < len(counts) && speakers[p] == seg {
				counts[p]++
			}
		}
	}
}
