package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// Defaults of LabelledOptions.
const (
	// DefaultConfirmAfter is how long an object that left one view may stay
	// out of every other before a live GET decides whether it still
	// exists. Moving between views (the labeller's own patch, say) shows up
	// in the other view within a watch round trip, well below it.
	DefaultConfirmAfter = 2 * time.Second
	// DefaultLabelQPS is how many label patches a replica sends per second
	// at most: a first start over 100,000 unlabelled objects on 3 replicas
	// labels them in under 3 minutes without crowding the API server.
	DefaultLabelQPS = 200
)

// LabelledOptions configure a Labelled.
type LabelledOptions struct {
	// LabelKey is the ring's partition label (shard.PartitionLabelKey).
	// Required.
	LabelKey string
	// Partitioner is the ring's partition function of request keys.
	// Required.
	Partitioner shard.Partitioner
	// Route says which request an object maps to (shard.RouteSelf or
	// shard.RouteOwner), and so the partition its label must name.
	// Defaults to shard.RouteSelf.
	Route shard.Route
	// ListWatch lists and watches the resource without a selector; the
	// Labelled adds its label selectors. Required.
	ListWatch toolscache.ListerWatcherWithContext
	// Example is an object of the resource's type. Required.
	Example runtime.Object
	// Client reads single objects and patches labels. Its writes should
	// not go through the fencing transport: a label is a pure function
	// of the object's key, so a late write is harmless. Required.
	Client ObjectClient
	// Transform is applied to every object before it is stored (an
	// informer transform). Default: none.
	Transform toolscache.TransformFunc
	// Indexers are added to every view's informer besides the namespace
	// index.
	Indexers toolscache.Indexers
	// LabelQPS bounds label patches per second. Default DefaultLabelQPS;
	// negative: no bound.
	LabelQPS float64
	// ConfirmAfter: see DefaultConfirmAfter.
	ConfirmAfter time.Duration
	// MaxSegments bounds the label segments before they are compacted
	// (SegmentedOptions.MaxSegments).
	MaxSegments int
	// Logger defaults to logr.Discard().
	Logger logr.Logger
}

// Labelled is the gate-free sharded informer of one resource: it holds the
// objects of the partitions it is asked to hold (Hold) by their partition
// label, on any Kubernetes version. It is made of views:
//
//   - label segments (a Segmented with LabelKey): "key in (partitions)";
//   - the unlabelled view: "key notin (every partition)", the objects that
//     carry no valid label yet (new, stripped, or written by hand); empty
//     in steady state. Its pages and events are filtered on the client to
//     the held partitions, so a first start over many unlabelled objects
//     stores only this replica's share.
//
// The owner of a partition (SetActive) labels its unlabelled objects with
// the partition of the request each maps to; an object whose label names
// another partition than its request's is relabelled by any replica that
// sees it. Objects are read and served by the partition of their request.
//
// An object that leaves a label selector reaches a watch as DELETED, like a
// deletion. A Labelled never reports such an object gone: a DELETED from one
// view is passed on only when no other view holds the object, and then only
// after a live GET has confirmed it gone; until then reads still return its
// last state. It implements ring.PartitionCache (manager/ring) and the
// Informer sources use.
type Labelled struct {
	opts LabelledOptions
	log  logr.Logger
	segs *Segmented

	mu         sync.Mutex
	ctx        context.Context // Run's; nil before Run
	stopped    bool
	wg         sync.WaitGroup
	held       shard.PartitionSet
	active     shard.PartitionSet
	unlabelled []*unlabelledView // oldest first; the newest synced one speaks
	pending    map[string]*pendingObject
	moved      map[string]movedObject
	changed    chan struct{}
	forbidden  string // why labels cannot be written ("" while they can)

	// dispatchMu orders deliveries (read side) against handler
	// registration (write side), so a handler added late gets every
	// object once, as an initial add, and every event after it.
	dispatchMu sync.RWMutex
	handlers   []*labelledHandler

	labeller *labeller
	confirm  chan struct{}
	stats    LabelStats
}

// unlabelledView is one informer of the unlabelled objects. Its keeps and
// dirty sets are guarded by Labelled.mu.
type unlabelledView struct {
	inf    toolscache.SharedIndexInformer
	cancel context.CancelFunc
	synced atomic.Bool
	// keeps: the partitions whose unlabelled objects it stores; it drops
	// the others. dirty: partitions of which it has dropped an object, so
	// its store is not complete for them: gaining one needs a new view.
	keeps, dirty shard.PartitionSet
}

// pendingObject is an object that left a view and is in no other: still
// served, until the API server confirms it gone or it shows up in a view.
type pendingObject struct {
	obj       any
	uid       types.UID
	since     time.Time
	nextCheck time.Time
}

// movedObject is an object whose DELETED from one view was passed over
// because another view held it: the other view's add is passed on as an
// update from this state. Entries are dropped after a minute.
type movedObject struct {
	obj any
	uid types.UID
	at  time.Time
}

// LabelStats counts what labelling costs.
type LabelStats struct {
	// Patches counts label patches sent; PatchErrors those that failed.
	Patches, PatchErrors atomic.Int64
	// ConfirmReads counts the live GETs of objects that left a view;
	// ConfirmedGone those that found the object deleted.
	ConfirmReads, ConfirmedGone atomic.Int64
	// UnlabelledLists counts the LISTs of the unlabelled view (a gain of a
	// partition it had dropped objects of starts a new one).
	UnlabelledLists atomic.Int64
	// ForeignValues counts the objects relabelled whose label key carried a
	// value that names no partition: written by hand or by another tool
	// (the first is logged, once per kind).
	ForeignValues atomic.Int64
}

// NewLabelled validates opts and returns a Labelled holding nothing; call
// Run, then Hold.
func NewLabelled(opts LabelledOptions) (*Labelled, error) {
	switch {
	case opts.LabelKey == "":
		return nil, errors.New("cache: LabelledOptions.LabelKey is empty; use shard.PartitionLabelKey")
	case opts.Partitioner == nil || opts.Partitioner.Count() < 1:
		return nil, errors.New("cache: LabelledOptions.Partitioner is nil; pass the ring's partition function")
	case opts.Partitioner.Count() > shard.MaxLabelPartitions:
		return nil, fmt.Errorf("cache: a ring of %d partitions is too large for a cache sharded by labels (at most %d): its unlabelled selector names every partition", opts.Partitioner.Count(), shard.MaxLabelPartitions)
	case opts.ListWatch == nil:
		return nil, errors.New("cache: LabelledOptions.ListWatch is nil")
	case opts.Example == nil:
		return nil, errors.New("cache: LabelledOptions.Example is nil; pass an object of the resource's type")
	case opts.Client == nil:
		return nil, errors.New("cache: LabelledOptions.Client is nil; it reads and labels single objects")
	case opts.Route != 0 && opts.Route != shard.RouteSelf && opts.Route != shard.RouteOwner:
		return nil, fmt.Errorf("cache: LabelledOptions.Route %s cannot be labelled: only objects mapped to their own or their controller owner's key have a partition of their own", opts.Route)
	}
	if opts.Route == 0 {
		opts.Route = shard.RouteSelf
	}
	if opts.LabelQPS == 0 {
		opts.LabelQPS = DefaultLabelQPS
	}
	if opts.ConfirmAfter <= 0 {
		opts.ConfirmAfter = DefaultConfirmAfter
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	n := opts.Partitioner.Count()
	segs, err := NewSegmented(SegmentedOptions{
		LabelKey: opts.LabelKey, Partitions: n, ListWatch: opts.ListWatch, Example: opts.Example,
		MaxSegments: opts.MaxSegments, Transform: opts.Transform, Indexers: opts.Indexers, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	l := &Labelled{
		opts: opts, log: opts.Logger, segs: segs,
		held: shard.NewPartitionSet(n), active: shard.NewPartitionSet(n),
		pending: map[string]*pendingObject{}, moved: map[string]movedObject{},
		changed: make(chan struct{}, 1), confirm: make(chan struct{}, 1),
	}
	segs.opts.leaving = func(obj runtime.Object) { l.leaving(nil, obj) }
	l.labeller = newLabeller(l, opts.LabelQPS)
	if _, err := segs.AddEventHandler(l.viewHandler(nil)); err != nil {
		return nil, err
	}
	return l, nil
}

// Run owns the views, the labeller and the confirmations until ctx ends,
// then stops them and waits for them.
func (l *Labelled) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.segs.Run(ctx) })
	wg.Go(func() { l.forward(ctx) })
	wg.Go(func() { l.labeller.run(ctx) })
	wg.Go(func() { l.confirmLoop(ctx) })
	l.mu.Lock()
	l.ctx = ctx
	l.startUnlabelled(l.held.Clone())
	l.mu.Unlock()
	<-ctx.Done()
	l.mu.Lock()
	l.stopped = true
	for _, v := range l.unlabelled {
		v.cancel()
	}
	l.unlabelled = nil
	l.mu.Unlock()
	l.wg.Wait()
	wg.Wait()
}

// forward passes the label segments' changes on.
func (l *Labelled) forward(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.segs.Changed():
			l.signal()
		}
	}
}

func (l *Labelled) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Hold sets the partitions whose objects the cache holds: the label
// segments follow set; the unlabelled view keeps the gained partitions it
// has dropped nothing of, and a new one is listed when it has.
func (l *Labelled) Hold(set shard.PartitionSet) {
	// One critical section from strand to the segments' release: an
	// arrival into a released segment handled in between (arrived) would
	// otherwise end a pending state strand just made, and the release then
	// hide the object with no view or pending state left to serve it.
	// Segmented.Hold calls nothing of l, so holding l.mu over it is safe.
	mustBeSized("Labelled.Hold", set, l.held.Size())
	l.mu.Lock()
	defer l.mu.Unlock()
	l.strand(l.held.Difference(set), set)
	l.segs.Hold(set)
	gained, released := set.Difference(l.held), l.held.Difference(set)
	l.held = set.Clone()
	for key, p := range l.pending {
		if part, ok := requestPartition(l.opts.Partitioner, l.opts.Route, p.obj); !ok || !l.held.Has(part) {
			delete(l.pending, key) // no longer served here
		}
	}
	if l.ctx == nil || l.stopped {
		return
	}
	if !released.IsEmpty() {
		l.signal()
	}
	if gained.IsEmpty() {
		return
	}
	newest := l.unlabelled[len(l.unlabelled)-1]
	for _, v := range l.unlabelled {
		v.keeps = v.keeps.Union(gained.Difference(v.dirty))
	}
	if !gained.Intersect(newest.dirty).IsEmpty() {
		l.startUnlabelled(set.Clone())
	}
	l.signal()
}

// strand makes pending the objects that the label segments store under a
// partition of released but that map to a partition of kept: labelled with
// another partition than their own (a third party's edit), they were
// served through their label's segment, which the release hides without a
// deletion. Pending, they stay served until they are relabelled into a
// view or a live read finds them gone. Call with l.mu held, before the
// segments are told.
func (l *Labelled) strand(released, kept shard.PartitionSet) {
	if released.IsEmpty() {
		return
	}
	now := time.Now()
	for _, obj := range l.segs.List() {
		labelled, ok := l.segs.partitionOf(obj)
		if !ok || !released.Has(labelled) {
			continue
		}
		if p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj); ok && kept.Has(p) {
			key, uid := keyAndUID(obj)
			l.markPending(key, uid, obj, now)
		}
	}
}

// SetActive tells the cache which partitions are active on this replica:
// their unlabelled objects, and the objects labelled with them that map to
// another partition, are labelled from now on. The coordinator calls it as
// it activates and revokes.
func (l *Labelled) SetActive(set shard.PartitionSet) {
	mustBeSized("Labelled.SetActive", set, l.held.Size())
	l.mu.Lock()
	gained := set.Difference(l.active)
	l.active = set.Clone()
	l.mu.Unlock()
	if gained.IsEmpty() {
		return
	}
	l.rescan()
}

// rescan offers every object the views and the pending set hold to the
// labeller, which takes those that need a label here now: after the
// active partitions grew, or a new unlabelled view synced. Strays count:
// an object whose label names a partition now active here but whose
// request maps to another (a third party's edit) is stored by its label
// and left out of views; listed before the partition activated, it was
// not labelled then, and only this replica can put it back.
func (l *Labelled) rescan() {
	for _, obj := range l.segs.List() {
		l.labeller.consider(obj)
	}
	l.mu.Lock()
	var objs []any
	if v := l.speaker(); v != nil {
		objs = v.inf.GetStore().List()
	}
	for _, p := range l.pending {
		objs = append(objs, p.obj)
	}
	l.mu.Unlock()
	for _, obj := range objs {
		l.labeller.consider(obj)
	}
}

// SyncedPartitions returns the held partitions whose objects are all in
// the cache: listed by a synced label segment and by a synced unlabelled
// view that keeps them.
func (l *Labelled) SyncedPartitions() shard.PartitionSet {
	out := l.segs.SyncedPartitions()
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.speaker()
	if v == nil || !v.synced.Load() {
		return shard.NewPartitionSet(l.held.Size())
	}
	return out.Intersect(v.keeps).Intersect(l.held)
}

// Changed receives a value whenever SyncedPartitions may have changed.
func (l *Labelled) Changed() <-chan struct{} { return l.changed }

// Held returns the partitions the cache was last asked to hold.
func (l *Labelled) Held() shard.PartitionSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held.Clone()
}

// Stats returns the cache's labelling counters.
func (l *Labelled) Stats() *LabelStats { return &l.stats }

// ObjectsListed returns how many objects the label segments' LISTs have
// returned (the unlabelled view's are counted in Stats).
func (l *Labelled) ObjectsListed() int64 { return l.segs.ObjectsListed() }

// Forbidden returns why labels cannot be written ("" while they can).
func (l *Labelled) Forbidden() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forbidden
}

// ---- the unlabelled view ----

// speaker returns the unlabelled view that is read and whose events pass:
// the newest synced one, or the newest. Call with l.mu held.
func (l *Labelled) speaker() *unlabelledView {
	for i := len(l.unlabelled) - 1; i >= 0; i-- {
		if l.unlabelled[i].synced.Load() {
			return l.unlabelled[i]
		}
	}
	if len(l.unlabelled) == 0 {
		return nil
	}
	return l.unlabelled[len(l.unlabelled)-1]
}

// startUnlabelled lists and watches the unlabelled objects, keeping those
// of keeps; views it replaces stop once it has synced, as does an older
// replacement still listing. Call with l.mu held.
func (l *Labelled) startUnlabelled(keeps shard.PartitionSet) {
	l.stats.UnlabelledLists.Add(1)
	ctx, cancel := context.WithCancel(l.ctx)
	v := &unlabelledView{cancel: cancel, keeps: keeps, dirty: shard.NewPartitionSet(keeps.Size())}
	// A replacement that has not synced yet is superseded at once.
	l.unlabelled = slices.DeleteFunc(l.unlabelled, func(o *unlabelledView) bool {
		if !o.synced.Load() {
			o.cancel()
			return true
		}
		return false
	})
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for name, f := range l.opts.Indexers {
		indexers[name] = f
	}
	v.inf = toolscache.NewSharedIndexInformerWithOptions(l.unlabelledListWatch(v), l.opts.Example, toolscache.SharedIndexInformerOptions{Indexers: indexers})
	if l.opts.Transform != nil {
		_ = v.inf.SetTransform(l.opts.Transform)
	}
	_, _ = v.inf.AddEventHandler(l.viewHandler(v))
	l.unlabelled = append(l.unlabelled, v)
	l.wg.Go(func() { v.inf.RunWithContext(ctx) })
	l.wg.Go(func() {
		if !toolscache.WaitForCacheSync(ctx.Done(), v.inf.HasSynced) {
			return
		}
		l.mu.Lock()
		if !slices.Contains(l.unlabelled, v) {
			l.mu.Unlock()
			return
		}
		l.handOver(l.speaker(), v)
		v.synced.Store(true)
		l.unlabelled = slices.DeleteFunc(l.unlabelled, func(o *unlabelledView) bool {
			if o != v {
				o.cancel()
				return true
			}
			return false
		})
		l.signal()
		rescan := !l.active.Intersect(v.keeps).IsEmpty()
		l.mu.Unlock()
		if rescan {
			l.rescan() // label what it listed of the active partitions
		}
	})
}

// handOver makes pending what the unlabelled view old serves and nothing
// else does once next replaces it: an object stripped of its label after
// next listed, whose ADDED has not reached next yet, and whose label
// segment dropped it while old still served it (so leaving found it held
// and made nothing pending). Without this, reads would miss it until
// next's watch catches up. Pending, it stays served until it arrives in
// a view or a live read finds it gone. Call with l.mu held, before next
// becomes the speaker.
func (l *Labelled) handOver(old, next *unlabelledView) {
	if old == nil || old == next {
		return
	}
	now := time.Now()
	for _, obj := range old.inf.GetStore().List() {
		ro, ok := obj.(runtime.Object)
		if !ok {
			continue
		}
		p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, ro)
		if !ok || !l.held.Has(p) {
			continue
		}
		key, uid := keyAndUID(obj)
		if held, ok, _ := next.inf.GetStore().GetByKey(key); ok && uidOf(held) == uid && !newer(obj, held) {
			continue
		}
		if held, ok, _ := l.segs.GetByKey(key); ok && uidOf(held) == uid && !newer(obj, held) {
			continue
		}
		l.markPending(key, uid, obj, now)
	}
}

// keep decides whether view v stores obj, and marks the partition dirty
// when it does not (the view's store is then incomplete for it).
func (l *Labelled) keep(v *unlabelledView, obj runtime.Object, deleted bool) bool {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.keeps.Has(p) {
		return true
	}
	if !deleted {
		v.dirty.Add(p)
	}
	return false
}

// unlabelledListWatch lists page by page (listInPages), each page filtered
// to the view's partitions before the next is read, and watches with the
// same filter.
func (l *Labelled) unlabelledListWatch(v *unlabelledView) toolscache.ListerWatcher {
	selector := shard.LabelSelectorUnlabelled(l.opts.LabelKey, l.opts.Partitioner.Count())
	inner := l.opts.ListWatch
	return segmentListWatch{&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = andSelectors(o.LabelSelector, selector)
			list, err := listInPages(ctx, inner, o, func(it runtime.Object) bool { return l.keep(v, it, false) })
			if err != nil {
				return nil, err
			}
			kept, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			reportVanished(v.inf.GetStore(), kept, func(obj runtime.Object) { l.leaving(v, obj) })
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = andSelectors(o.LabelSelector, selector)
			w, err := inner.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				switch ev.Type {
				case watch.Added, watch.Modified:
					return ev, l.keep(v, ev.Object, false)
				case watch.Deleted:
					keep := l.keep(v, ev.Object, true)
					if keep {
						l.leaving(v, ev.Object)
					}
					return ev, keep
				}
				return ev, true
			}), nil
		},
	}}
}

// ---- merging the views ----

// viewHandler is the handler of one view: the label segments (v nil) or an
// unlabelled view. It passes events of held partitions on to the users'
// handlers, merged: an object that moves between views is updated, never
// deleted and added again.
func (l *Labelled) viewHandler(v *unlabelledView) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, _ bool) {
			l.labeller.consider(obj)
			if l.serves(v, obj) {
				l.arrived(v, obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			l.labeller.consider(obj)
			if l.serves(v, obj) {
				l.updated(v, obj)
				l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnUpdate(old, obj) })
			}
		},
		DeleteFunc: func(obj any) {
			if l.serves(v, obj) {
				l.left(v, obj)
			}
		},
	}
}

// serves reports whether an event of view v about obj is passed on: obj's
// request partition is held, and v is the speaking unlabelled view (the
// label segments pick their speaker themselves).
func (l *Labelled) serves(v *unlabelledView, obj any) bool {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Has(p) {
		return false
	}
	return v == nil || (l.speaker() == v && v.keeps.Has(p))
}

// arrived passes on an object that a view now holds: an update if the
// users' handlers knew it from another view (or as pending), else an add.
func (l *Labelled) arrived(v *unlabelledView, obj any) {
	key, uid := keyAndUID(obj)
	var before any
	l.mu.Lock()
	if p, ok := l.pending[key]; ok {
		// A pending state newer than the one arriving stays pending: it
		// came from a later change that takes the object out of this view
		// too (its DELETED is already behind this ADDED in the view's
		// queue), and the view is about to drop it again.
		if p.uid != uid || !newer(p.obj, obj) {
			delete(l.pending, key)
		}
		before = p.obj
	} else if m, ok := l.moved[key]; ok {
		delete(l.moved, key)
		before = m.obj
	} else {
		before = l.otherView(key, v)
	}
	if !l.viewHolds(v, key, uid) {
		// Handlers run after the store changed, and the view no longer
		// serves the object: its segment was released since (Hold hides a
		// released segment without a deletion), or a later change took
		// it out again. The arrival proves it exists but no view keeps
		// it: pending, it stays served until a view shows it or a live
		// read finds it gone.
		l.markPending(key, uid, obj, time.Now())
	}
	l.mu.Unlock()
	switch {
	case before == nil:
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnAdd(obj, false) })
	case uidOf(before) != uid:
		// The name was deleted and created again meanwhile.
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnDelete(before) })
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnAdd(obj, false) })
	default:
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnUpdate(before, obj) })
	}
}

// viewHolds reports whether view v (nil: the label segments) serves the
// object of key and uid now. Call with l.mu held.
func (l *Labelled) viewHolds(v *unlabelledView, key string, uid types.UID) bool {
	var obj any
	var ok bool
	if v == nil {
		obj, ok, _ = l.segs.GetByKey(key)
	} else {
		obj, ok, _ = v.inf.GetStore().GetByKey(key)
	}
	return ok && uidOf(obj) == uid
}

// updated ends the pending state of an object that view v still serves at
// a state at least as new: its label moved it within one label segment
// (leaving made it pending, in case the move hid it), and the segment
// shows it still.
func (l *Labelled) updated(v *unlabelledView, obj any) {
	key, uid := keyAndUID(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.pending[key]; ok && p.uid == uid && !newer(p.obj, obj) && l.viewHolds(v, key, uid) {
		delete(l.pending, key)
	}
}

// leaving is told, before view v's store drops it, of an object that left
// v. If another view holds it, it moved there: nothing is lost. Otherwise
// it becomes pending: still served, until it shows up in a view or a live
// read finds it gone. It runs in v's watch (or list) goroutine, before the
// store changes, so no read in between misses an object that exists.
func (l *Labelled) leaving(v *unlabelledView, obj runtime.Object) {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return
	}
	key, uid := keyAndUID(obj)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Has(p) || (v != nil && l.speaker() != v) {
		return
	}
	// The other view must hold it at this state or a later one: a copy
	// older than the one leaving is a state the object has left too, and
	// the other view is about to drop it (its own leaving may already
	// have looked here, seen this view still holding the object, and
	// passed over it).
	if other := l.otherView(key, v); other != nil && uidOf(other) == uid && !newer(obj, other) {
		return
	}
	l.markPending(key, uid, l.asStored(obj), now)
}

// asStored is a copy of obj as the views store it (transformed): obj is
// the watch event's, which the view's transform changes in place on its
// way to the store while readers may already read the pending copy.
func (l *Labelled) asStored(obj runtime.Object) any {
	cp := obj.DeepCopyObject()
	if l.opts.Transform == nil {
		return cp
	}
	if out, err := l.opts.Transform(cp); err == nil {
		return out
	}
	return cp
}

// markPending makes obj pending, or updates its pending state. Call with
// l.mu held.
func (l *Labelled) markPending(key string, uid types.UID, obj any, now time.Time) {
	if old, ok := l.pending[key]; ok && old.uid == uid {
		if !newer(old.obj, obj) {
			old.obj = obj
		}
		return
	}
	l.pending[key] = &pendingObject{obj: obj, uid: uid, since: now, nextCheck: now.Add(l.opts.ConfirmAfter)}
	select {
	case l.confirm <- struct{}{}:
	default:
	}
}

// left handles the users' side of an object that left view v: when another
// view holds it, its arrival there is passed on as an update from this
// state (leaving has kept it served meanwhile, and a pending object's
// deletion is passed on by the confirmation).
func (l *Labelled) left(v *unlabelledView, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key, uid := keyAndUID(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, pending := l.pending[key]; pending {
		return
	}
	if other := l.otherView(key, v); other != nil && uidOf(other) == uid {
		l.moved[key] = movedObject{obj: obj, uid: uid, at: time.Now()}
	}
}

// otherView returns the object of key that a view other than from holds
// (nil for none). Call with l.mu held.
func (l *Labelled) otherView(key string, from *unlabelledView) any {
	if from != nil {
		if obj, ok, _ := l.segs.GetByKey(key); ok {
			return obj
		}
	}
	if v := l.speaker(); v != nil && v != from {
		if obj, ok, _ := v.inf.GetStore().GetByKey(key); ok {
			return obj
		}
	}
	return nil
}

// confirmLoop reads the pending objects from the API server, each once
// ConfirmAfter has passed without it showing up in a view: gone, it is
// deleted for the users' handlers; still there, it stays served and is
// labelled again, and read again later.
func (l *Labelled) confirmLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := l.confirmDue(ctx)
		if next.IsZero() {
			next = time.Now().Add(time.Minute)
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.confirm:
		}
	}
}

// confirmReread is how long an object confirmed to exist outside every view
// waits before it is read again.
const confirmReread = 5 * time.Second

// confirmDue checks the pending objects that are due and returns when the
// next one is.
func (l *Labelled) confirmDue(ctx context.Context) time.Time {
	now := time.Now()
	type due struct {
		key string
		uid types.UID
		obj any
	}
	var dues []due
	var next time.Time
	l.mu.Lock()
	for key, p := range l.pending {
		if !p.nextCheck.After(now) {
			dues = append(dues, due{key, p.uid, p.obj})
		} else if next.IsZero() || p.nextCheck.Before(next) {
			next = p.nextCheck
		}
	}
	for key, m := range l.moved {
		if now.Sub(m.at) > time.Minute {
			delete(l.moved, key)
		}
	}
	l.mu.Unlock()
	for _, d := range dues {
		if ctx.Err() != nil {
			return next
		}
		ns, name, _ := toolscache.SplitMetaNamespaceKey(d.key)
		l.stats.ConfirmReads.Add(1)
		live, err := l.opts.Client.Get(ctx, ns, name)
		gone := apierrors.IsNotFound(err) || (err == nil && uidOf(live) != d.uid)
		l.mu.Lock()
		p, still := l.pending[d.key]
		if !still || p.uid != d.uid {
			l.mu.Unlock()
			continue // it showed up in a view meanwhile
		}
		inView := false
		if err == nil && !gone {
			// A view may hold it at its live state already, its add
			// having come before the other view's delete: it is no
			// longer out of every view. The view's state must also be
			// at least the pending one: while the read ran, the object
			// may have left that view again (its leaving made this
			// pending state, newer than the read), and the view drops
			// it the moment its watch catches up.
			held := l.otherView(d.key, nil)
			if held == nil {
				held, _, _ = l.segs.GetByKey(d.key)
			}
			inView = held != nil && uidOf(held) == d.uid && !newer(live, held) && !newer(p.obj, held)
		}
		switch {
		case gone, inView:
			delete(l.pending, d.key)
		case err != nil:
			p.nextCheck = time.Now().Add(confirmReread)
		default:
			if l.opts.Transform != nil {
				if t, terr := l.opts.Transform(live); terr == nil {
					if o, ok := t.(runtime.Object); ok {
						live = o
					}
				}
			}
			if !newer(p.obj, live) {
				p.obj = live // else a view's leaving saw a later state while the read ran
			}
			p.nextCheck = time.Now().Add(confirmReread)
		}
		if !gone && !inView && (next.IsZero() || p.nextCheck.Before(next)) {
			next = p.nextCheck
		}
		l.mu.Unlock()
		switch {
		case gone:
			l.stats.ConfirmedGone.Add(1)
			l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnDelete(d.obj) })
		case err != nil:
			l.log.V(1).Info("reading an object that left the cache's views failed; retrying", "key", d.key, "error", err.Error())
		default:
			// It exists: labelled for a partition no view here selects
			// (edited by hand, say), or held by a view with a wrong
			// label, it is labelled for its own.
			l.labeller.consider(live)
		}
	}
	return next
}

// ---- users' handlers ----

// labelledHandler is a handler added with AddEventHandler.
type labelledHandler struct {
	h toolscache.ResourceEventHandler
}

func (*labelledHandler) HasSynced() bool                          { return true }
func (*labelledHandler) HasSyncedChecker() toolscache.DoneChecker { return alwaysDone{} }

// dispatch calls f for every handler. Handlers are called from the views'
// goroutines, concurrently: they must be safe for that, as a controller's
// enqueueing handlers are.
func (l *Labelled) dispatch(f func(toolscache.ResourceEventHandler)) {
	l.dispatchMu.RLock()
	defer l.dispatchMu.RUnlock()
	for _, h := range l.handlers {
		f(h.h)
	}
}

// AddEventHandler registers h: it gets every held object once as an
// initial add, then every event of the held partitions. As for Segmented,
// the registration reports synced at once; partitions sync one by one.
func (l *Labelled) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("cache: AddEventHandler(nil)")
	}
	reg := &labelledHandler{h: h}
	l.dispatchMu.Lock()
	defer l.dispatchMu.Unlock()
	for _, obj := range l.List() {
		h.OnAdd(obj, true)
	}
	l.handlers = append(l.handlers, reg)
	return reg, nil
}

// RemoveEventHandler stops deliveries to a handler AddEventHandler added.
func (l *Labelled) RemoveEventHandler(r toolscache.ResourceEventHandlerRegistration) error {
	reg, ok := r.(*labelledHandler)
	if !ok {
		return fmt.Errorf("cache: RemoveEventHandler: %T was not returned by this Labelled's AddEventHandler", r)
	}
	l.dispatchMu.Lock()
	defer l.dispatchMu.Unlock()
	l.handlers = slices.DeleteFunc(l.handlers, func(o *labelledHandler) bool { return o == reg })
	return nil
}

// ---- reads ----

// Reads take every view and the pending set under l.mu, as one snapshot:
// an object leaving a view is made pending (leaving, under l.mu) before
// that view drops it, and leaves the pending set (arrived, under l.mu) only
// after the view it reached stores it, so while l.mu is held it is in a
// view or pending. Read one by one outside l.mu, an object moving from the
// unlabelled view to a label segment could be missed in both the segment
// (read before it arrived) and the pending set (read after it arrived).

// views returns, each once and at its newest, the objects the views and
// the pending set hold whose request partition is in parts.
func (l *Labelled) views(parts shard.PartitionSet) []any {
	l.mu.Lock()
	segItems := l.segs.List()
	var unl []any
	if v := l.speaker(); v != nil {
		unl = v.inf.GetStore().List()
	}
	pend := make([]any, 0, len(l.pending))
	for _, p := range l.pending {
		pend = append(pend, p.obj)
	}
	l.mu.Unlock()
	return l.merge(parts, segItems, unl, pend)
}

// merge keeps, for every key, the newest object of the lists whose request
// partition is in parts.
func (l *Labelled) merge(parts shard.PartitionSet, lists ...[]any) []any {
	byKey := map[string]int{}
	var out []any
	for _, list := range lists {
		for _, obj := range list {
			p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
			if !ok || !parts.Has(p) {
				continue
			}
			key, _ := keyAndUID(obj)
			if i, seen := byKey[key]; seen {
				if newer(obj, out[i]) {
					out[i] = obj
				}
				continue
			}
			byKey[key] = len(out)
			out = append(out, obj)
		}
	}
	return out
}

// List returns the cached objects of the held partitions, each once.
func (l *Labelled) List() []any { return l.views(l.Held()) }

// ListNamespace returns the cached objects of namespace in the held
// partitions, each once.
func (l *Labelled) ListNamespace(namespace string) ([]any, error) {
	return l.ByIndex(toolscache.NamespaceIndex, namespace)
}

// ByIndex returns the held objects whose index name has value, each once.
func (l *Labelled) ByIndex(name, value string) ([]any, error) {
	l.mu.Lock()
	segItems, err := l.segs.ByIndex(name, value)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	held := l.held.Clone()
	var unl []any
	if v := l.speaker(); v != nil {
		if unl, err = v.inf.GetIndexer().ByIndex(name, value); err != nil {
			l.mu.Unlock()
			return nil, err
		}
	}
	var pend []any
	if index := l.indexFunc(name); index != nil {
		for _, p := range l.pending {
			if values, err := index(p.obj); err == nil && slices.Contains(values, value) {
				pend = append(pend, p.obj)
			}
		}
	}
	l.mu.Unlock()
	return l.merge(held, segItems, unl, pend), nil
}

// indexFunc returns the index function of the index name (nil if none):
// pending objects are in no view's indexer, so reads by index apply it.
func (l *Labelled) indexFunc(name string) toolscache.IndexFunc {
	if name == toolscache.NamespaceIndex {
		return toolscache.MetaNamespaceIndexFunc
	}
	return l.opts.Indexers[name]
}

// GetByKey returns the newest cached object of key ("namespace/name") if
// its request partition is held.
func (l *Labelled) GetByKey(key string) (any, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	found, err := l.newest(key)
	if err != nil || found == nil {
		return nil, false, err
	}
	if p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, found); !ok || !l.held.Has(p) {
		return nil, false, nil
	}
	return found, true, nil
}

// newest returns the newest state of key that the views or the pending set
// hold, whatever its partition (nil for none). A pending state loses a tie:
// made from a DELETED event, it carries the resourceVersion of the change
// that took the object out of its view but the content from before it, while
// a view's state at that resourceVersion is the change's. Call with l.mu
// held.
func (l *Labelled) newest(key string) (any, error) {
	var found any
	consider := func(obj any) {
		if found == nil || newer(obj, found) {
			found = obj
		}
	}
	if obj, ok, err := l.segs.GetByKey(key); err != nil {
		return nil, err
	} else if ok {
		consider(obj)
	}
	if v := l.speaker(); v != nil {
		if obj, ok, err := v.inf.GetStore().GetByKey(key); err != nil {
			return nil, err
		} else if ok {
			consider(obj)
		}
	}
	if p, ok := l.pending[key]; ok {
		consider(p.obj)
	}
	return found, nil
}

// countPartitions adds to counts[p] how many held objects the cache serves
// in partition p (a balanced ring's weights).
func (l *Labelled) countPartitions(counts []int) {
	for _, obj := range l.List() {
		if p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj); ok && p < len(counts) {
			counts[p]++
		}
	}
}

// GetStore returns a read-only view of the held objects.
func (l *Labelled) GetStore() toolscache.Store { return readOnlyStore{l} }

// ---- helpers ----

func keyAndUID(obj any) (string, types.UID) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		if m, err := meta.Accessor(d.Obj); err == nil {
			return d.Key, m.GetUID()
		}
		return d.Key, ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", ""
	}
	return shard.KeyOf(m.GetNamespace(), m.GetName()), m.GetUID()
}

func uidOf(obj any) types.UID {
	_, uid := keyAndUID(obj)
	return uid
}

// newer reports whether a is a later state of its object than b, by
// resourceVersion: they are opaque to clients, but every API server backed
// by etcd issues increasing integers, and the views of one cache read one
// API server. Unparseable ones compare as older, so a parseable one wins.
func newer(a, b any) bool {
	return resourceVersion(a) > resourceVersion(b)
}

func resourceVersion(obj any) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}
