package crshard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/fence"
	"github.com/kshard/kshard/shard/ring"
)

// Ring is one replica's membership in a kshard ring, run as a
// controller-runtime Runnable, and the gate of every controller that opts
// in. Build it with New before the manager, add controllers with
// NewControllerManagedBy.
type Ring struct {
	opts   Options
	log    logr.Logger
	own    *rest.Config // the config New was given, without the fencing transport: for the ring's own clients
	parts  gate.Partitions
	gate   *gate.Gate // one for all the ring's controllers: a partition drains when none of them runs it
	member ring.Member
	coord  *ring.Coordinator
	pods   typedcorev1.PodInterface // the pods of PodNamespace, for the proof of death
	// leader holds the replaced operator's leader-election Lease
	// (Options.LeaderElectionID); nil without one.
	leader *lease.LeaderLease
	// optedIn counts the controllers opted in whose Add to a manager from
	// NewManager is still to come.
	optedIn optedIn
	running running
	metrics *metrics
	slot    *cacheSlot // the sharded cache (CacheMode labels); nil otherwise
	// validity is the lease validity reconciles check and carry: the
	// coordinator's; tests replace it.
	validity func() shard.Validity
	// electedWarnAfter is how long the ring waits for the manager's
	// Elected before it reports that the manager runs leader election
	// (Options.LeaseDuration; tests shorten it).
	electedWarnAfter time.Duration
	// notElected is set while that report stands: readyz says it.
	notElected atomic.Bool

	mu          sync.Mutex // guards the fields below
	mgr         crmanager.Manager
	started     bool
	controllers []*sharded
	singletons  []*singleton
	// base is the context singletons run under: the ring's run, which
	// outlives the manager's context until the ring has left.
	base context.Context
}

// rings remembers which manager has a ring, to refuse a second one and
// for ControllerManagedBy(mgr). A ring leaves it when its Start returns, so
// a manager that has run is not kept alive by it.
var rings struct {
	mu sync.Mutex
	by map[crmanager.Manager]*Ring
}

// New validates opts and prepares a Ring; nothing talks to the API server
// until the manager starts it. It puts kshard's fencing transport on cfg
// (cfg.Wrap), so call it before building the manager from cfg: the
// manager's clients then refuse writes issued under a reconcile whose lease
// validity has passed, and writes issued without a reconcile context while
// this replica, once valid, has lost its validity (a pause past
// RenewDeadline, a fence) and not renewed since (package
// github.com/kshard/kshard/shard/fence). The ring's own clients (its
// Leases, pod reads, the sharded cache's label patches) are built from a
// copy of cfg taken before, so they are never refused.
func New(cfg *rest.Config, opts Options) (*Ring, error) {
	if cfg == nil {
		return nil, errors.New("crshard: rest config is nil; pass the config the manager is built from (ctrl.GetConfig())")
	}
	opts.applyDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = crlog.Log.WithName("ring")
	}
	// The ring's own clients are built from a copy of cfg taken before it
	// gets the fencing transport: a replica whose validity has passed must
	// still renew its Lease to get it back. The Lease client speaks
	// protobuf, as kshard's manager's does.
	own := rest.CopyConfig(cfg)
	ringCfg := shard.Config{Partitions: opts.Partitions, Load: opts.Load}.WithDefaults()
	replica, err := ring.NewReplica(ring.ReplicaOptions{
		Config: own, Namespace: opts.LeaseNamespace, Ring: opts.Ring, Identity: opts.Identity,
		RingConfig: ringCfg, Timing: opts.timing(), KeepPlaceOnLeave: opts.KeepPlaceOnLeave,
		Logger: log, Registerer: opts.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("crshard: %w", err)
	}
	client, member := replica.Client, replica.Member
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Ring{
		opts: opts, log: log, own: own, member: member, metrics: met, pods: client.CoreV1().Pods(opts.PodNamespace),
		parts: gate.NewPartitions(shard.NewPartitioner(ringCfg.Partitions)),
		gate:  gate.New(ringCfg.Partitions, false),
	}
	r.running.init()
	r.electedWarnAfter = opts.LeaseDuration
	if opts.LeaderElectionID != "" {
		r.leader, err = lease.NewLeaderLease(lease.LeaderLeaseOptions{
			Client: client, Namespace: opts.LeaderElectionNamespace, Name: opts.LeaderElectionID, Ring: opts.Ring,
			LeaseDuration: opts.LeaseDuration, RenewPeriod: opts.RenewPeriod, Logger: log.WithName("leader-election"),
		})
		if err != nil {
			return nil, fmt.Errorf("crshard: Options.LeaderElectionID: %w", err)
		}
	}
	var partitionCache ring.PartitionCache // nil: a full cache
	if opts.CacheMode == CacheLabels {
		r.slot = &cacheSlot{partitions: ringCfg.Partitions, status: member.SetCacheStatus}
		partitionCache = r.slot
	}
	r.coord, err = ring.New(ring.Options{
		Cache:        partitionCache,
		Replica:      replica,
		Participants: []ring.Participant{participant{r}},
		Logger:       log,
		Registerer:   opts.Registerer,
		Exit:         opts.Exit,
	})
	if err != nil {
		return nil, fmt.Errorf("crshard: %w", err)
	}
	r.validity = r.coord.LeaseValidity
	cfg.Wrap(fence.Transport(r.LeaseValidity, met.writesRefused))
	return r, nil
}

// SetupWithManager adds the ring to mgr (NewControllerManagedBy does it
// too): as a Runnable that needs no leader election, and as the readiness
// check "kshard-ring". It fails for a manager with leader election, a
// manager that already has another ring, or a ring already set up with
// another manager; calling it again with the same manager does nothing.
func (r *Ring) SetupWithManager(mgr crmanager.Manager) error {
	if mgr == nil {
		return errors.New("crshard: SetupWithManager(nil)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mgr == mgr {
		return nil
	}
	if r.mgr != nil {
		return errors.New("crshard: this ring is already set up with another manager; build one ring per manager")
	}
	if err := r.checkCache(mgr); err != nil {
		return err
	}
	rings.mu.Lock()
	defer rings.mu.Unlock()
	if rings.by == nil {
		rings.by = map[crmanager.Manager]*Ring{}
	}
	if other, ok := rings.by[mgr]; ok && other != r {
		return fmt.Errorf("crshard: the manager already has a ring (%q); one manager runs one ring: opt every controller into it", other.opts.Ring)
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("crshard: adding the ring to the manager: %w", err)
	}
	if err := mgr.AddReadyzCheck("kshard-ring", r.readyz); err != nil {
		return fmt.Errorf("crshard: adding the ring's readiness check: %w", err)
	}
	rings.by[mgr] = r
	r.mgr = mgr
	return nil
}

// forgetRing removes mgr's entry in rings if it is r.
func forgetRing(mgr crmanager.Manager, r *Ring) {
	rings.mu.Lock()
	defer rings.mu.Unlock()
	if rings.by[mgr] == r {
		delete(rings.by, mgr)
	}
}

// NeedLeaderElection implements controller-runtime's
// LeaderElectionRunnable: the ring runs on every replica.
func (r *Ring) NeedLeaderElection() bool { return false }

// Start runs the ring until ctx ends, then leaves it gracefully (drain,
// release, delete the Lease; bounded by GracefulShutdownTimeout). The
// manager stops the ring before its controllers, so they drain normally.
func (r *Ring) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("crshard: the ring was started twice; add it to one manager once")
	}
	r.started = true
	ctls := slices.Clone(r.controllers)
	mgr := r.mgr
	r.mu.Unlock()
	defer forgetRing(mgr, r)

	// The ring keeps running after ctx ends, to leave.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	r.mu.Lock()
	r.base = runCtx
	r.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	// After the leave (or a failure) no singleton may outlive the ring.
	defer r.stopSingletons()
	// Before the first write of the Lease, so that it carries the pod.
	r.coord.SetupProof(runCtx, ring.Proof{Pods: r.pods, Namespace: r.opts.PodNamespace,
		TerminationMessagePath: r.opts.TerminationMessagePath, Incarnation: r.member.Incarnation()})
	if r.leader != nil {
		wg.Go(func() { r.leader.Run(runCtx) })
	}
	memberErr := make(chan error, 1)
	wg.Go(func() {
		if err := r.member.Run(runCtx); err != nil && runCtx.Err() == nil {
			memberErr <- err
		}
	})
	done := make(chan error, 1)
	wg.Go(func() {
		done <- r.coord.Run(runCtx, func(ctx context.Context) bool { return r.waitSynced(ctx, mgr, ctls) })
	})
	leave := func() error {
		r.coord.Leave()
		t := time.NewTimer(r.opts.GracefulShutdownTimeout)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-t.C:
			r.log.Error(nil, "graceful leave did not finish in time; stopping anyway (peers take over once the Lease expires)", "timeout", r.opts.GracefulShutdownTimeout)
			return nil
		}
	}
	var err error
	select {
	case <-ctx.Done():
		r.log.Info("leaving the ring", "identity", r.opts.Identity)
		err = leave()
	case err = <-done:
		// The coordinator ended by itself: another process took this
		// identity over.
	case err = <-memberErr:
		r.log.Error(err, "Lease membership failed; leaving the ring")
		err = errors.Join(fmt.Errorf("crshard: Lease membership: %w", err), leave())
	}
	stop()
	return err
}

func (r *Ring) stopSingletons() {
	r.mu.Lock()
	ss := slices.Clone(r.singletons)
	r.mu.Unlock()
	for _, s := range ss {
		_ = s.stop(context.Background())
	}
}

// waitSynced reports once every opted-in controller has started its
// workers (controller-runtime starts them after its sources synced) and
// the manager's cache has synced: the replica joins only when it can work
// the moment it owns partitions.
func (r *Ring) waitSynced(ctx context.Context, mgr crmanager.Manager, ctls []*sharded) bool {
	// The replaced leader first: until the ring holds its Lease, it may
	// still reconcile any key.
	if r.leader != nil && !r.leader.WaitHeld(ctx) {
		return false
	}
	if mgr != nil && !r.waitElected(ctx, mgr) {
		return false
	}
	for _, c := range ctls {
		select {
		case <-c.working:
		case <-ctx.Done():
			return false
		}
	}
	if mgr == nil {
		return true
	}
	return mgr.GetCache().WaitForCacheSync(ctx)
}

// errNotElected is what readyz and the log say while controller-runtime's
// manager has not closed Elected.
var errNotElected = errors.New("controller-runtime's manager has not been elected: it runs leader election (LeaderElection: true) and another replica leads, so this replica's controllers do not start and it does not join the ring; set LeaderElection false: the ring shares the work among all replicas (Ring.AddSingleton runs what needs one)")

// waitElected waits for mgr.Elected, which controller-runtime's manager
// closes right after starting the runnables that need leader election, at
// once when it runs no leader election, and only on winning it when it
// does. Controller-runtime exposes no other way to tell whether a manager
// elects a leader. A replica that does not win is not ready, and says why,
// rather than join a ring whose partitions its controllers would never
// reconcile; if it wins later, it joins then.
func (r *Ring) waitElected(ctx context.Context, mgr crmanager.Manager) bool {
	warn := time.NewTimer(r.electedWarnAfter)
	defer warn.Stop()
	defer r.notElected.Store(false)
	for {
		select {
		case <-mgr.Elected():
			return true
		case <-ctx.Done():
			return false
		case <-warn.C:
			r.notElected.Store(true)
			r.log.Error(errNotElected, "waiting for the manager's leader election", "waited", r.electedWarnAfter)
		}
	}
}

// Ready reports whether the replica is a working ring member.
func (r *Ring) Ready() bool { return r.coord.Ready() }

// LeaseValidity is the replica's lease validity (see
// controller.WithLeaseValidity), for work started outside a reconcile.
func (r *Ring) LeaseValidity() shard.Validity { return r.validity() }

// Identity is this replica's identity in the ring.
func (r *Ring) Identity() string { return r.opts.Identity }

func (r *Ring) readyz(*http.Request) error {
	if r.coord.Ready() {
		return nil
	}
	if r.notElected.Load() {
		return errNotElected
	}
	if r.leader != nil && !r.leader.Held() {
		return errors.New(r.leader.Reason())
	}
	reason := r.coord.NotReadyReason()
	if reason == "" {
		reason = "not started"
	}
	return errors.New(reason)
}

// register opts a controller in; it fails once the ring started, since the
// controller's keys would not have been gated from its first event.
func (r *Ring) register(c *sharded) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errLate
	}
	r.controllers = append(r.controllers, c)
	return nil
}

var errLate = errors.New("crshard: a controller was added after the ring started; build every controller before starting the manager")

// checkNotStarted fails once the ring started.
func (r *Ring) checkNotStarted() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errLate
	}
	return nil
}
