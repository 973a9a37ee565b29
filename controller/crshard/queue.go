package crshard

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// gatedQueue is the shard gate around a controller's queue. Every way in
// (Add, AddAfter, AddRateLimited, AddWithOpts) admits a request only while
// its partition is active; Get hands out a request only after counting it
// in flight, in one atomic step with respect to Revoke (gate.Enter), and
// Done ends that count. It always implements priorityqueue.PriorityQueue,
// because controller-runtime's handlers type-assert the queue to call
// AddWithOpts; over a plain queue AddWithOpts degrades as
// controller-runtime's own wrapper does.
type gatedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]                                                // Len, Forget, NumRequeues, ShutDown…
	pq                                                      priorityqueue.PriorityQueue[reconcile.Request] // nil over a plain queue
	ring                                                    *Ring
	ctl                                                     *sharded
	admitted, foreign, inactive                             prometheus.Counter
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*gatedQueue)(nil)

func newGatedQueue(r *Ring, c *sharded, name string, inner workqueue.TypedRateLimitingInterface[reconcile.Request]) *gatedQueue {
	q := &gatedQueue{
		TypedRateLimitingInterface: inner, ring: r, ctl: c,
		admitted: r.metrics.gate.WithLabelValues(name, "admitted"),
		foreign:  r.metrics.gate.WithLabelValues(name, "foreign"),
		inactive: r.metrics.gate.WithLabelValues(name, "inactive"),
	}
	q.pq, _ = inner.(priorityqueue.PriorityQueue[reconcile.Request])
	// The controller's series exists from the start, at 0, as kshard's
	// own controllers have it, so increase() sees its first overdue drain.
	r.metrics.drainOverdue.WithLabelValues(name)
	return q
}

func (q *gatedQueue) partition(req reconcile.Request) int {
	return q.ring.parts.Of(req.Namespace, req.Name)
}

func (q *gatedQueue) admit(req reconcile.Request) bool {
	if q.ring.gate.Active(q.partition(req)) {
		q.admitted.Inc()
		return true
	}
	q.foreign.Inc()
	return false
}

func (q *gatedQueue) Add(req reconcile.Request) {
	if q.admit(req) {
		q.TypedRateLimitingInterface.Add(req)
	}
}

func (q *gatedQueue) AddAfter(req reconcile.Request, d time.Duration) {
	if q.admit(req) {
		q.TypedRateLimitingInterface.AddAfter(req, d)
	}
}

func (q *gatedQueue) AddRateLimited(req reconcile.Request) {
	if q.admit(req) {
		q.TypedRateLimitingInterface.AddRateLimited(req)
	}
}

func (q *gatedQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	// One call for the admitted requests (a replay passes thousands); a
	// copy only when some are dropped.
	admitted := reqs
	for i, req := range reqs {
		if q.admit(req) {
			if len(admitted) < len(reqs) {
				admitted = append(admitted, req)
			}
			continue
		}
		if len(admitted) == len(reqs) {
			admitted = append(make([]reconcile.Request, 0, len(reqs)), reqs[:i]...)
		}
	}
	if len(admitted) == 0 {
		return
	}
	if q.pq != nil {
		q.pq.AddWithOpts(o, admitted...)
		return
	}
	for _, req := range admitted {
		switch {
		case o.RateLimited:
			q.TypedRateLimitingInterface.AddRateLimited(req)
		case o.After > 0:
			q.TypedRateLimitingInterface.AddAfter(req, o.After)
		default:
			q.TypedRateLimitingInterface.Add(req)
		}
	}
}

func (q *gatedQueue) Get() (reconcile.Request, bool) {
	req, _, shutdown := q.GetWithPriority()
	return req, shutdown
}

// GetWithPriority returns the next request whose partition is still
// active, counted in flight until Done; requests of partitions revoked
// since they were queued are dropped (their new owner replays them).
func (q *gatedQueue) GetWithPriority() (reconcile.Request, int, bool) {
	// controller-runtime starts its workers once its sources synced.
	q.ctl.markWorking()
	for {
		var (
			req      reconcile.Request
			priority int
			shutdown bool
		)
		if q.pq != nil {
			req, priority, shutdown = q.pq.GetWithPriority()
		} else {
			req, shutdown = q.TypedRateLimitingInterface.Get()
		}
		if shutdown {
			return req, priority, true
		}
		if q.ring.gate.Enter(q.partition(req)) {
			return req, priority, false
		}
		q.inactive.Inc()
		q.TypedRateLimitingInterface.Forget(req)
		q.TypedRateLimitingInterface.Done(req)
	}
}

// Done ends the processing of a request Get handed out, and its count in
// flight: its partition's drain waits for this.
func (q *gatedQueue) Done(req reconcile.Request) {
	q.TypedRateLimitingInterface.Done(req)
	q.ring.gate.Exit(q.partition(req))
}
