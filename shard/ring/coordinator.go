package ring

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/ringhealth"
	"github.com/kshard/kshard/shard"
)

// coordinator is the I/O shell around the pure handoff core: it feeds the
// core what the Lease member observes, carries out each Ready (Lease writes,
// activations, drains, confirming reads), and feeds back the results. All
// core calls happen on the run goroutine; asynchronous work reports back
// through events, so the core needs no lock.
type coordinator struct {
	core         *handoff.Core
	member       memberLeases
	log          logr.Logger
	participants []Participant
	metrics      *ringMetrics
	timing       shard.Timing // defaulted
	exit         func(code int)

	events  chan func()   // results of asynchronous work, applied in run
	leaveCh chan struct{} // closed by leave
	leaveMu sync.Once
	async   sync.WaitGroup // drains, confirms and deletes in flight

	ready atomic.Bool
	// notReady says why the replica is not ready, for /readyz.
	notReady  atomic.Pointer[string]
	lastRenew time.Time
	// condition is the core's condition (Core.Err) last logged, as
	// conditionKey has it, since conditionSince; escalated: the identity
	// held by another incarnation has been logged as an error too.
	condition      string
	conditionSince time.Time
	escalated      bool
	synced         bool // caches synced; read and written on the run goroutine
	// validity is what controllers and the client transport check; see
	// publishValidity. Written on the run goroutine, read anywhere.
	validity atomic.Pointer[shard.Validity]
	// targetSince records when each partition entered the target, for
	// kshard_handoff_seconds.
	targetSince map[int]time.Time
	prevTarget  shard.PartitionSet
	// drainSince and handoverSince record when each partition began to
	// drain or to be handed over, for kshard_ring_oldest_pending_seconds.
	drainSince    map[int]time.Time
	handoverSince map[int]time.Time
	// ringCfg is the ring's configuration (handoff.Config.Ring) and
	// fingerprint its Fingerprint, to read the ring's health from the
	// Leases in view (observeHealth); a zero ringCfg (the simulation's
	// bare coordinators) leaves the health gauges at 0.
	ringCfg     shard.Config
	fingerprint string
	// replays runs activation replays off the loop; see replay.go.
	replays replays
	// prover reads pods for proofs of death (proof.go); nil when this
	// replica cannot read them.
	prover *prover
	// cache is the sharded cache (Options.Cache), nil for a
	// full one; held is the last set handed to its Hold.
	cache PartitionCache
	held  shard.PartitionSet
	// balanced: the ring places partitions by object counts
	// (shard.Config.Balance), which countObjects feeds the core.
	balanced bool
	// cacheRead is when partitionsSynced last read the cache and
	// cacheSynced what it read; pendingLog and pendingLogged rate-limit
	// the V(1) line explaining claimed partitions that are not active
	// (logPending). Read and written on the run goroutine.
	cacheRead     time.Time
	cacheSynced   shard.PartitionSet
	pendingLog    string
	pendingLogged time.Time
	// scanReported: the member's join scan came out clean and the core
	// knows (JoinScanClean); finalizing: a Finalize is in flight.
	scanReported bool
	finalizing   bool

	// Seams for the deterministic simulation (internal/handoffsim), which
	// steps the coordinator on its own schedule: now reads the clock the
	// core decides on; goAsync runs the work that waits on I/O (drains,
	// confirming reads, deletes); postFn hands that work's results to the
	// loop. Production: time.Now, goroutines owned by async, and the events
	// channel drained by run. Asynchronous work must go through goAsync and
	// report through post, never a bare go statement: the simulation runs
	// the coordinator on one goroutine at a time and would race with it.
	now     func() time.Time
	goAsync func(ctx context.Context, f func(context.Context))
	postFn  func(ctx context.Context, f func())
}

func newCoordinatorWith(core *handoff.Core, member memberLeases, participants []Participant, metrics *ringMetrics,
	log logr.Logger, timing shard.Timing, exit func(int)) *coordinator {
	c := &coordinator{
		core: core, member: member, log: log, participants: participants,
		metrics: metrics, timing: timing.WithDefaults(), exit: exit,
		events:        make(chan func(), 64),
		leaveCh:       make(chan struct{}),
		targetSince:   map[int]time.Time{},
		drainSince:    map[int]time.Time{},
		handoverSince: map[int]time.Time{},
		now:           time.Now,
	}
	c.goAsync = func(ctx context.Context, f func(context.Context)) {
		c.async.Add(1)
		go func() {
			defer c.async.Done()
			f(ctx)
		}()
	}
	c.postFn = func(ctx context.Context, f func()) {
		select {
		case c.events <- f:
		case <-ctx.Done():
		}
	}
	return c
}

// leave asks the run loop for a graceful leave.
func (c *coordinator) leave() { c.leaveMu.Do(func() { close(c.leaveCh) }) }

// post hands an event to the run loop unless it has stopped.
func (c *coordinator) post(ctx context.Context, f func()) { c.postFn(ctx, f) }

// cachesSynced feeds the core that the controllers' caches have synced.
// Call it on the loop.
func (c *coordinator) cachesSynced() { c.core.CachesSynced(); c.synced = true }

// partitionsSynced feeds the core what the sharded cache has synced. Call
// it on the loop.
func (c *coordinator) partitionsSynced() {
	synced := c.cache.SyncedPartitions()
	c.cacheRead, c.cacheSynced = c.now(), synced
	c.core.PartitionsSynced(synced)
}

// hold hands the partitions the core needs to the sharded cache when they
// changed (Ready.Hold, given in full every time).
func (c *coordinator) hold(set shard.PartitionSet) {
	if c.cache == nil || set.Size() == 0 || set.Equal(c.held) {
		return
	}
	c.held = set.Clone()
	c.cache.Hold(set)
	// Partitions the cache synced before they were held again (a release
	// and a regain in quick succession) count at once.
	c.partitionsSynced()
}

// watchCache has the loop read the cache's synced partitions
// (partitionsSynced) whenever they may have changed, until ctx ends.
//
// Each read is posted only after the channel of the next change has been
// taken: the loop reads whenever it gets to it, so a change that lands
// after that read closes the channel taken before it. Taken after posting
// (as the watcher once did), the channel of a closed-and-replaced Changed
// (shard/cache's Cache) could already be the one after a change that
// landed between the loop's read and the watcher's next Changed: if it was
// the cache's last change (a kind's unlabelled view or segment synced, and
// the ring still), its partitions stayed unsynced for the core, and the
// replica claimed them and never activated them (issue 41's stall). The
// first read covers changes before the watcher took its first channel.
func (c *coordinator) watchCache(ctx context.Context) {
	changed := c.cache.Changed()
	c.post(ctx, c.partitionsSynced)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = c.cache.Changed()
		c.post(ctx, c.partitionsSynced)
	}
}

// Object counts for a balanced ring are taken off the loop, since they walk
// every cached object: countCheck apart while the synced partitions change
// (a partition just synced is placed by its count soon after), and
// countEvery apart otherwise, for objects created and deleted meanwhile.
// The weights published change only when a count moves by about 20 %, so
// a slower count delays a rebalance, never a handoff.
const (
	countCheck = time.Second
	countEvery = 30 * time.Second
)

// countObjects feeds the core the cache's object counts per partition until
// ctx ends. The synced partitions are read before counting, so that each
// of them is counted whole.
func (c *coordinator) countObjects(ctx context.Context, counter objectCounter) {
	ticker := time.NewTicker(countCheck)
	defer ticker.Stop()
	var last shard.PartitionSet
	var lastAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		synced := c.cache.SyncedPartitions()
		if synced.Equal(last) && time.Since(lastAt) < countEvery {
			continue
		}
		counts := counter.ObjectsPerPartition()
		last, lastAt = synced, time.Now()
		c.post(ctx, func() { c.core.ObjectsCounted(synced, counts) })
	}
}

// beginLeave starts a graceful leave. Call it on the loop.
func (c *coordinator) beginLeave() {
	c.ready.Store(false)
	c.core.Leave()
}

// safetyPoll bounds how long the loop sleeps without input, so a missed
// signal can delay a decision but never stall it.
const safetyPoll = time.Second

// run drives the core until it is done (left, duplicate identity, or must
// exit) or ctx ends. synced reports when every cache the controllers need
// has synced.
func (c *coordinator) run(ctx context.Context, synced func(context.Context) bool) error {
	defer c.async.Wait()
	defer c.startReplays(ctx)()
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		if synced(ctx) {
			c.post(ctx, c.cachesSynced)
		}
	}()
	if c.cache != nil {
		// The watcher ends with run, not with ctx: after a graceful leave
		// run returns while ctx still runs, and waits for its goroutines.
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch() // before the deferred async.Wait
		c.async.Add(1)
		go func() {
			defer c.async.Done()
			c.watchCache(watchCtx)
		}()
		if counter, ok := c.cache.(objectCounter); ok && c.balanced {
			c.async.Add(1)
			go func() {
				defer c.async.Done()
				c.countObjects(watchCtx, counter)
			}()
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	leaveCh := c.leaveCh
	for {
		c.step(ctx)
		if c.core.Done() {
			c.ready.Store(false)
			if c.core.Returning() {
				c.log.Info("left the ring keeping this identity's place for its next process (KeepPlaceOnLeave): its partitions wait for it, at most LeaseDuration", "leaseDuration", c.timing.LeaseDuration)
			}
			// Only a duplicate identity ends the core by itself; any other
			// condition still reported (a foreign configuration, say) was
			// logged and is moot once the replica has left.
			if err := c.core.Err(); errors.Is(err, handoff.ErrDuplicateIdentity) {
				return err
			}
			return nil
		}
		wait := safetyPoll
		if next, ok := c.core.NextDeadline(); ok {
			wait = min(wait, max(time.Until(next), time.Millisecond))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			c.ready.Store(false)
			return nil
		case <-c.member.Changes():
		case f := <-c.events:
			f()
		case <-leaveCh:
			leaveCh = nil
			c.beginLeave()
		case <-timer.C:
		}
	}
}

// step feeds the latest observations to the core and carries out its Ready.
func (c *coordinator) step(ctx context.Context) {
	start := time.Now()
	defer func() { c.metrics.step.Observe(time.Since(start).Seconds()) }()
	now := c.now()
	// The core observes from the first list on, before the own Lease is
	// held: it decides whether an earlier incarnation's Lease may be taken
	// over.
	if c.member.Listed() {
		view := c.member.Snapshot()
		c.core.Observe(now, observedLeases(view, c.member.Departed()))
		c.observeHealth(now, view)
		if !c.scanReported && c.member.JoinScanClean() {
			c.scanReported = true
			c.core.JoinScanClean()
		}
	}
	if sent, ok := c.member.LastRenew(); ok && sent.After(c.lastRenew) {
		c.lastRenew = sent
		c.core.RenewSucceeded(sent)
	}
	rd := c.core.Ready(now)
	c.apply(ctx, rd)
	c.publishValidity()
	c.observeState(now)
}

// publishValidity publishes the lease validity the core decided in this
// step (handoff.Core.Validity), which workers check before each reconcile
// and the client transport before each write of one.
func (c *coordinator) publishValidity() {
	v := c.core.Validity()
	c.validity.Store(&v)
}

// leaseValidity returns the validity publishValidity last recorded.
func (c *coordinator) leaseValidity() shard.Validity {
	if v := c.validity.Load(); v != nil {
		return *v
	}
	return shard.Validity{}
}

func (c *coordinator) apply(ctx context.Context, rd handoff.Ready) {
	if rd.Exit {
		c.log.Error(nil, "reconciles of a fenced replica are still running at the stop deadline; exiting so they cannot outlive this replica's Lease")
		c.exit(1)
		return
	}
	if rd.Fence {
		c.metrics.fences.Inc()
		c.ready.Store(false)
		if c.core.OwnLeaseLost() {
			c.log.Error(nil, "own Lease deleted, relabelled or damaged by someone else: stopping every reconcile (fenced); repairing it and rejoining")
		} else {
			c.log.Error(nil, "Lease not renewed within RenewDeadline: stopping every reconcile (fenced); rejoining once renewals succeed", "renewDeadline", c.timing.RenewDeadline)
		}
		// rd.Revoke holds the partitions already draining too: revoked
		// again with no grace period; their first revoke reports when it
		// returns.
		c.revoke(ctx, rd.Revoke, true)
	} else if !rd.Revoke.IsEmpty() {
		c.log.Info("revoking partitions", "partitions", rd.Revoke.String())
		c.revoke(ctx, rd.Revoke, false)
	}
	if rd.TakeOver != nil {
		c.member.TakeOver(rd.TakeOver.Version)
	}
	if rd.Publish != nil {
		c.member.SetDesired(*rd.Publish)
	}
	// Gained partitions start listing now, while their old owner drains.
	c.hold(rd.Hold)
	// What was carried out is acknowledged; the core asks again for the
	// rest in its next Ready. An activation is acknowledged when its
	// replay, off the loop, reports back (replayDone).
	ack := rd
	ack.Activate = shard.PartitionSet{}
	if !rd.Activate.IsEmpty() {
		c.activate(ctx, rd.Activate)
	}
	for _, ref := range rd.Confirm {
		c.confirm(ctx, ref)
	}
	for _, ref := range rd.GarbageCollect {
		c.collect(ctx, ref)
	}
	if c.prover != nil {
		c.prover.ask(ctx, c, rd.ProveDeath)
	}
	if rd.Finalize != nil {
		c.finalize(ctx, *rd.Finalize)
	}
	if rd.DeleteLease {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.member.Delete(dctx); err != nil {
			c.log.Error(err, "deleting own Lease after leaving; peers will collect it after it expires")
		} else {
			c.log.Info("left the ring: Lease deleted")
		}
	}
	c.core.Advance(ack)
	if a, ok := c.cache.(activeObserver); ok {
		a.SetActive(c.core.Active())
	}
}

// revoke drains set in every participant, in parallel, and reports Drained
// only if all of them returned: a failed drain leaves the partitions
// claimed, which is what keeps them safe.
func (c *coordinator) revoke(ctx context.Context, set shard.PartitionSet, fence bool) {
	if set.IsEmpty() {
		return
	}
	c.replayRevoked(set)
	set = set.Clone()
	drained := func() {
		c.log.V(1).Info("drained", "partitions", set.String())
		c.post(ctx, func() { c.core.Drained(set) })
	}
	if len(c.participants) == 0 {
		c.goAsync(ctx, func(context.Context) { drained() })
		return
	}
	// One task per participant; the last one to return reports.
	var (
		mu        sync.Mutex
		remaining = len(c.participants)
		errs      = make([]error, len(c.participants))
	)
	for i, p := range c.participants {
		c.goAsync(ctx, func(ctx context.Context) {
			err := p.Revoke(ctx, set, fence)
			mu.Lock()
			errs[i] = err
			remaining--
			last := remaining == 0
			mu.Unlock()
			if !last {
				return
			}
			if err := errors.Join(errs...); err != nil {
				if ctx.Err() == nil {
					c.log.Error(err, "drain did not complete; partitions stay claimed", "partitions", set.String())
				}
				return
			}
			drained()
		})
	}
}

func (c *coordinator) confirm(ctx context.Context, ref handoff.LeaseRef) {
	c.goAsync(ctx, func(ctx context.Context) {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		read, err := c.member.ReadPeer(gctx, ref)
		if err != nil {
			c.log.V(1).Info("confirming a peer's expiry failed; will retry", "peer", ref.Identity, "error", err.Error())
			c.post(ctx, func() { c.core.ConfirmFailed(ref.Identity) })
			return
		}
		// The core judges the read (handoff.JudgeConfirm): a Lease gone is
		// a tombstone for another LeaseDuration, not a death.
		c.post(ctx, func() { c.core.Confirmed(ref.Identity, read.Version, read.Found) })
	})
}

func (c *coordinator) collect(ctx context.Context, ref handoff.LeaseRef) {
	c.goAsync(ctx, func(ctx context.Context) {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.member.DeletePeer(gctx, ref.Identity, ref.Version); err != nil {
			c.log.V(1).Info("garbage-collecting an expired Lease", "peer", ref.Identity, "error", err.Error())
		} else {
			c.log.Info("garbage-collected a long-expired Lease", "peer", ref.Identity)
		}
	})
}

// finalize lets the deletion of the own Lease by someone else complete, now
// that nothing of this replica runs (handoff.Ready.Finalize). One at a time:
// the core asks again in every Ready until the Lease is gone.
func (c *coordinator) finalize(ctx context.Context, ref handoff.LeaseRef) {
	if c.finalizing {
		return
	}
	c.finalizing = true
	c.goAsync(ctx, func(ctx context.Context) {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := c.member.Finalize(fctx, ref.Version)
		if err != nil {
			c.log.Error(err, "removing the finalizer of the own Lease, which someone deleted; will retry", "version", ref.Version)
		} else {
			c.log.Info("own Lease was deleted by someone else: nothing of this replica runs any more, so its finalizer is removed; it will be created afresh", "version", ref.Version)
		}
		c.post(ctx, func() { c.finalizing = false })
	})
}

// observeState updates readiness, metrics and logs after a step.
func (c *coordinator) observeState(now time.Time) {
	core := c.core
	target := core.Target()
	if !target.Equal(c.prevTarget) {
		if c.prevTarget.Size() != 0 {
			c.metrics.rebalances.Inc()
		}
		for _, p := range target.Difference(c.prevTarget).Slice() {
			c.targetSince[p] = now
		}
		for _, p := range c.prevTarget.Difference(target).Slice() {
			delete(c.targetSince, p)
		}
		c.log.Info("ring changed", "members", core.View(), "target", target.Len(), "claimed", core.Claim().Len(), "active", core.Active().Len())
		c.prevTarget = target
	}
	joined := core.State() == handoff.StateActive && !core.Fenced() && !core.Done()
	c.ready.Store(joined)
	c.setNotReady(notReadyReason(core, c.synced, c.member.Synced()))
	ready := 0.0
	if joined {
		ready = 1
	}
	c.metrics.ready.Set(ready)
	c.metrics.members.Set(float64(len(core.View())))
	c.metrics.weighed.Set(float64(core.ViewWeights().Known()))
	c.metrics.setPartitions("target", target)
	c.metrics.setPartitions("claimed", core.Claim())
	c.metrics.setPartitions("active", core.Active())
	c.metrics.setPartitions("draining", core.Draining())
	c.metrics.setPartitions("blocked", core.Blocked())
	c.metrics.setPartitions("handing_over", core.HandingOver())
	if c.cache != nil {
		c.metrics.setPartitions("caching", core.CacheWaiting())
	}
	c.observePending(now, target, core.Active(), core.Draining(), core.HandingOver())
	c.logPending(now, target)
	c.reportCondition(core.Err(), now)
}

// Bounds of logPending's rate: a new explanation at most every
// pendingLogMin, the same one again every pendingLogEvery while it lasts.
const (
	pendingLogMin   = time.Second
	pendingLogEvery = 10 * time.Second
)

// logPending explains at V(1) why partitions of the target are not active
// yet: waiting for the sharded cache to sync them (with what the cache
// last reported and when), claimed by a peer still (blocked), draining
// here, or waiting for the own Lease to show the claim or for the replica
// to join. It logs when the explanation changes and again every
// pendingLogEvery while partitions stay pending, so a replica that claims
// partitions and never activates them says why. It decides nothing.
func (c *coordinator) logPending(now time.Time, target shard.PartitionSet) {
	core := c.core
	pending := target.Difference(core.Active())
	if pending.IsEmpty() {
		if c.pendingLog != "" {
			c.pendingLog = ""
			c.log.V(1).Info("every partition of the target is active", "target", target.Len())
		}
		return
	}
	caching := core.CacheWaiting().Intersect(pending)
	blocked := core.Blocked().Intersect(pending)
	draining := core.Draining().Intersect(pending)
	other := pending.Difference(caching).Difference(blocked).Difference(draining)
	key := fmt.Sprintf("%d/%d/%d/%d/%s", caching.Len(), blocked.Len(), draining.Len(), other.Len(), core.State())
	if key == c.pendingLog && now.Sub(c.pendingLogged) < pendingLogEvery || now.Sub(c.pendingLogged) < pendingLogMin {
		return
	}
	c.pendingLog, c.pendingLogged = key, now
	kv := []any{"state", string(core.State()), "target", target.Len(), "claimed", core.Claim().Len(), "active", core.Active().Len(),
		"waitingForCache", caching.Len(), "blockedByPeer", blocked.Len(), "draining", draining.Len(), "waitingToClaimOrJoin", other.Len()}
	if c.cache != nil {
		read := "never"
		if !c.cacheRead.IsZero() {
			read = now.Sub(c.cacheRead).Round(time.Millisecond).String() + " ago"
		}
		kv = append(kv, "cacheSyncedAtLastRead", c.cacheSynced.Intersect(target).Len(), "cacheLastRead", read)
		if !caching.IsEmpty() {
			kv = append(kv, "waitingForCacheExample", caching.Slice()[0])
		}
	}
	c.log.V(1).Info("partitions of the target not active yet", kv...)
}

// observeHealth sets the ring's health gauges from the Leases in this
// replica's view, by the rules `kshard status` counts with
// (ringhealth.ViewHealth): no read of its own. A Lease is live as the
// core judges peers: changed within LeaseDuration of this replica's clock.
func (c *coordinator) observeHealth(now time.Time, view []membership.Observed) {
	if c.ringCfg.Partitions == 0 {
		return
	}
	live := func(l membership.Observed) bool {
		return !l.LastChange.IsZero() && !handoff.Expired(now.Sub(l.LastChange), c.timing.LeaseDuration)
	}
	c.metrics.setHealth(ringhealth.ViewHealth(c.fingerprint, c.ringCfg.Partitions, view, live))
}

// observePending sets kshard_ring_oldest_pending_seconds: the age of the
// oldest partition of the target not active yet (targetSince), of the
// oldest drain and of the oldest handover.
func (c *coordinator) observePending(now time.Time, target, active, draining, handingOver shard.PartitionSet) {
	oldest := func(set shard.PartitionSet, since map[int]time.Time) float64 {
		age := 0.0
		for p := range set.All() {
			if t, ok := since[p]; ok {
				age = max(age, now.Sub(t).Seconds())
			}
		}
		return age
	}
	track(now, draining, c.drainSince)
	track(now, handingOver, c.handoverSince)
	c.metrics.oldest.WithLabelValues(phaseTakeover).Set(oldest(target.Difference(active), c.targetSince))
	c.metrics.oldest.WithLabelValues(phaseDrain).Set(oldest(draining, c.drainSince))
	c.metrics.oldest.WithLabelValues(phaseHandover).Set(oldest(handingOver, c.handoverSince))
}

// track makes since hold, for each partition of set, when it was first
// seen there in a row of steps.
func track(now time.Time, set shard.PartitionSet, since map[int]time.Time) {
	for p := range since {
		if !set.Has(p) {
			delete(since, p)
		}
	}
	for p := range set.All() {
		if _, ok := since[p]; !ok {
			since[p] = now
		}
	}
}

// reportCondition logs the core's condition once when it begins. Waiting
// for an earlier incarnation's Lease to expire is expected after a restart
// (its message counts the seconds, so it is told apart by its kind) and is
// logged at info; it becomes an error once it has lasted twice
// LeaseDuration, when the other incarnation must still be renewing. Any
// other condition is an error.
func (c *coordinator) reportCondition(err error, now time.Time) {
	inUse := errors.Is(err, handoff.ErrIdentityInUse)
	key := ""
	switch {
	case inUse:
		key = handoff.ErrIdentityInUse.Error()
	case err != nil:
		key = err.Error()
	}
	if key != c.condition {
		c.condition, c.conditionSince, c.escalated = key, now, false
		switch {
		case inUse:
			c.log.Info("waiting to take this replica's Lease over from an earlier incarnation (a restart): it must expire, or the kubelet prove the earlier process dead, first", "condition", err.Error())
		case err != nil:
			c.log.Error(err, "ring condition")
		}
		return
	}
	if inUse && !c.escalated && now.Sub(c.conditionSince) >= 2*c.timing.LeaseDuration {
		c.escalated = true
		c.log.Error(err, "this replica's Lease is still renewed by another incarnation after twice LeaseDuration: is a second process running with the same identity? This replica does not join until it stops")
	}
}

// notReadyReason explains, for /readyz, what keeps the replica from being a
// working ring member; "" when it is one.
func notReadyReason(core *handoff.Core, cachesSynced, leasesSynced bool) string {
	switch {
	case core.Err() != nil:
		return core.Err().Error()
	case core.Done():
		return "left the ring"
	case core.Fenced():
		return "fenced: the Lease was not renewed within RenewDeadline (API server unreachable?); reconciles stopped until it is"
	case core.State() == handoff.StateActive:
		return ""
	case !leasesSynced:
		return "waiting to list the ring's Leases (is the API server reachable?)"
	case !cachesSynced:
		return "waiting for the controllers' caches to sync"
	default:
		return "joining the ring (state " + string(core.State()) + ")"
	}
}

func (c *coordinator) setNotReady(reason string) { c.notReady.Store(&reason) }

// observedLeases hands the Lease member's parsed view, and the Leases that
// left it (one per object, those of a name in the order they left, as the
// core needs them), to the core, which decides what they mean.
func observedLeases(view, departed []membership.Observed) []handoff.Observed {
	out := make([]handoff.Observed, 0, len(view)+len(departed))
	for _, l := range view {
		out = append(out, l.Observed)
	}
	for _, l := range departed {
		out = append(out, l.Observed)
	}
	return out
}
