package crshard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/shard"
)

// watchReplay is the handler the builder gives controller-runtime for one
// Watches: it passes every event to the user's handler and remembers which
// objects of the watched kind had an event that passed the watch's
// predicates (controller-runtime calls the handler only then). On
// activation, replay runs the user's handler over those objects still
// cached, as for the initial list: the requests it maps them to may fall in
// the activated partitions, whose previous owner dropped them.
//
// Remembering the objects, rather than rerunning the predicates, is what
// controller-runtime allows (per-watch predicates are unexported), and it
// keeps a replay from running a map function over every cached object of a
// kind whose predicate admits only a few (a map function that lists the
// objects it maps to would make that quadratic). An object that passed once
// is replayed until it is deleted: a superset of the events dropped, which
// reconcilers tolerate as they tolerate a resync.
type watchReplay struct {
	what      string // the watch, for errors: "Watches(*v1.Secret)"
	newObject func() client.Object
	inner     handler.EventHandler

	mu  sync.Mutex
	seq uint64
	// passed maps each remembered object to the seq of its last passing
	// event.
	passed map[types.NamespacedName]uint64
}

var _ handler.EventHandler = (*watchReplay)(nil)

func newWatchReplay(what string, obj client.Object, h handler.EventHandler, scheme *runtime.Scheme, metadataOnly bool) (*watchReplay, error) {
	newObject, err := objectFunc(obj, scheme, metadataOnly)
	if err != nil {
		return nil, fmt.Errorf("crshard: %s: %w", what, err)
	}
	return &watchReplay{what: what, newObject: newObject, inner: h, passed: map[types.NamespacedName]uint64{}}, nil
}

func (w *watchReplay) remember(o client.Object) {
	if o == nil {
		return
	}
	w.mu.Lock()
	w.seq++
	w.passed[client.ObjectKeyFromObject(o)] = w.seq
	w.mu.Unlock()
}

func (w *watchReplay) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	w.remember(e.Object)
	w.inner.Create(ctx, e, q)
}

func (w *watchReplay) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	w.remember(e.ObjectNew)
	w.inner.Update(ctx, e, q)
}

// Delete forgets the object: it is no longer cached, so there is nothing
// to replay. (A delete event its predicates filter out leaves it
// remembered until a replay finds it gone.)
func (w *watchReplay) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object != nil {
		w.mu.Lock()
		delete(w.passed, client.ObjectKeyFromObject(e.Object))
		w.mu.Unlock()
	}
	w.inner.Delete(ctx, e, q)
}

func (w *watchReplay) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	w.remember(e.Object)
	w.inner.Generic(ctx, e, q)
}

// replay runs the user's handler, with create events marked as of the
// initial list, over the remembered objects still in cache, into q; it
// forgets those no longer cached.
func (w *watchReplay) replay(ctx context.Context, cache client.Reader, q *replayQueue) error {
	w.mu.Lock()
	keys := slices.Collect(maps.Keys(w.passed))
	listed := w.seq
	w.mu.Unlock()
	for i, key := range keys {
		if i%256 == 0 && ctx.Err() != nil {
			return fmt.Errorf("%s: %w", w.what, context.Cause(ctx))
		}
		o := w.newObject()
		err := cache.Get(ctx, key, o)
		if apierrors.IsNotFound(err) {
			w.mu.Lock()
			// Unless an event passed since the keys were taken.
			if seq, ok := w.passed[key]; ok && seq <= listed {
				delete(w.passed, key)
			}
			w.mu.Unlock()
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: reading %s from the cache: %w", w.what, key, err)
		}
		w.inner.Create(ctx, event.CreateEvent{Object: o, IsInInitialList: true}, q)
	}
	return nil
}

// remembered is the number of objects replay would run the handler over.
func (w *watchReplay) remembered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.passed)
}

// replayQueue is the queue replayed handlers add to: it keeps the requests
// of the partitions being replayed, and flush hands them to the gated queue
// in one call, at low priority (the queue drops duplicates). It implements
// priorityqueue.PriorityQueue, as the handlers expect; they only add.
type replayQueue struct {
	*gatedQueue // the rest of the interface; not used by handlers
	set         shard.PartitionSet

	mu   sync.Mutex
	reqs []reconcile.Request
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*replayQueue)(nil)

func newReplayQueue(q *gatedQueue, set shard.PartitionSet) *replayQueue {
	return &replayQueue{gatedQueue: q, set: set}
}

func (q *replayQueue) keep(reqs ...reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range reqs {
		if q.set.Has(q.partition(r)) {
			q.reqs = append(q.reqs, r)
		}
	}
}

func (q *replayQueue) Add(r reconcile.Request)                       { q.keep(r) }
func (q *replayQueue) AddAfter(r reconcile.Request, _ time.Duration) { q.keep(r) }
func (q *replayQueue) AddRateLimited(r reconcile.Request)            { q.keep(r) }
func (q *replayQueue) AddWithOpts(_ priorityqueue.AddOpts, rs ...reconcile.Request) {
	q.keep(rs...)
}

// flush adds the kept requests to the gated queue, which admits those of
// partitions still active.
func (q *replayQueue) flush() {
	q.mu.Lock()
	reqs := q.reqs
	q.reqs = nil
	q.mu.Unlock()
	if len(reqs) > 0 {
		q.gatedQueue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, reqs...)
	}
}
