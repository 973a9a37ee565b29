package crshard

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// ControllerManagedBy replaces ctrl.NewControllerManagedBy(mgr) where the
// ring is not at hand, such as a kubebuilder reconciler's SetupWithManager:
// it opts the controller into the ring set up with mgr (Ring.SetupWithManager,
// or an earlier Ring.NewControllerManagedBy). With no ring set up with mgr,
// Build and Complete fail, saying so.
//
// There is no typed variant: the ring partitions reconcile.Request's
// namespace and name, and a controller of another request type
// (builder.TypedControllerManagedBy) has no key the gate could partition.
func ControllerManagedBy(mgr crmanager.Manager) *Builder {
	rings.mu.Lock()
	r := rings.by[mgr]
	rings.mu.Unlock()
	if r == nil {
		return &Builder{mgr: mgr, b: builder.ControllerManagedBy(mgr), err: errNoRing}
	}
	return r.NewControllerManagedBy(mgr)
}

var errNoRing = errors.New("crshard: ControllerManagedBy: the manager has no ring; in main, build it with crshard.New before the manager and call ring.SetupWithManager(mgr) before setting up the controllers")
