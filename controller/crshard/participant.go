package crshard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ring"
)

// participant is the Ring as the one participant of its coordinator
// (ring.Participant) for all its controllers and singletons: one gate, so a
// partition drains when none of them runs it. It is a type of its own so
// that the Ring's API does not offer users the coordinator's calls.
type participant struct{ r *Ring }

var _ ring.Participant = participant{}

func (p participant) Admit(ctx context.Context, set shard.PartitionSet) error {
	return p.r.admit(ctx, set)
}

func (p participant) Replay(ctx context.Context, set shard.PartitionSet) error {
	return p.r.replay(ctx, set)
}

func (p participant) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	return p.r.revoke(ctx, set, fence)
}

// admit opens the gate for set: from now on its requests are admitted and
// its reconciles may start. It does no I/O (the coordinator calls it on
// its loop, ordered with revoke).
func (r *Ring) admit(_ context.Context, set shard.PartitionSet) error {
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

// replay enqueues, into every opted-in controller's queue, the requests of
// set's partitions (still active) that its sources would produce for the
// cached objects (its For keys, what its Watches handlers map to), at low
// priority when the queue is controller-runtime's priority queue: their
// previous owner may have dropped their events. A controller whose queue
// does not exist yet is skipped: its sources deliver the whole cache when
// they start.
func (r *Ring) replay(ctx context.Context, set shard.PartitionSet) error {
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

// revoke closes the gate for set, cancels the contexts of its reconciles
// (after DrainGracePeriod, at once when fence) and returns nil only when
// none of them runs any more.
func (r *Ring) revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
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
	// The gate closes first, so that no singleton starts again; Drain
	// closes it again, harmlessly.
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
	grace := r.opts.DrainGracePeriod
	if fence {
		grace = 0
	}
	err := r.gate.Drain(ctx, parts, gate.DrainOptions{
		Grace:  grace,
		Cancel: func() { r.running.cancel(set, r.gate.Active) },
		Overdue: func(inFlight int, waited time.Duration, first bool) {
			if first {
				for _, name := range r.running.controllers(set) {
					r.metrics.drainOverdue.WithLabelValues(name).Inc()
				}
			}
			r.log.Info("drain is taking long; still waiting: a partition is not released while a reconcile of it runs",
				"partitions", len(parts), "inFlight", inFlight, "waited", waited.Round(time.Millisecond))
		},
	})
	if err != nil {
		return fmt.Errorf("crshard: Revoke: %w", err)
	}
	for _, s := range ss {
		if err := s.wait(ctx); err != nil {
			return err
		}
	}
	return nil
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
	// controller names the controller the reconcile is of, for
	// kshard_drain_overdue_total{controller}.
	controller string
	cancel     context.CancelFunc
}

func (rn *running) init() { rn.byPart = map[int]map[*flight]struct{}{} }

func (rn *running) hold(p int, controller string, cancel context.CancelFunc) *flight {
	f := &flight{partition: p, controller: controller, cancel: cancel}
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

// controllers returns, sorted, the names of the controllers with a
// reconcile of a partition of set in flight.
func (rn *running) controllers(set shard.PartitionSet) []string {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	seen := map[string]bool{}
	for p, m := range rn.byPart {
		if !set.Has(p) {
			continue
		}
		for f := range m {
			seen[f.controller] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
