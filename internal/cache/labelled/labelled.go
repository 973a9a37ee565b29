package labelled

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/shard"
)

// Defaults of Options.
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

// Options configure a Labelled.
type Options struct {
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
	// (segmented.Options.MaxSegments).
	MaxSegments int
	// CheckInterval is how often the cache checks that it holds every
	// object of the partitions it reports synced (the self-check,
	// CheckReport). Default DefaultCheckInterval; negative: off.
	CheckInterval time.Duration
	// CheckList is the self-check's LIST of the resource; it reads only
	// metadata, so a metadata-only LIST (PartialObjectMetadataList) costs
	// least. Default: ListWatch's LIST.
	CheckList func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// Clock decides when pending objects are confirmed, checks run and
	// label patches are forgotten (its label segments take it too).
	// Defaults to the real clock; tests pass a fake one.
	Clock clock.WithTicker
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
// last state. It implements ring.PartitionCache (shard/ring) and the
// Informer sources use.
type Labelled struct {
	opts Options
	log  logr.Logger
	segs *segmented.Segmented

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
	stats    Stats

	checkMu sync.Mutex  // guards checked
	checked CheckReport // the self-check's, as of its last check
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

// Stats counts what labelling costs.
type Stats struct {
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

// New validates opts and returns a Labelled holding nothing; call
// Run, then Hold.
func New(opts Options) (*Labelled, error) {
	switch {
	case opts.LabelKey == "":
		return nil, errors.New("cache: Options.LabelKey is empty; use shard.PartitionLabelKey")
	case opts.Partitioner == nil || opts.Partitioner.Count() < 1:
		return nil, errors.New("cache: Options.Partitioner is nil; pass the ring's partition function")
	case opts.Partitioner.Count() > shard.MaxLabelPartitions:
		return nil, fmt.Errorf("cache: a ring of %d partitions is too large for a cache sharded by labels (at most %d): its unlabelled selector names every partition", opts.Partitioner.Count(), shard.MaxLabelPartitions)
	case opts.ListWatch == nil:
		return nil, errors.New("cache: Options.ListWatch is nil")
	case opts.Example == nil:
		return nil, errors.New("cache: Options.Example is nil; pass an object of the resource's type")
	case opts.Client == nil:
		return nil, errors.New("cache: Options.Client is nil; it reads and labels single objects")
	case opts.Route != 0 && opts.Route != shard.RouteSelf && opts.Route != shard.RouteOwner:
		return nil, fmt.Errorf("cache: Options.Route %s cannot be labelled: only objects mapped to their own or their controller owner's key have a partition of their own", opts.Route)
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
	if opts.CheckInterval == 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.CheckList == nil {
		opts.CheckList = opts.ListWatch.ListWithContext
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	n := opts.Partitioner.Count()
	l := &Labelled{
		opts: opts, log: opts.Logger,
		held: shard.NewPartitionSet(n), active: shard.NewPartitionSet(n),
		pending: map[string]*pendingObject{}, moved: map[string]movedObject{},
		changed: make(chan struct{}, 1), confirm: make(chan struct{}, 1),
	}
	segs, err := segmented.New(segmented.Options{
		LabelKey: opts.LabelKey, Partitions: n, ListWatch: opts.ListWatch, Example: opts.Example,
		MaxSegments: opts.MaxSegments, Transform: opts.Transform, Indexers: opts.Indexers, Logger: opts.Logger,
		Clock: opts.Clock,
		// The label segments tell l of every object leaving them before
		// their stores drop it: l keeps serving it until it knows where
		// it went.
		Leaving: func(obj runtime.Object) { l.leaving(nil, obj) },
	})
	if err != nil {
		return nil, err
	}
	l.segs = segs
	l.labeller = newLabeller(l, opts.LabelQPS)
	if _, err := segs.AddEventHandler(l.viewHandler(nil)); err != nil {
		return nil, err
	}
	return l, nil
}

// Run owns the views, the labeller, the confirmations and the self-check
// until ctx ends, then stops them and waits for them.
func (l *Labelled) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.segs.Run(ctx) })
	wg.Go(func() { l.forward(ctx) })
	wg.Go(func() { l.labeller.run(ctx) })
	wg.Go(func() { l.confirmLoop(ctx) })
	if l.opts.CheckInterval > 0 {
		wg.Go(func() { l.checkLoop(ctx) })
	}
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
	cachekit.MustBeSized("Labelled.Hold", set, l.held.Size())
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
	now := l.opts.Clock.Now()
	for _, obj := range l.segs.List() {
		labelled, ok := l.segs.PartitionOf(obj)
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
	cachekit.MustBeSized("Labelled.SetActive", set, l.held.Size())
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

// Describe says what the label segments and the unlabelled views are
// doing (KindMode.Informers): a partition is synced only once a segment
// and the speaking unlabelled view (which must keep it) have synced.
func (l *Labelled) Describe() string {
	segs := l.segs.Describe()
	l.mu.Lock()
	defer l.mu.Unlock()
	synced := 0
	for _, v := range l.unlabelled {
		if v.synced.Load() {
			synced++
		}
	}
	out := fmt.Sprintf("label %s; %d unlabelled views, %d synced", segs, len(l.unlabelled), synced)
	if v := l.speaker(); v != nil {
		out += fmt.Sprintf(", the speaking one synced %t, keeps %d held partitions, dropped objects of %d", v.synced.Load(), v.keeps.Intersect(l.held).Len(), v.dirty.Len())
	}
	if l.forbidden != "" {
		out += "; labels cannot be written: " + l.forbidden
	}
	return out
}

// Held returns the partitions the cache was last asked to hold.
func (l *Labelled) Held() shard.PartitionSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held.Clone()
}

// Stats returns the cache's labelling counters.
func (l *Labelled) Stats() *Stats { return &l.stats }

// LabelBacklog is how many objects wait for this replica to label them.
func (l *Labelled) LabelBacklog() int {
	if l.labeller == nil {
		return 0
	}
	return l.labeller.backlog()
}

// ObjectsListed returns how many objects the label segments' LISTs have
// returned (the unlabelled view's are counted in Stats).
func (l *Labelled) ObjectsListed() int64 { return l.segs.ObjectsListed() }

// Forbidden returns why labels cannot be written ("" while they can).
func (l *Labelled) Forbidden() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forbidden
}

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
	return cachekit.ResourceVersion(a) > cachekit.ResourceVersion(b)
}
