package ring

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/logging"
	"github.com/kshard/kshard/shard"
)

// Options configure New. Replica is required; zero fields take the
// defaults documented on each, applied in applyDefaults.
type Options struct {
	// Replica is the replica's Lease membership and its handoff core's
	// configuration, matched to each other (NewReplica); the caller runs
	// Replica.Member alongside Coordinator.Run. Required.
	Replica *Replica
	// handoff and leases are what Replica holds: the handoff core's
	// configuration, whose Identity, Incarnation, Ring and lease timings
	// must be those the Leases are written with, and the ring's Leases.
	// New sets them from Replica; this package's tests set them instead
	// (a fake membership, the simulation's process).
	handoff handoff.Config
	leases  memberLeases
	// Participants are activated and revoked together. None is allowed
	// (the ring is then joined without doing anything).
	Participants []Participant
	// Logger receives the coordinator's logs as it is (name it, "ring"
	// say). Defaults to kshard's default logger (JSON lines on stderr).
	Logger logr.Logger
	// Registerer receives the kshard_* ring metrics; default: a new
	// registry of its own (metrics not exported).
	Registerer prometheus.Registerer
	// Exit ends the process when reconciles of a fenced replica outlive
	// the stop deadline; default os.Exit. An adapter that cannot exit must
	// still stop everything at once: its Lease is about to be voided.
	Exit func(code int)
	// Clock is the clock the core decides on; default the real clock. It
	// must be the membership's clock (LastRenew is read on it).
	Clock clock.PassiveClock
	// Cache is a sharded cache that holds only the partitions this
	// replica needs; a partition then activates only once the cache has
	// synced it (handoff.Config.PartitionCache, set from this field).
	// Default nil: a full cache, covered by Run's synced.
	Cache PartitionCache
}

func (o *Options) applyDefaults() {
	if o.Replica != nil && o.Replica.member != nil {
		o.handoff, o.leases = o.Replica.handoff, o.Replica.member
	}
	o.handoff = o.handoff.WithDefaults()
	if o.Logger.GetSink() == nil {
		o.Logger = logging.Default()
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
// the core what the ring's Leases show, carries out what the core
// decides (Lease writes, activations and drains of the Participants,
// confirming reads), and publishes the replica's lease validity. kshard's
// manager runs one; another runtime (the controller-runtime adapter) runs
// the same ring with its own.
type Coordinator struct {
	c   *coordinator
	cfg handoff.Config // defaulted
	ran chan struct{}  // closed by the first Run
}

// New validates opts, applies defaults, registers the ring's metrics and
// returns a Coordinator that has done nothing yet.
func New(opts Options) (*Coordinator, error) {
	opts.applyDefaults()
	if opts.Replica != nil && opts.Replica.member == nil {
		return nil, errors.New("ring: Options.Replica was not built by NewReplica; pass the replica NewReplica returned")
	}
	if opts.leases == nil {
		return nil, errors.New("ring: Options.Replica is nil; pass the replica NewReplica built")
	}
	for i, p := range opts.Participants {
		if p == nil {
			return nil, fmt.Errorf("ring: Options.Participants[%d] is nil", i)
		}
	}
	opts.handoff.PartitionCache = opts.Cache != nil
	core, err := handoff.New(opts.handoff)
	if err != nil {
		return nil, fmt.Errorf("ring: Options.Replica: %w", err)
	}
	metrics, err := newRingMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("ring: registering ring metrics: %w", err)
	}
	c := newCoordinatorWith(core, opts.leases, opts.Participants, metrics, opts.Logger, opts.handoff.Timing, opts.Exit)
	c.now = opts.Clock.Now
	c.cache = opts.Cache
	c.ringCfg, c.fingerprint = opts.handoff.Ring, opts.handoff.Ring.Fingerprint()
	c.balanced = opts.handoff.Ring.Balance > 0
	return &Coordinator{c: c, cfg: opts.handoff, ran: make(chan struct{})}, nil
}

// Run drives the ring until the replica has left (after Leave), another
// process took its identity (an error wrapping handoff.ErrDuplicateIdentity),
// or ctx ends; it waits for the work it started. synced reports, blocking,
// whether every cache the participants need has synced (false when ctx
// ended first): the replica joins only after that. Run may be called once.
func (c *Coordinator) Run(ctx context.Context, synced func(context.Context) bool) error {
	select {
	case <-c.ran:
		return errors.New("ring: Coordinator.Run called more than once; create a new Coordinator for every run")
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
// its epoch, for controller.Options.LeaseValidity and the fencing transport
// (shard/fence).
func (c *Coordinator) LeaseValidity() shard.Validity { return c.c.leaseValidity() }
