package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/kshard/kshard/controller/gate"
	"github.com/kshard/kshard/internal/logging"
	"github.com/kshard/kshard/shard"
)

// Options configure a controller. The zero value is usable; defaults are
// applied in one place (withDefaults) and New validates the result.
type Options struct {
	// MaxConcurrentReconciles is the number of workers, so the number of
	// reconciles (of distinct keys) that may run at once. Defaults to 1.
	MaxConcurrentReconciles int

	// RecoverPanic turns a panicking reconcile into an error (counted in
	// controller_runtime_reconcile_panics_total and retried). Defaults to
	// true; set it to false to let panics crash the process.
	RecoverPanic *bool

	// ReconcileTimeout bounds each reconcile's context. Defaults to 0 (none).
	ReconcileTimeout time.Duration

	// CacheSyncTimeout bounds Start's wait for its sources to sync.
	// Defaults to 2 minutes.
	CacheSyncTimeout time.Duration

	// RateLimiter paces retries of failed requests. Defaults to client-go's
	// DefaultTypedControllerRateLimiter (per-item exponential backoff from
	// 5ms to 1000s, and an overall 10 qps / 100 burst bucket).
	RateLimiter workqueue.TypedRateLimiter[Request]

	// Logger is the controller's logger; a "controller" value with the
	// controller's name is added. Defaults to the manager's logger when
	// built by a Builder, otherwise to kshard's one default logger, JSON
	// lines on stderr, as in manager and lease (a zero Logger, including
	// logr.Discard(), selects the default; to silence a controller pass a
	// logger whose sink drops everything, e.g. funcr.New with a no-op
	// function).
	Logger logr.Logger

	// Partitioner maps request keys to partitions. Defaults to
	// shard.NewPartitioner(shard.DefaultPartitions). A sharding manager
	// sets its ring's partitioner.
	Partitioner shard.Partitioner

	// StartInactive starts the controller with no partition active, so it
	// reconciles nothing until Activate. Defaults to false: a standalone
	// controller reconciles every key. A sharding manager sets it.
	StartInactive bool

	// DrainGracePeriod is how long in-flight reconciles of a revoked
	// partition may run before their contexts are cancelled. Defaults to
	// shard.DefaultDrainGracePeriod (5s). A Revoke with fence set
	// cancels at once instead.
	DrainGracePeriod time.Duration

	// DrainReportAfter is how long a Revoke may wait before it is logged
	// and counted in kshard_drain_overdue_total. It keeps waiting after
	// that: a partition is never released while a reconcile of it runs.
	// Defaults to gate.DefaultDrainReportAfter (30s).
	DrainReportAfter time.Duration

	// Registerer receives the controller's metrics. Defaults to
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer

	// LeaseValidity, when set, gives the replica's lease validity. A worker
	// reads it immediately before each reconcile and does not start one
	// while it has passed (the request is requeued with rate limiting and
	// counted in kshard_reconcile_refused_total); otherwise the reconcile's
	// context carries it (ValidUntil) for the client transport, which
	// refuses writes issued under it once it has passed or a fence started
	// a new epoch. Renewals extend it, so a reconcile may run as long as the
	// replica stays healthy; a fence cancels it. Defaults to nil: no lease,
	// no check (a standalone controller). A sharding manager sets it, and
	// its value wins over the Builder's.
	LeaseValidity LeaseValidity

	// SkipNameValidation allows several controllers with one name in one
	// Registerer (their metrics then add up). Defaults to false: a second
	// controller with a taken name is refused.
	SkipNameValidation bool

	// AllowUnreplayedSources lets a controller that starts inactive (under
	// a sharding manager) watch sources that are not ReplayableSources,
	// such as Channel. Such a source's events for a partition that is not
	// active here when they arrive are dropped, and nothing delivers them
	// again when the partition is activated here: set it only when its
	// senders resend, or losing those events is acceptable. Defaults to
	// false: Watch refuses such a source, naming it.
	AllowUnreplayedSources bool
}

const (
	defaultCacheSyncTimeout = 2 * time.Minute
	// The ring's own defaults (shard.Timing's and the drain loop's), so
	// that a controller outside a manager drains as one inside does.
	defaultDrainGracePeriod = shard.DefaultDrainGracePeriod
	defaultDrainReportAfter = gate.DefaultDrainReportAfter
)

// withDefaults returns o with every unset field defaulted.
func (o Options) withDefaults() Options {
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 1
	}
	if o.RecoverPanic == nil {
		t := true
		o.RecoverPanic = &t
	}
	if o.CacheSyncTimeout == 0 {
		o.CacheSyncTimeout = defaultCacheSyncTimeout
	}
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[Request]()
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logging.Default()
	}
	if o.Partitioner == nil {
		o.Partitioner = shard.NewPartitioner(shard.DefaultPartitions)
	}
	if o.DrainGracePeriod == 0 {
		o.DrainGracePeriod = defaultDrainGracePeriod
	}
	if o.DrainReportAfter == 0 {
		o.DrainReportAfter = defaultDrainReportAfter
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.DefaultRegisterer
	}
	return o
}

// validate reports every impossible setting of defaulted options.
func (o Options) validate() error {
	var errs []error
	if o.MaxConcurrentReconciles < 0 {
		errs = append(errs, fmt.Errorf("MaxConcurrentReconciles is %d; use a positive number of workers", o.MaxConcurrentReconciles))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ReconcileTimeout", o.ReconcileTimeout},
		{"CacheSyncTimeout", o.CacheSyncTimeout},
		{"DrainGracePeriod", o.DrainGracePeriod},
		{"DrainReportAfter", o.DrainReportAfter},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s is %s; use a positive duration, or 0 for the default", d.name, d.v))
		}
	}
	if n := o.Partitioner.Count(); n < 1 {
		errs = append(errs, fmt.Errorf("Partitioner has %d partitions; it needs at least one", n))
	}
	return errors.Join(errs...)
}
