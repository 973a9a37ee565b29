package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/controller/internal/metrics"
	"github.com/kshard/kshard/shard"
)

// Runnable is anything a manager starts and stops with its context. It
// aliases an interface literal so a manager can declare the same alias and
// its Add(Runnable) satisfies Manager.
type Runnable = interface {
	Start(ctx context.Context) error
}

// Controller reconciles the Requests its sources produce, for the keys of
// its active partitions only. Its Admit, Replay and Revoke are the
// participant contract of the ring coordinator (shard/ring.Participant),
// which drives them directly.
type Controller interface {
	// Name is the controller's unique name (metrics label "controller").
	Name() string

	// Watch adds a source. Sources added before Start start with it; after
	// Start, at once.
	Watch(src Source) error

	// Start runs the controller until ctx ends: it starts the sources,
	// waits for them to sync, starts the workers, and on ctx's end stops
	// the workers (cancelling running reconciles) and the sources, and
	// waits for them. It may be called once.
	Start(ctx context.Context) error

	// WaitForSync returns nil once Start has synced every source and
	// started the workers, or ctx's error if ctx ends first. The manager
	// joins the ring only after its controllers synced, so a replica never
	// owns partitions it cannot yet see.
	WaitForSync(ctx context.Context) error

	// Activate admits the partitions of set and replays every
	// ReplayableSource's cached objects, enqueueing each request of a newly
	// activated partition once. Activating an active partition is a no-op.
	// It is Admit followed by Replay of every partition pending replay.
	Activate(ctx context.Context, set shard.PartitionSet) error

	// Admit is the first half of Activate: it opens the gate for the
	// partitions of set and returns at once, doing no per-object work. From
	// its return on, their requests are admitted and reconciled; the
	// partitions it newly admitted are pending replay until a Replay that
	// covers them completes. Admitting an active partition is a no-op. A
	// sharding manager admits on its ring loop, in order with Revoke, and
	// replays off that loop, so a long replay never delays a fence.
	Admit(ctx context.Context, set shard.PartitionSet) error

	// Replay is the second half of Activate: it replays every
	// ReplayableSource's cached objects, enqueueing once each request that
	// falls in a partition of set pending replay. Partitions revoked before
	// or during the replay get none of their requests admitted (the gate
	// refuses them, as it refuses live events). Replays run one at a time.
	// If Replay fails (ctx ended, a source failed), the partitions it was
	// replaying stay pending and a later Replay or Activate replays them
	// again; one revoked and admitted again meanwhile is pending afresh.
	Replay(ctx context.Context, set shard.PartitionSet) error

	// Revoke stops admitting the partitions of set, drops their queued
	// requests when dequeued, cancels their in-flight reconciles after
	// Options.DrainGracePeriod (at once when fence: the replica's Lease is
	// about to be voided), and returns nil only once none of them is in
	// flight. It reports (log, kshard_drain_overdue_total) a drain longer
	// than DrainReportAfter and keeps waiting. If ctx ends first it returns
	// an error; the partitions stay revoked and draining.
	Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error

	// ActivePartitions returns the partitions currently admitted.
	ActivePartitions() shard.PartitionSet

	// InFlight is the number of reconciles running now.
	InFlight() int
}

// New returns a controller named name that calls r. It validates opts and
// claims name in opts.Registerer (unless SkipNameValidation).
func New(name string, r Reconciler, opts Options) (Controller, error) {
	if name == "" {
		return nil, errors.New("controller: name is empty; give every controller a unique name")
	}
	if r == nil {
		return nil, fmt.Errorf("controller %q: reconciler is nil; pass your Reconciler", name)
	}
	if f, ok := r.(ReconcilerFunc); ok && f == nil {
		return nil, fmt.Errorf("controller %q: reconciler is a nil ReconcilerFunc; pass a function", name)
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("controller %q: invalid options: %w", name, err)
	}
	families, err := metrics.Register(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("controller %q: registering metrics: %w", name, err)
	}
	if !opts.SkipNameValidation && !families.Claim(name) {
		return nil, fmt.Errorf("controller %q: a controller with this name already reports to the same metrics Registerer; give it another name (Named), or set SkipNameValidation", name)
	}
	return newController(name, r, opts, families), nil
}

func newController(name string, r Reconciler, opts Options, families *metrics.Families) *controller {
	parts := gate.NewPartitions(opts.Partitioner)
	c := &controller{
		name:         name,
		do:           r,
		opts:         opts,
		recoverPanic: *opts.RecoverPanic,
		log:          opts.Logger.WithValues("controller", name),
		parts:        parts,
		gate:         gate.New(parts.Count(), !opts.StartInactive),
		families:     families,
		metrics:      families.For(name),
		slots:        make([]slot, opts.MaxConcurrentReconciles),
		synced:       make(chan struct{}),
	}
	for i := range c.slots {
		c.slots[i].partition = -1
	}
	c.pendingReplay = shard.NewPartitionSet(parts.Count())
	c.backlog.report = func(left int) { c.metrics.ReplayBacklog.Set(float64(left)) }
	return c
}
