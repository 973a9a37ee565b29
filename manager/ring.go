package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/handoff"
)

// Membership is what the ring coordinator needs of the ring's Leases: a
// view of them, the own Lease's renewals and writes, and the reads and
// deletes the handoff core asks for. *lease.Member implements it, and so
// does the deterministic simulation's process (internal/handoffsim).
type Membership interface {
	// Listed reports that Snapshot holds the ring (the first list is done),
	// Synced that the own Lease is held as well.
	Listed() bool
	Synced() bool
	// Snapshot returns the ring's Leases in the view; Departed, the Leases
	// that left it, in their last state (lease.Member.Departed).
	Snapshot() []lease.Observed
	Departed() []lease.Observed
	// Changes signals (coalesced) that Snapshot, LastRenew or Synced may
	// have changed.
	Changes() <-chan struct{}
	// LastRenew returns when the last write of the own Lease that counts
	// as a renewal was sent (local clock).
	LastRenew() (sentAt time.Time, ok bool)
	// SetDesired sets the Record the own Lease publishes from now on.
	SetDesired(handoff.Record)
	// TakeOver allows overwriting the own Lease at version once
	// (handoff.Ready.TakeOver).
	TakeOver(version string)
	// Confirm reads identity's Lease directly: unchanged when it still has
	// version, or is gone.
	Confirm(ctx context.Context, identity, version string) (unchanged bool, err error)
	// DeletePeer deletes identity's Lease if it still has version.
	DeletePeer(ctx context.Context, identity, version string) error
	// Delete stops writing the own Lease and deletes it (graceful leave).
	Delete(ctx context.Context) error
	// JoinScanClean reports that, after the first list, a list of every
	// Lease of the namespace found none carrying the member finalizer
	// outside the ring, and that Snapshot holds every ring Lease it
	// listed (handoff.Core.JoinScanClean: the replica may skip its join
	// wait).
	JoinScanClean() bool
	// Finalize removes the member finalizer from the own Lease, which
	// someone else is deleting, if it still has version
	// (handoff.Ready.Finalize); the deletion then completes, and the own
	// Lease is created afresh.
	Finalize(ctx context.Context, version string) error
}

// membership is the name the coordinator's code uses.
type membership = Membership

var _ Membership = (*lease.Member)(nil)

// Participant is a controller (or any part of an operator) that takes part
// in handoff: it reconciles only the partitions it was activated for.
type Participant interface {
	// Admit lets set be worked on from its return on (it opens the gate).
	// The coordinator calls it on its loop, ordered with Revoke, so it must
	// do no per-object work and return promptly. An error makes the
	// coordinator ask again.
	Admit(ctx context.Context, set shard.PartitionSet) error
	// Replay enqueues the cached objects that fall into set (their previous
	// owner may have dropped events). It runs off the coordinator's loop,
	// after Admit, and Revoke may run meanwhile: what it enqueues for a
	// revoked partition must be refused by the gate. An error makes the
	// coordinator ask again after a backoff.
	Replay(ctx context.Context, set shard.PartitionSet) error
	// Revoke stops admitting set, cancels its reconciles (at once when
	// fence, else after a grace period), and returns nil only when nothing
	// of set runs any more: that return is the report that set drained.
	// The check "is p active?" and the in-flight increment of a reconcile
	// must be one atomic step with respect to Revoke.
	Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error
}

// exported adapts a Participant to the coordinator's internal interface.
type exported struct{ p Participant }

func (e exported) admit(ctx context.Context, set shard.PartitionSet) error {
	return e.p.Admit(ctx, set)
}

func (e exported) replay(ctx context.Context, set shard.PartitionSet) error {
	return e.p.Replay(ctx, set)
}

func (e exported) revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	return e.p.Revoke(ctx, set, fence)
}

// CoordinatorOptions configure NewCoordinator. Membership and Handoff
// (Identity, Incarnation) are required; zero fields take the defaults
// documented on each, applied in applyDefaults.
type CoordinatorOptions struct {
	// Handoff configures the handoff core. Identity, Incarnation and Ring
	// must be those the Membership writes into the own Lease (for
	// lease.Member: Options.Identity, Incarnation and Params =
	// Ring.Fingerprint()); lease timings must match too.
	Handoff handoff.Config
	// Membership is the ring's Leases, usually a *lease.Member whose Run
	// the caller runs alongside Coordinator.Run. Required.
	Membership Membership
	// Participants are activated and revoked together. None is allowed
	// (the ring is then joined without doing anything).
	Participants []Participant
	// Logger defaults to kshard's default logger (JSON lines on stderr).
	Logger logr.Logger
	// Registerer receives the kshard_* ring metrics; default: a new
	// registry of its own (metrics not exported).
	Registerer prometheus.Registerer
	// Exit ends the process when reconciles of a fenced replica outlive
	// the stop deadline; default os.Exit. An adapter that cannot exit must
	// still stop everything at once: its Lease is about to be voided.
	Exit func(code int)
	// Clock is the clock the core decides on; default the real clock. It
	// must be the Membership's clock (LastRenew is read on it).
	Clock clock.PassiveClock
	// Cache is a sharded cache that holds only the partitions this
	// replica needs; a partition then activates only once the cache has
	// synced it (handoff.Config.PartitionCache, set from this field).
	// Default nil: a full cache, covered by Run's synced.
	Cache PartitionCache
}

func (o *CoordinatorOptions) applyDefaults() {
	o.Handoff = o.Handoff.WithDefaults()
	if o.Logger.GetSink() == nil {
		o.Logger = defaultLogger()
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Coordinator is the I/O shell around one replica's handoff core: it feeds
// the core what the Membership observes, carries out what the core
// decides (Lease writes, activations and drains of the Participants,
// confirming reads), and publishes the replica's lease validity. The
// Manager runs one; NewCoordinator lets another runtime (a
// controller-runtime adapter, say) run the same ring.
type Coordinator struct {
	c   *coordinator
	ran chan struct{} // closed by the first Run
}

// NewCoordinator validates opts, applies defaults and returns a
// Coordinator that has done nothing yet.
func NewCoordinator(opts CoordinatorOptions) (*Coordinator, error) {
	opts.applyDefaults()
	if opts.Membership == nil {
		return nil, errors.New("manager: CoordinatorOptions.Membership is nil; pass the ring's Lease membership (a *lease.Member)")
	}
	parts := make([]participant, len(opts.Participants))
	for i, p := range opts.Participants {
		if p == nil {
			return nil, fmt.Errorf("manager: CoordinatorOptions.Participants[%d] is nil", i)
		}
		parts[i] = exported{p}
	}
	opts.Handoff.PartitionCache = opts.Cache != nil
	core, err := handoff.New(opts.Handoff)
	if err != nil {
		return nil, fmt.Errorf("manager: CoordinatorOptions.Handoff: %w", err)
	}
	metrics, err := newRingMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("manager: registering ring metrics: %w", err)
	}
	c := newCoordinatorWith(core, opts.Membership, parts, metrics, opts.Logger.WithName("ring"), opts.Handoff.RenewDeadline, opts.Exit)
	c.now = opts.Clock.Now
	c.cache = opts.Cache
	c.balanced = opts.Handoff.Ring.Balance > 0
	return &Coordinator{c: c, ran: make(chan struct{})}, nil
}

// Run drives the ring until the replica has left (after Leave), another
// process took its identity (an error wrapping handoff.ErrDuplicateIdentity),
// or ctx ends; it waits for the work it started. synced reports, blocking,
// whether every cache the participants need has synced (false when ctx
// ended first): the replica joins only after that. Run may be called once.
func (c *Coordinator) Run(ctx context.Context, synced func(context.Context) bool) error {
	select {
	case <-c.ran:
		return errors.New("manager: Coordinator.Run called more than once; create a new Coordinator for every run")
	default:
		close(c.ran)
	}
	if synced == nil {
		synced = func(context.Context) bool { return true }
	}
	return c.c.run(ctx, synced)
}

// Leave starts a graceful leave: revoke and drain everything, publish an
// empty claim, delete the own Lease; Run returns once done. Safe to call
// any time, more than once.
func (c *Coordinator) Leave() { c.c.leave() }

// Ready reports whether the replica is a working ring member; when it is
// not, NotReadyReason says why.
func (c *Coordinator) Ready() bool { return c.c.ready.Load() }

// NotReadyReason says why the replica is not a working ring member ("" when
// it is, or before Run's first step).
func (c *Coordinator) NotReadyReason() string {
	if r := c.c.notReady.Load(); r != nil {
		return *r
	}
	return ""
}

// LeaseValidity returns until when this replica's lease is known valid and
// its epoch, for controller.Options.LeaseValidity and the client transport.
func (c *Coordinator) LeaseValidity() controller.Validity { return c.c.leaseValidity() }
