package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/shard"
)

// eventQueue is the shard gate on the event path: handlers add requests to
// it, and it queues only those whose partition is active. It costs one hash
// and one atomic load per request, and allocates nothing; a refused request
// costs a short lock more (refusedRequests).
type eventQueue struct {
	c     *controller
	queue workqueue.TypedRateLimitingInterface[Request]
}

// Add is the event path: a request the gate refuses is remembered for the
// next activation's replay (refusedRequests).
func (e *eventQueue) Add(req Request) {
	if !e.admit(req) {
		e.c.refused.add(req)
	}
}

// admit queues req if its partition is active and reports whether it did.
// The replay backlog feeds through it, not Add: its requests come from the
// cache, and one its gate refuses (revoked during the replay) is no recent
// change to replay first.
func (e *eventQueue) admit(req Request) bool {
	c := e.c
	if !c.gate.Active(c.parts.Of(req.Namespace, req.Name)) {
		c.metrics.Foreign.Inc()
		return false
	}
	c.metrics.Admitted.Inc()
	e.queue.Add(req)
	return true
}

// replayQueue receives the requests of a replay. It keeps those of the
// partitions being replayed, each once, and puts them in the replay backlog,
// from which it and the workers feed them to the gate whenever the queue
// runs low (feedReplay), so the workers start on a replay as soon as it
// starts. The gate refuses those of partitions revoked since: a
// revoke that lands between the gate's check and the queue's Add lets that
// one request into the queue, where it is dropped when dequeued, as for a
// live event.
type replayQueue struct {
	c      *controller
	events *eventQueue
	parts  shard.PartitionSet
	seen   map[Request]struct{}
}

func (r *replayQueue) Add(req Request) {
	if !r.parts.Has(r.c.parts.Of(req.Namespace, req.Name)) {
		return
	}
	if _, dup := r.seen[req]; dup {
		return
	}
	r.seen[req] = struct{}{}
	r.c.backlog.push(req)
	r.c.feedReplay(r.events, false)
}

// refusedRequests remembers, in a ring of refusedRemembered, the latest
// requests the gate refused. When a partition moves, the updates that
// arrive between the old owner's revoke and the new owner's activation are
// refused by both, and so are those the new owner's cache sees while it
// waits for the old owner to drain: the activation's replay reaches them,
// but in cache order, behind every other object of the partitions gained
// (tens of thousands at scale). Replayed first, the changes most likely to
// need work wait for no other key. The replay still passes every cached
// object, so a request pushed out of the ring only loses its place, never
// its reconcile.
type refusedRequests struct {
	mu   sync.Mutex
	reqs []Request // allocated on the first refusal; a ring once full
	next int       // where the next refusal goes
}

// refusedRemembered bounds refusedRequests: 4,096 requests (about 128 KiB
// of string headers) hold more than a second of refusals at thousands of
// events per second.
const refusedRemembered = 4096

func (r *refusedRequests) add(req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reqs == nil {
		r.reqs = make([]Request, 0, refusedRemembered)
	}
	if len(r.reqs) < refusedRemembered {
		r.reqs = append(r.reqs, req)
		return
	}
	r.reqs[r.next] = req
	r.next = (r.next + 1) % refusedRemembered
}

// in returns the remembered requests for which keep holds, oldest first.
func (r *refusedRequests) in(keep func(Request) bool) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for i := range r.reqs {
		if req := r.reqs[(r.next+i)%len(r.reqs)]; keep(req) {
			out = append(out, req)
		}
	}
	return out
}

// replayBacklog holds the requests of replays not queued yet, oldest first.
// An activation replays every cached object of its partitions: tens of
// thousands of requests when a partition set moves at scale. Queued at once
// they would stand in front of every live event for as long as the workers
// take to get through them; fed a few at a time, a live event waits behind
// at most feedDepth of them, and the workers are never idle while the
// backlog lasts. It de-duplicates nothing: a replay passes each request
// once (replayQueue), and the queue merges a request already in it.
//
// Under a sustained overload live events alone would keep the queue at
// feedDepth, and the backlog would wait as long as the overload lasts while
// it holds exactly the events the old owner may have dropped: so once the
// queue has stayed full for overloadAfter, the backlog also gets one in
// every replayShare requests the workers finish (popOverdue). A burst of
// live events shorter than that (a rolling restart's) leaves the order
// alone: fed through such bursts, the backlog went with a higher rolling
// restart handoff p99 at 100,000 objects (bench phase 9, 2026-11-26: 0.89
// to 0.99 s in four measurements, 0.70 to 0.73 s in two without).
type replayBacklog struct {
	mu       sync.Mutex
	reqs     []Request
	next     int       // reqs[:next] are fed
	fullFrom time.Time // when the workers first found the queue full since the last feed; zero if not
	starved  int       // requests finished since then, or since the last overdue feed
	// report receives the backlog's length whenever it changes, under mu:
	// set after the lock, two feeders' reports could land out of order
	// and leave kshard_replay_backlog at 1 over an empty backlog (a
	// fleet then never looks idle; CI's bench waited 3 minutes for it).
	report func(left int)
}

const (
	// replayShare is the least share of the workers' requests a replay
	// backlog gets while live events keep the queue full: one in every
	// replayShare. A quarter leaves live events most of the workers and
	// still drains a replay of n requests within 4n of them.
	replayShare = 4
	// overloadAfter is how long the queue must stay full before the
	// backlog takes its share.
	overloadAfter = time.Second
)

func (b *replayBacklog) push(req Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, req)
	b.reported()
}

// reported tells report the backlog's length. Call with b.mu held.
func (b *replayBacklog) reported() {
	if b.report != nil {
		b.report(len(b.reqs) - b.next)
	}
}

// pop returns the oldest request and how many are left after it.
func (b *replayBacklog) pop() (req Request, left int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == len(b.reqs) {
		return Request{}, 0, false
	}
	b.fullFrom, b.starved = time.Time{}, 0 // the queue ran low: no overload
	return b.take()
}

// popOverdue is pop for a worker that finished a request at now while the
// queue was full: once the queue has been full for overloadAfter, it
// returns the oldest request on every replayShare-th call.
func (b *replayBacklog) popOverdue(now time.Time) (req Request, left int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == len(b.reqs) {
		return Request{}, 0, false
	}
	if b.fullFrom.IsZero() {
		b.fullFrom = now
	}
	if b.starved++; now.Sub(b.fullFrom) < overloadAfter || b.starved < replayShare {
		return Request{}, len(b.reqs) - b.next, false
	}
	b.starved = 0
	return b.take()
}

// take removes the oldest request; the backlog is not empty.
func (b *replayBacklog) take() (req Request, left int, ok bool) {
	req = b.reqs[b.next]
	b.next++
	if b.next == len(b.reqs) {
		b.reqs, b.next = nil, 0 // a large replay's array goes with it
		b.fullFrom, b.starved = time.Time{}, 0
	} else {
		b.reqs[b.next-1] = Request{}
	}
	b.reported()
	return req, len(b.reqs) - b.next, true
}

func (b *replayBacklog) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs) - b.next
}

// feedDepth is how many requests the workers keep queued while a replay
// backlog lasts: two per worker, so that none waits for the next.
func (c *controller) feedDepth() int { return 2 * c.opts.MaxConcurrentReconciles }

// feedReplay moves requests from the replay backlog through the gate into
// the queue until feedDepth are queued or the backlog is empty. A replay
// calls it after every request it adds, the workers (finished) after every
// request they finish; a worker that finds the queue full still feeds the
// backlog its share (replayShare).
func (c *controller) feedReplay(events *eventQueue, finished bool) {
	fed := false
	for events.queue.Len() < c.feedDepth() {
		req, _, ok := c.backlog.pop()
		if !ok {
			return
		}
		events.admit(req)
		fed = true
	}
	if finished && !fed {
		if req, _, ok := c.backlog.popOverdue(time.Now()); ok {
			events.admit(req)
		}
	}
}

func (c *controller) checkSet(op string, set shard.PartitionSet) error {
	if n := c.parts.Count(); set.Size() != n {
		return fmt.Errorf("%s: %s: the partition set covers %d partitions but the controller's Partitioner has %d; build the set with the ring's partition count", c, op, set.Size(), n)
	}
	return nil
}

func (c *controller) Activate(ctx context.Context, set shard.PartitionSet) error {
	if err := c.Admit(ctx, set); err != nil {
		return err
	}
	// Everything pending, so that an earlier failed replay completes too.
	return c.Replay(ctx, shard.FullPartitionSet(c.parts.Count()))
}

func (c *controller) Admit(_ context.Context, set shard.PartitionSet) error {
	if err := c.checkSet("Admit", set); err != nil {
		return err
	}
	// Admit first, then list the caches (Replay): an object missing from
	// the list was added to its cache after the gate opened, so its event
	// passes.
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	for p := range set.All() {
		if c.gate.Activate(p) {
			c.pendingReplay.Add(p)
		}
	}
	return nil
}

func (c *controller) Replay(ctx context.Context, set shard.PartitionSet) error {
	if err := c.checkSet("Replay", set); err != nil {
		return err
	}
	c.replayMu.Lock()
	defer c.replayMu.Unlock()
	// Take the partitions out of pending for the duration of the replay:
	// one revoked and admitted again meanwhile missed some of its requests
	// (the gate refused them) and must be pending again afterwards, which
	// Admit's Add does. Partitions already revoked need no replay; their
	// next admission makes them pending again.
	c.pendingMu.Lock()
	taken := c.pendingReplay.Intersect(set)
	c.pendingReplay = c.pendingReplay.Difference(taken)
	c.pendingMu.Unlock()
	parts := shard.NewPartitionSet(c.parts.Count())
	for p := range taken.All() {
		if c.gate.Active(p) {
			parts.Add(p)
		}
	}
	if parts.IsEmpty() {
		return nil
	}
	c.mu.Lock()
	sources, events := slices.Clone(c.started), c.events
	c.mu.Unlock()
	if events == nil {
		// Sources not started yet deliver their whole cache as create
		// events when they start, so only started ones are replayed.
		return nil
	}
	rq := &replayQueue{c: c, events: events, parts: parts, seen: map[Request]struct{}{}}
	// Refused recently first (refusedRequests); the replay below then
	// skips them as seen. A remembered request whose object is gone meets
	// the reconciler's usual not-found.
	recent := c.refused.in(func(req Request) bool { return parts.Has(c.parts.Of(req.Namespace, req.Name)) })
	for _, req := range recent {
		rq.Add(req)
	}
	for _, src := range sources {
		if r, ok := src.(ReplayableSource); ok {
			if err := r.Replay(ctx, rq); err != nil {
				c.pendingMu.Lock()
				c.pendingReplay = c.pendingReplay.Union(parts)
				c.pendingMu.Unlock()
				return fmt.Errorf("%s: replaying cached objects (the partitions are active and stay pending; replay again to complete it): %w", c, err)
			}
		}
	}
	c.log.V(1).Info("Replayed activated partitions", "partitions", parts.Len(), "replayed", len(rq.seen), "refusedFirst", len(recent))
	return nil
}

func (c *controller) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if err := c.checkSet("Revoke", set); err != nil {
		return err
	}
	set = set.Clone() // the grace timer may outlive this call and the caller's set
	grace := c.opts.DrainGracePeriod
	if fence {
		grace = 0
	}
	start := time.Now()
	overdue := false
	err := c.gate.Drain(ctx, set.Slice(), gate.DrainOptions{
		Grace:       grace,
		Cancel:      func() { c.cancelInFlight(set) },
		ReportAfter: c.opts.DrainReportAfter,
		Overdue: func(inFlight int, waited time.Duration, first bool) {
			if first {
				c.metrics.DrainOverdue.Inc()
			}
			overdue = true
			c.log.Info("Drain is taking longer than DrainReportAfter; still waiting, the partitions are not released while a reconcile of them runs",
				"partitions", set.Len(), "inFlight", inFlight, "waited", waited.Round(time.Millisecond))
		},
	})
	if err != nil {
		return fmt.Errorf("%s: Revoke: %w", c, err)
	}
	if overdue {
		c.log.Info("Drain completed after being reported overdue", "partitions", set.Len(), "took", time.Since(start))
	}
	return nil
}

// cancelInFlight cancels the reconciles running for partitions of set that
// are still revoked.
func (c *controller) cancelInFlight(set shard.PartitionSet) {
	for i := range c.slots {
		s := &c.slots[i]
		s.mu.Lock()
		if s.cancel != nil && set.Has(s.partition) && !c.gate.Active(s.partition) {
			s.cancel()
		}
		s.mu.Unlock()
	}
}

func (c *controller) ActivePartitions() shard.PartitionSet {
	n := c.parts.Count()
	set := shard.NewPartitionSet(n)
	for p := range n {
		if c.gate.Active(p) {
			set.Add(p)
		}
	}
	return set
}

func (c *controller) InFlight() int { return c.gate.TotalInFlight() }
