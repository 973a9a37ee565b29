package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/controller/internal/metrics"
	"github.com/kshard/kshard/shard"
)

type lifecycle int

const (
	stateNew lifecycle = iota
	stateRunning
	stateStopped
)

// controller is the one implementation of Controller.
type controller struct {
	name         string
	do           Reconciler
	opts         Options
	recoverPanic bool
	log          logr.Logger
	parts        gate.Partitions
	gate         *gate.Gate
	families     *metrics.Families
	metrics      *metrics.Controller

	// slots has one entry per worker, naming the partition it reconciles
	// and how to cancel that reconcile, so Revoke can cancel it.
	slots []slot

	// lifecycleMu serialises starting and stopping sources (which may do
	// I/O): Start, a Watch after Start, and the final stop.
	lifecycleMu sync.Mutex

	// mu guards the fields below; it is held only for short updates and
	// snapshots, never across I/O or a wait.
	mu      sync.Mutex
	state   lifecycle
	sources []Source // added before Start
	started []Source // started, in order; replayed on Activate
	runCtx  context.Context
	events  *eventQueue // the gated queue handed to sources; set by Start

	// replayMu serialises replays, which may take long. pendingMu, held
	// only briefly (Admit must never wait for a replay), guards
	// pendingReplay: the partitions admitted whose replay has not
	// completed, minus those a running replay has taken.
	replayMu      sync.Mutex
	pendingMu     sync.Mutex
	pendingReplay shard.PartitionSet
	// backlog holds replayed requests not queued yet (feedReplay).
	backlog replayBacklog
	// refused remembers the latest requests the gate refused, for the
	// next activation to replay first.
	refused refusedRequests

	// synced is closed once the sources synced and the workers started.
	synced chan struct{}
}

// slot is one worker's current reconcile.
type slot struct {
	mu        sync.Mutex
	partition int // -1 when idle
	cancel    context.CancelFunc
}

func (s *slot) hold(p int, cancel context.CancelFunc) {
	s.mu.Lock()
	s.partition, s.cancel = p, cancel
	s.mu.Unlock()
}

func (s *slot) release() {
	s.mu.Lock()
	s.partition, s.cancel = -1, nil
	s.mu.Unlock()
}

func (c *controller) Name() string { return c.name }

func (c *controller) String() string { return fmt.Sprintf("controller %q", c.name) }

func (c *controller) Watch(src Source) error {
	if src == nil {
		return fmt.Errorf("%s: Watch: source is nil", c)
	}
	if err := checkReplayable(src, c.opts); err != nil {
		return fmt.Errorf("%s: Watch: %w", c, err)
	}
	c.lifecycleMu.Lock()
	defer c.lifecycleMu.Unlock()
	c.mu.Lock()
	state, ctx, events := c.state, c.runCtx, c.events
	if state == stateNew {
		c.sources = append(c.sources, src)
	}
	c.mu.Unlock()
	switch state {
	case stateNew:
		return nil
	case stateStopped:
		return fmt.Errorf("%s: Watch: the controller has stopped", c)
	}
	if err := src.Start(ctx, events); err != nil {
		return fmt.Errorf("%s: starting source: %w", c, err)
	}
	c.mu.Lock()
	c.started = append(c.started, src)
	c.mu.Unlock()
	return nil
}

func (c *controller) Start(ctx context.Context) error {
	c.lifecycleMu.Lock()
	c.mu.Lock()
	if c.state != stateNew {
		c.mu.Unlock()
		c.lifecycleMu.Unlock()
		return fmt.Errorf("%s: Start called more than once; a controller runs once", c)
	}
	ctx = logr.NewContext(ctx, c.log)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(c.opts.RateLimiter, workqueue.TypedRateLimitingQueueConfig[Request]{
		Name:            c.name,
		MetricsProvider: c.families.QueueProvider(c.name),
	})
	c.state, c.runCtx = stateRunning, ctx
	c.events = &eventQueue{c: c, queue: queue}
	sources := slices.Clone(c.sources)
	c.mu.Unlock()

	// Whatever happens below, stop the workers first (they may be using
	// the queue), then release the sources.
	var workers sync.WaitGroup
	defer c.stop(queue, &workers)

	err := c.startSources(ctx, sources)
	c.lifecycleMu.Unlock()
	if err != nil {
		return err
	}
	if err := c.waitForSync(ctx, sources); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while syncing: not an error
		}
		return err
	}

	c.log.Info("Starting workers", "workers", c.opts.MaxConcurrentReconciles)
	c.metrics.MaxConcurrent.Set(float64(c.opts.MaxConcurrentReconciles))
	for i := range c.slots {
		s := &c.slots[i]
		workers.Go(func() {
			for c.processNext(ctx, queue, s) {
			}
		})
	}
	close(c.synced)
	<-ctx.Done()
	c.log.Info("Stopping workers")
	return nil
}

func (c *controller) WaitForSync(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for the sources to sync: %w", c, context.Cause(ctx))
	}
}

func (c *controller) startSources(ctx context.Context, sources []Source) error {
	for _, src := range sources {
		if err := src.Start(ctx, c.events); err != nil {
			return fmt.Errorf("%s: starting source: %w", c, err)
		}
		c.mu.Lock()
		c.started = append(c.started, src)
		c.mu.Unlock()
	}
	return nil
}

func (c *controller) waitForSync(ctx context.Context, sources []Source) error {
	syncCtx, cancel := context.WithTimeoutCause(ctx, c.opts.CacheSyncTimeout,
		fmt.Errorf("sources did not sync within CacheSyncTimeout (%s)", c.opts.CacheSyncTimeout))
	defer cancel()
	for _, src := range sources {
		if s, ok := src.(SyncingSource); ok {
			if err := s.WaitForSync(syncCtx); err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
		}
	}
	return nil
}

// stop shuts the queue down, waits for the workers, then stops the sources.
func (c *controller) stop(queue workqueue.TypedRateLimitingInterface[Request], workers *sync.WaitGroup) {
	queue.ShutDown()
	workers.Wait()
	c.lifecycleMu.Lock()
	defer c.lifecycleMu.Unlock()
	c.mu.Lock()
	c.state = stateStopped
	started := c.started
	c.mu.Unlock()
	for _, src := range started {
		if s, ok := src.(stopper); ok {
			s.stop()
		}
	}
}

// processNext handles one item; it returns false once the queue shut down.
func (c *controller) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[Request], s *slot) bool {
	req, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer func() {
		queue.Done(req)
		c.feedReplay(c.events, true)
	}()
	c.handle(ctx, queue, s, req)
	return true
}

// handle reconciles req if its partition is still active, and maps the
// outcome to exactly one queue action and one reconcile_total result.
func (c *controller) handle(ctx context.Context, queue workqueue.TypedRateLimitingInterface[Request], s *slot, req Request) {
	p := c.parts.Of(req.Namespace, req.Name)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The slot is filled before Enter: Revoke sets the partition's revoked
	// bit before it scans slots, so any reconcile that got in (Enter
	// succeeded before the bit) is already visible to that scan.
	s.hold(p, cancel)
	defer s.release()
	if !c.gate.Enter(p) {
		// Revoked after the request was admitted: drop it. The new owner
		// replays it on activation.
		queue.Forget(req)
		c.metrics.Inactive.Inc()
		return
	}
	c.metrics.Inflight.Inc()
	defer func() {
		c.gate.Exit(p)
		c.metrics.Inflight.Dec()
	}()

	// The last moment before the reconcile starts: after a pause the
	// partition may still look active here while a peer, having judged
	// this replica's Lease expired, reconciles it. Nothing starts until
	// the lease is re-validated; the request waits in the queue (dropped
	// when dequeued if the fence revokes its partition meanwhile). The
	// context carries the validity so the manager's clients can refuse
	// the reconcile's writes once it passes or a fence breaks it; it is
	// no deadline, because renewals keep extending it: a healthy replica's
	// long reconcile must not be cut off. A fence cancels the context.
	if c.opts.LeaseValidity != nil {
		if v := c.opts.LeaseValidity(); !v.ValidAt(time.Now()) {
			c.metrics.Refused.Inc()
			queue.AddRateLimited(req)
			c.log.V(1).Info("Not reconciling: the lease validity has passed", "namespace", req.Namespace, "name", req.Name, "validUntil", v.Until)
			return
		}
		rctx = WithLeaseValidity(rctx, c.opts.LeaseValidity)
	}

	if c.opts.ReconcileTimeout > 0 {
		var cancelTimeout context.CancelFunc
		rctx, cancelTimeout = context.WithTimeout(rctx, c.opts.ReconcileTimeout)
		defer cancelTimeout()
	}
	id := uuid.NewUUID()
	log := c.log.WithValues("namespace", req.Namespace, "name", req.Name, "reconcileID", id)
	rctx = logr.NewContext(rctx, log)
	rctx = context.WithValue(rctx, reconcileIDKey{}, id)

	c.metrics.ActiveWorkers.Inc()
	start := time.Now()
	res, err := c.reconcile(rctx, req)
	c.metrics.ReconcileTime.Observe(time.Since(start).Seconds())
	c.metrics.ActiveWorkers.Dec()

	switch {
	case err != nil:
		c.metrics.Error.Inc()
		c.metrics.Errors.Inc()
		if !res.IsZero() {
			log.Info("Warning: Reconciler returned both a non-zero result and an error; the result is ignored")
		}
		if IsTerminal(err) {
			c.metrics.TerminalErrors.Inc()
			queue.Forget(req)
			log.Error(err, "Reconciler error; terminal, not retried")
			return
		}
		queue.AddRateLimited(req)
		log.Error(err, "Reconciler error")
	case res.RequeueAfter > 0:
		queue.Forget(req)
		queue.AddAfter(req, res.RequeueAfter)
		c.metrics.RequeueAfter.Inc()
	case res.Requeue:
		queue.AddRateLimited(req)
		c.metrics.Requeue.Inc()
	default:
		queue.Forget(req)
		c.metrics.Success.Inc()
	}
}

// reconcile calls the Reconciler, turning a panic into an error when
// RecoverPanic is set (and counting it either way).
func (c *controller) reconcile(ctx context.Context, req Request) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.metrics.Panics.Inc()
			if !c.recoverPanic {
				panic(r)
			}
			LoggerFrom(ctx).Error(nil, "Observed a panic in reconciler", "panic", r, "stacktrace", string(debug.Stack()))
			res, err = Result{}, fmt.Errorf("panic: %v [recovered]", r)
		}
	}()
	return c.do.Reconcile(ctx, req)
}
