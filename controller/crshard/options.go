package crshard

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	kcache "github.com/kshard/kshard/shard/cache"
)

// Options configure a Ring. Ring is required; every other zero field takes
// the default documented on it, applied in applyDefaults from the same
// homes as kshard's manager's (lease for the names, shard.Timing for the
// timings).
type Options struct {
	// Ring names the ring: every replica of the operator uses the same
	// name. Required; a DNS-1123 label (lease.ValidateRing).
	Ring string
	// LeaseNamespace holds the ring's Leases (not the objects the
	// controllers watch: that is the manager's cache options). It must
	// exist. Defaults to $POD_NAMESPACE, then the service account's
	// namespace, then "default". The same option as
	// manager.Options.LeaseNamespace.
	LeaseNamespace string
	// Namespace is the former name of LeaseNamespace, used only when
	// LeaseNamespace is empty; setting both to different values is an
	// error.
	//
	// Deprecated: use LeaseNamespace, as kshard's manager does.
	// "Namespace" read like the namespace the cache watches.
	Namespace string
	// Identity names this replica, unique and stable: the pod name of a
	// StatefulSet, a DNS-1123 subdomain (lease.ValidateIdentity). Defaults
	// to $POD_NAME, else the hostname.
	Identity string
	// Partitions is the ring's partition count; all replicas must agree.
	// Defaults to 271.
	Partitions int
	// Load bounds how many partitions one replica owns (⌈Load·P/N⌉).
	// Defaults to 1.05.
	Load float64
	// LeaseDuration, RenewPeriod and RenewDeadline mean what they mean in
	// kshard's manager and default as they do there (shard.Timing):
	// LeaseDuration to 10s, RenewDeadline to 2/3 of it, RenewPeriod to
	// LeaseDuration/5, at most RenewDeadline/2 (2s with the defaults).
	LeaseDuration, RenewPeriod, RenewDeadline time.Duration
	// DrainGracePeriod is how long in-flight reconciles of a moving
	// partition run before their contexts are cancelled. Defaults to
	// shard.DefaultDrainGracePeriod (5s).
	DrainGracePeriod time.Duration
	// GracefulShutdownTimeout bounds the leave when the manager stops
	// (drain, release, delete the Lease). Keep it below the manager's own
	// GracefulShutdownTimeout (30s by default), which bounds the ring and
	// its controllers together. Defaults to
	// shard.DefaultEmbeddedShutdownTimeout (20s).
	GracefulShutdownTimeout time.Duration
	// KeepPlaceOnLeave: when the manager stops, an active replica keeps
	// its place in the ring for the next process of its identity (a
	// StatefulSet's rolling update) instead of moving its partitions to
	// its peers and back; they wait unreconciled while it restarts, at
	// most LeaseDuration after it stopped if none returns. As kshard's
	// manager.Options.KeepPlaceOnLeave (the handoff core's Config.KeepPlaceOnLeave).
	KeepPlaceOnLeave bool
	// Logger defaults to controller-runtime's logger (log.Log) named "ring".
	Logger logr.Logger
	// Registerer receives the kshard_* metrics. Defaults to
	// controller-runtime's registry (metrics.Registry), served by the
	// manager's metrics server.
	Registerer prometheus.Registerer
	// Exit ends the process when reconciles of a fenced replica outlive
	// the stop deadline. Defaults to os.Exit.
	Exit func(code int)
	// CacheMode is what the manager's cache holds: CacheFull (the
	// default), or CacheLabels, the ring's sharded cache, which also
	// needs the manager built with ctrl.Options{NewCache: ring.NewCache}.
	CacheMode CacheMode
	// FullCacheKinds are kinds the sharded cache holds whole on every
	// replica (CacheLabels only): those reconcilers read outside the
	// partitions they own.
	FullCacheKinds []client.Object
	// LabelQPS bounds the partition-label patches per kind per second
	// (CacheLabels only). Defaults to 200; negative: no bound.
	LabelQPS float64
	// CacheCheckInterval is how often each kind the sharded cache holds by
	// labels checks that it holds every object of the partitions it
	// reports synced (CacheLabels only), as kshard's
	// manager.Options.CacheCheckInterval: a finding is logged at error
	// level and counted in kshard_cache_missing_objects (controller-runtime's
	// readiness checks carry no reason, so it has none here). Defaults to
	// 5 minutes (cache.DefaultCheckInterval); negative: off; at least a
	// second.
	CacheCheckInterval time.Duration
	// PodNamespace is the namespace of the pod this replica runs in, whose
	// name is Identity. The replica reads its pod (RBAC: get on pods) so
	// that the kubelet can prove its death after a crash: restarted in
	// place, its next incarnation takes over at once instead of waiting
	// LeaseDuration, as with kshard's manager. Defaults to
	// $POD_NAMESPACE, then the service account's namespace; empty (outside
	// a pod) turns the proof off, which the ring logs once.
	PodNamespace string
	// TerminationMessagePath is the container's termination message file
	// (its terminationMessagePath), into which the replica writes its
	// incarnation at start, for the kubelet to report when the container
	// ends. Defaults to /dev/termination-log.
	TerminationMessagePath string
	// LeaderElectionID names the leader-election Lease of the
	// leader-elected operator this ring replaces (its
	// ctrl.Options.LeaderElectionID), for a rollout from that Deployment
	// to the ring with no key reconciled by both: the ring takes that
	// Lease once the old leader has released it or let it expire, renews
	// it while it runs, and activates nothing before it holds it. A
	// leader-elected replica started later (a rollback) then waits for
	// it. Empty (the default): no such Lease. RBAC: get, create and
	// update on that Lease.
	LeaderElectionID string
	// LeaderElectionNamespace is the namespace of LeaderElectionID's
	// Lease. Defaults to LeaseNamespace.
	LeaderElectionNamespace string
}

func (o *Options) applyDefaults() {
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = o.Namespace
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = lease.DefaultNamespace()
	}
	if o.Identity == "" {
		o.Identity = lease.DefaultIdentity()
	}
	ring := shard.Config{Partitions: o.Partitions, Load: o.Load}.WithDefaults()
	o.Partitions, o.Load = ring.Partitions, ring.Load
	// The ring leaves inside controller-runtime's shutdown, not its own.
	t := o.timing().WithEmbeddedDefaults()
	o.LeaseDuration, o.RenewDeadline, o.RenewPeriod = t.LeaseDuration, t.RenewDeadline, t.RenewPeriod
	o.DrainGracePeriod, o.GracefulShutdownTimeout = t.DrainGracePeriod, t.GracefulShutdownTimeout
	if o.Registerer == nil {
		o.Registerer = crmetrics.Registry
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	if o.CacheMode == "" {
		o.CacheMode = CacheFull
	}
	if o.LabelQPS == 0 {
		o.LabelQPS = kcache.DefaultLabelQPS
	}
	if o.PodNamespace == "" {
		o.PodNamespace = lease.PodNamespace()
	}
	if o.TerminationMessagePath == "" {
		o.TerminationMessagePath = lease.DefaultTerminationMessagePath
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.LeaseNamespace
	}
}

// timing returns the replica's timings; shard.Timing holds their defaults
// and rules.
func (o *Options) timing() shard.Timing {
	return shard.Timing{LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RenewPeriod: o.RenewPeriod,
		DrainGracePeriod: o.DrainGracePeriod, GracefulShutdownTimeout: o.GracefulShutdownTimeout}
}

// validate reports every invalid option at once, by the rules every
// runtime of a ring shares. Lease and ring parameters are validated again,
// in detail, by ring.NewReplica and the handoff core.
func (o *Options) validate() error {
	var errs []error
	if err := lease.ValidateRing(o.Ring); err != nil {
		errs = append(errs, fmt.Errorf("Ring %w", err))
	}
	if err := lease.ValidateNamespace(o.LeaseNamespace); err != nil {
		errs = append(errs, fmt.Errorf("LeaseNamespace %w", err))
	}
	if o.Namespace != "" && o.Namespace != o.LeaseNamespace {
		errs = append(errs, fmt.Errorf("Namespace %q (deprecated) and LeaseNamespace %q differ; set only LeaseNamespace", o.Namespace, o.LeaseNamespace))
	}
	if err := lease.ValidateIdentity(o.Ring, o.Identity); err != nil {
		errs = append(errs, fmt.Errorf("Identity %w", err))
	}
	if err := o.timing().Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.CacheMode != CacheFull && o.CacheMode != CacheLabels {
		errs = append(errs, fmt.Errorf("CacheMode %q is not one of %q, %q", o.CacheMode, CacheFull, CacheLabels))
	}
	if o.CacheCheckInterval > 0 && o.CacheCheckInterval < time.Second {
		errs = append(errs, fmt.Errorf("CacheCheckInterval %v is below a second: each check lists the replica's share; leave it 0 for the default (%v), or negative to turn the check off", o.CacheCheckInterval, kcache.DefaultCheckInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crshard: invalid Options: %w", err)
	}
	return nil
}
