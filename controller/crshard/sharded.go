package crshard

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kcontroller "github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
)

// refusedRetry is when a reconcile refused for an expired lease validity is
// tried again: by then renewals have resumed (the validity extends) or the
// replica has fenced (the request is dropped when dequeued).
const refusedRetry = 250 * time.Millisecond

// sharded is one opted-in controller: its gated queue, once
// controller-runtime built it, and what its replay lists.
type sharded struct {
	ring *Ring
	// cache is the manager's cache, for the Observer.
	cache client.Reader
	// forList lists the For type's cached objects; nil: no For replay.
	forList func() client.ObjectList
	// watches replay the Watches handlers.
	watches []*watchReplay

	mu    sync.Mutex // guards queue and name
	queue *gatedQueue
	name  string

	working     chan struct{} // closed when a worker first asks for work
	workingOnce sync.Once
}

func (c *sharded) markWorking() { c.workingOnce.Do(func() { close(c.working) }) }

// options returns opts with the gated queue and the wrapped reconciler.
// usePQ is whether controller-runtime would build its priority queue.
func (c *sharded) options(opts controller.Options, usePQ bool) controller.Options {
	c.ring.optedIn.add()
	userQueue := opts.NewQueue
	logger := opts.Logger
	opts.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		var inner workqueue.TypedRateLimitingInterface[reconcile.Request]
		switch {
		case userQueue != nil:
			inner = userQueue(name, rl)
		case usePQ:
			// What controller-runtime builds when NewQueue is unset.
			inner = priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.Log = logger.WithValues("controller", name)
				o.RateLimiter = rl
			})
		default:
			inner = workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name})
		}
		q := newGatedQueue(c.ring, c, name, inner)
		c.mu.Lock()
		c.queue, c.name = q, name
		c.mu.Unlock()
		return q
	}
	return opts
}

// reconciler wraps r: a reconcile starts only while its partition is active
// and the lease valid; its context is cancelled when its partition is
// revoked (after the grace period) and carries the lease validity for the
// fencing transport. Its count in flight is the queue's, from Get to Done.
func (c *sharded) reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		ring := c.ring
		p := ring.parts.Of(req.Namespace, req.Name)
		if !ring.gate.Active(p) {
			return reconcile.Result{}, nil // revoked since dequeued: the new owner replays it
		}
		// The last moment before the reconcile starts: after a pause the
		// partition may look active while a peer already took it over.
		if v := ring.validity(); !v.ValidAt(time.Now()) {
			ring.metrics.refused.WithLabelValues(c.controllerName()).Inc()
			return reconcile.Result{RequeueAfter: refusedRetry}, nil
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Registered before the second check: Revoke closes the gate
		// before it cancels, so a reconcile that passes the check is seen
		// by the cancel.
		f := ring.running.hold(p, c.controllerName(), cancel)
		defer ring.running.release(f)
		if !ring.gate.Active(p) {
			return reconcile.Result{}, nil
		}
		rctx = kcontroller.WithLeaseValidity(rctx, ring.validity)
		if o := observer.Load(); o != nil && o.Reconcile != nil {
			return o.Reconcile(rctx, c.cache, req, r.Reconcile)
		}
		return r.Reconcile(rctx, req)
	})
}

func (c *sharded) controllerName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

// replay enqueues, at low priority and through the gate, the requests of
// set's partitions that the controller's sources would produce for the
// cached objects: the keys of the For type's objects, and what each
// Watches handler maps its remembered objects to (watchReplay).
func (c *sharded) replay(ctx context.Context, cache client.Reader, set shard.PartitionSet) error {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q == nil {
		return nil
	}
	rq := newReplayQueue(q, set)
	if c.forList != nil {
		// Read only: the handlers of live events get the cache's objects
		// uncopied too.
		list := c.forList()
		if err := cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("crshard: replaying controller %q: listing %T from the cache: %w", c.controllerName(), list, err)
		}
		err := forEachMeta(list, func(namespace, name string) {
			rq.keep(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
		})
		if err != nil {
			return fmt.Errorf("crshard: replaying controller %q: %w", c.controllerName(), err)
		}
	}
	for _, w := range c.watches {
		if err := w.replay(ctx, cache, rq); err != nil {
			return fmt.Errorf("crshard: replaying controller %q: %w", c.controllerName(), err)
		}
	}
	rq.flush()
	return nil
}

// forEachMeta calls f with the namespace and name of every item of list.
func forEachMeta(list client.ObjectList, f func(namespace, name string)) error {
	if pl, ok := list.(*metav1.PartialObjectMetadataList); ok {
		for i := range pl.Items {
			f(pl.Items[i].Namespace, pl.Items[i].Name)
		}
		return nil
	}
	items, err := metaItems(list)
	if err != nil {
		return err
	}
	for _, o := range items {
		f(o.GetNamespace(), o.GetName())
	}
	return nil
}

// usePriorityQueue is controller-runtime's default: the controller's
// option, else the manager's, else true.
func usePriorityQueue(opt, global *bool) bool {
	if opt != nil {
		return *opt
	}
	return ptr.Deref(global, true)
}
