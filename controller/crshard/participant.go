package crshard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kshard/kshard/shard"
)

// drainReportAfter is how long a drain waits before it is reported as
// overdue (it keeps waiting: a partition is never released while one of
// its reconciles runs).
const drainReportAfter = 30 * time.Second

// Admit opens the gate for set: from now on its requests are admitted and
// its reconciles may start. It does no I/O (the coordinator calls it on
// its loop, ordered with Revoke).
func (r *Ring) Admit(_ context.Context, set shard.PartitionSet) error {
	if err := r.checkSet("Admit", set); err != nil {
		return err
	}
	if err := observeRing("activate", set.Slice()); err != nil {
		return err
	}
	for p := range set.All() {
		r.gate.Activate(p)
	}
	r.mu.Lock()
	base, ss := r.base, r.singletons
	r.mu.Unlock()
	for _, s := range ss {
		if base != nil && set.Has(s.partition) && r.gate.Active(s.partition) {
			s.start(base)
		}
	}
	return nil
}

// Replay enqueues, into every opted-in controller's queue, the requests of
// set's partitions (still active) that its sources would produce for the
// cached objects (its For keys, what its Watches handlers map to), at low
// priority when the queue is controller-runtime's priority queue: their
// previous owner may have dropped their events. A controller whose queue
// does not exist yet is skipped: its sources deliver the whole cache when
// they start.
func (r *Ring) Replay(ctx context.Context, set shard.PartitionSet) error {
	if err := r.checkSet("Replay", set); err != nil {
		return err
	}
	r.mu.Lock()
	mgr, ctls := r.mgr, append([]*sharded(nil), r.controllers...)
	r.mu.Unlock()
	if mgr == nil {
		return nil
	}
	for _, c := range ctls {
		if err := c.replay(ctx, mgr.GetCache(), set); err != nil {
			return err
		}
	}
	return nil
}

// Revoke closes the gate for set, cancels the contexts of its reconciles
// (after DrainGracePeriod, at once when fence) and returns nil only when
// none of them runs any more.
func (r *Ring) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if err := r.checkSet("Revoke", set); err != nil {
		return err
	}
	set = set.Clone() // the grace timer may outlive this call and the caller's set
	parts := set.Slice()
	if err := observeRing("revoke", parts); err != nil {
		return err
	}
	if err := r.drain(ctx, set, parts, fence); err != nil {
		return err
	}
	return observeRing("revoked", parts)
}

// drain closes the gate for parts and waits until none of their
// reconciles and singletons runs.
func (r *Ring) drain(ctx context.Context, set shard.PartitionSet, parts []int, fence bool) error {
	for _, p := range parts {
		r.gate.Revoke(p)
	}
	// Singletons stop at once, as kshard's manager stops them.
	r.mu.Lock()
	var ss []*singleton
	for _, s := range r.singletons {
		if set.Has(s.partition) {
			ss = append(ss, s)
		}
	}
	r.mu.Unlock()
	for _, s := range ss {
		s.cancelRun()
	}
	if err := r.drainReconciles(ctx, set, parts, fence); err != nil {
		return err
	}
	for _, s := range ss {
		if err := s.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// drainReconciles waits until no reconcile of parts runs, cancelling them
// after the grace period (at once when fence).
func (r *Ring) drainReconciles(ctx context.Context, set shard.PartitionSet, parts []int, fence bool) error {
	if r.inFlight(parts) == 0 {
		return nil
	}
	start := time.Now()
	cancel := func() { r.running.cancel(set, r.gate.Active) }
	var grace *time.Timer
	if fence || r.opts.DrainGracePeriod == 0 {
		cancel()
	} else {
		// Not stopped when ctx ends first: the partitions stay draining
		// and their reconciles still get cancelled.
		grace = time.AfterFunc(r.opts.DrainGracePeriod, cancel)
	}
	report := time.NewTimer(drainReportAfter)
	defer report.Stop()
	for {
		changed := r.gate.Changed() // before the checks, so no wake-up is missed
		for _, p := range parts {
			if r.gate.Active(p) {
				if grace != nil {
					grace.Stop()
				}
				return fmt.Errorf("crshard: Revoke: partition %d was admitted again while draining; its drain did not complete", p)
			}
		}
		n := r.inFlight(parts)
		if n == 0 {
			if grace != nil {
				grace.Stop()
			}
			return nil
		}
		select {
		case <-changed:
		case <-report.C:
			r.metrics.drainOverdue.Inc()
			r.log.Info("drain is taking long; still waiting: a partition is not released while a reconcile of it runs",
				"partitions", len(parts), "inFlight", n, "waited", time.Since(start).Round(time.Millisecond))
			report.Reset(drainReportAfter)
		case <-ctx.Done():
			return fmt.Errorf("crshard: Revoke: %d reconciles of the revoked partitions still in flight; they stay revoked and draining: %w", n, context.Cause(ctx))
		}
	}
}

func (r *Ring) inFlight(parts []int) int {
	n := 0
	for _, p := range parts {
		n += r.gate.InFlight(p)
	}
	return n
}

func (r *Ring) checkSet(op string, set shard.PartitionSet) error {
	if n := r.parts.Count(); set.Size() != n {
		return fmt.Errorf("crshard: %s: the partition set covers %d partitions but the ring has %d", op, set.Size(), n)
	}
	return nil
}

// running records the cancel function of every reconcile in progress, by
// partition, so that Revoke can cancel those of revoked partitions.
type running struct {
	mu     sync.Mutex
	byPart map[int]map[*flight]struct{}
}

type flight struct {
	partition int
	cancel    context.CancelFunc
}

func (rn *running) init() { rn.byPart = map[int]map[*flight]struct{}{} }

func (rn *running) hold(p int, cancel context.CancelFunc) *flight {
	f := &flight{partition: p, cancel: cancel}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	m := rn.byPart[p]
	if m == nil {
		m = map[*flight]struct{}{}
		rn.byPart[p] = m
	}
	m[f] = struct{}{}
	return f
}

func (rn *running) release(f *flight) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	m := rn.byPart[f.partition]
	delete(m, f)
	if len(m) == 0 {
		delete(rn.byPart, f.partition)
	}
}

// cancel cancels the reconciles of the partitions of set that are still
// revoked (active reports whether one was admitted again).
func (rn *running) cancel(set shard.PartitionSet, active func(int) bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	for p, m := range rn.byPart {
		if !set.Has(p) || active(p) {
			continue
		}
		for f := range m {
			f.cancel()
		}
	}
}
