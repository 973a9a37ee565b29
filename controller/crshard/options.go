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

	kcache "github.com/kshard/kshard/manager/cache"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/handoff"
)

// Options configure a Ring. Ring and Namespace are required; every other
// zero field takes the default documented on it, applied in applyDefaults.
type Options struct {
	// Ring names the ring: every replica of the operator uses the same
	// name. Required; a DNS-1123 label.
	Ring string
	// Namespace holds the ring's Leases. Required.
	Namespace string
	// Identity names this replica, unique and stable: the pod name of a
	// StatefulSet. Defaults to $POD_NAME, else the hostname.
	Identity string
	// Partitions is the ring's partition count; all replicas must agree.
	// Defaults to 271.
	Partitions int
	// Load bounds how many partitions one replica owns (⌈Load·P/N⌉).
	// Defaults to 1.25.
	Load float64
	// LeaseDuration defaults to 10s, RenewPeriod to 2s, RenewDeadline to
	// 2/3 of LeaseDuration; they mean what they mean in kshard's manager.
	LeaseDuration, RenewPeriod, RenewDeadline time.Duration
	// DrainGracePeriod is how long in-flight reconciles of a moving
	// partition run before their contexts are cancelled. Defaults to 5s.
	DrainGracePeriod time.Duration
	// GracefulShutdownTimeout bounds the leave when the manager stops
	// (drain, release, delete the Lease). Defaults to 30s; keep it below
	// the manager's own GracefulShutdownTimeout.
	GracefulShutdownTimeout time.Duration
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
}

func (o *Options) applyDefaults() {
	if o.Identity == "" {
		o.Identity = os.Getenv("POD_NAME")
	}
	if o.Identity == "" {
		o.Identity, _ = os.Hostname()
	}
	ring := shard.Config{Partitions: o.Partitions, Load: o.Load}.WithDefaults()
	o.Partitions, o.Load = ring.Partitions, ring.Load
	h := handoff.Config{LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline}.WithDefaults()
	o.LeaseDuration, o.RenewDeadline = h.LeaseDuration, h.RenewDeadline
	if o.RenewPeriod == 0 {
		o.RenewPeriod = 2 * time.Second
	}
	if o.DrainGracePeriod == 0 {
		o.DrainGracePeriod = 5 * time.Second
	}
	if o.GracefulShutdownTimeout == 0 {
		o.GracefulShutdownTimeout = 30 * time.Second
	}
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
}

// validate reports every invalid option at once. Lease and ring parameters
// are validated again, in detail, by lease.New and handoff.New.
func (o *Options) validate() error {
	var errs []error
	if o.Ring == "" {
		errs = append(errs, errors.New("Ring is empty: name the ring (every replica of the operator uses the same name)"))
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("Namespace is empty: name the namespace that holds the ring's Leases (the operator's own, usually)"))
	}
	if o.Identity == "" {
		errs = append(errs, errors.New("Identity is empty and neither $POD_NAME nor the hostname gave one: set it to the pod name"))
	}
	if o.RenewPeriod >= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("RenewPeriod (%s) must be shorter than RenewDeadline (%s)", o.RenewPeriod, o.RenewDeadline))
	}
	if o.DrainGracePeriod < 0 || o.GracefulShutdownTimeout < 0 {
		errs = append(errs, errors.New("DrainGracePeriod and GracefulShutdownTimeout must not be negative"))
	}
	if o.CacheMode != CacheFull && o.CacheMode != CacheLabels {
		errs = append(errs, fmt.Errorf("CacheMode %q is not one of %q, %q", o.CacheMode, CacheFull, CacheLabels))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crshard: invalid Options: %w", err)
	}
	return nil
}
