package crshard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
)

// NewManager builds controller-runtime's manager for the ring, in place of
// ctrl.NewManager(cfg, options), and sets the ring up with it. cfg is the
// config given to New. options must leave LeaderElection false; with
// CacheMode CacheLabels, options.NewCache defaults to the ring's NewCache.
//
// Unlike a manager from ctrl.NewManager, its Add refuses, naming the fix,
// what would run unsharded on every replica:
//   - a controller not opted into the ring: built with
//     ctrl.NewControllerManagedBy instead of crshard.ControllerManagedBy,
//     or with controller.New on options not from Ring.Options;
//   - a Runnable that needs leader election (controller-runtime's default
//     for one that does not say): the ring's manager elects no leader, so it
//     would run on every replica. Ring.AddSingleton runs it on one replica
//     at a time; EveryReplica marks one every replica should run.
//
// Builder errors surface at Complete, so each such mistake fails at start
// instead of reconciling every object on every replica.
func (r *Ring) NewManager(cfg *rest.Config, options crmanager.Options) (crmanager.Manager, error) {
	if options.LeaderElection {
		return nil, errors.New("crshard: NewManager: options.LeaderElection is true; leave it false: the ring shares the work among all replicas (Ring.AddSingleton runs what needs one)")
	}
	if r.opts.CacheMode == CacheLabels && options.NewCache == nil {
		options.NewCache = r.NewCache
	}
	inner, err := crmanager.New(cfg, options)
	if err != nil {
		return nil, err
	}
	m := &checkedManager{Manager: inner, ring: r}
	if err := r.SetupWithManager(m); err != nil {
		return nil, err
	}
	return m, nil
}

// checkedManager is the manager NewManager returns: controller-runtime's,
// with an Add that refuses unsharded controllers and runnables that need
// leader election.
type checkedManager struct {
	crmanager.Manager
	ring *Ring
}

// Add adds run to the manager unless it would run unsharded on every
// replica (see NewManager).
func (m *checkedManager) Add(run crmanager.Runnable) error {
	switch {
	case run == crmanager.Runnable(m.ring):
	case isController(run):
		if !m.ring.optedIn.takeOne() {
			return fmt.Errorf("crshard: a controller (%T) not opted into the ring was added to its manager: it would reconcile every object on every replica; "+
				"build it with crshard.ControllerManagedBy(mgr) instead of ctrl.NewControllerManagedBy(mgr), or give controller.New the options Ring.Options returns", run)
		}
	case needsLeaderElection(run):
		return fmt.Errorf("crshard: %T needs leader election, which the ring's manager does not run, so it would run on every replica; "+
			"add it with ring.AddSingleton(name, runnable) to run it on one replica at a time, or add crshard.EveryReplica(runnable) if every replica should run it", run)
	}
	return m.Manager.Add(run)
}

// unwrapManager returns controller-runtime's manager behind mgr.
func unwrapManager(mgr crmanager.Manager) crmanager.Manager {
	if m, ok := mgr.(*checkedManager); ok {
		return m.Manager
	}
	return mgr
}

// isController reports whether run is a controller of reconcile.Requests,
// which a builder or controller.New adds to the manager.
func isController(run crmanager.Runnable) bool {
	_, ok := run.(controller.Controller)
	return ok
}

// needsLeaderElection is controller-runtime's rule: a Runnable needs leader
// election unless it says it does not.
func needsLeaderElection(run crmanager.Runnable) bool {
	le, ok := run.(crmanager.LeaderElectionRunnable)
	return !ok || le.NeedLeaderElection()
}

// EveryReplica marks run as one every replica runs (it needs no leader
// election), for a manager from Ring.NewManager.
func EveryReplica(run crmanager.Runnable) crmanager.Runnable { return everyReplica{run} }

type everyReplica struct{ crmanager.Runnable }

func (everyReplica) NeedLeaderElection() bool { return false }

func (e everyReplica) Start(ctx context.Context) error { return e.Runnable.Start(ctx) }

// optedIn counts the controllers opted into the ring whose Add to a
// checked manager is still to come: the builder and Ring.Options opt a
// controller in before controller-runtime builds and adds it, and a
// controller's Add cannot tell from the controller itself whose it is.
type optedIn struct{ n atomic.Int64 }

func (o *optedIn) add() { o.n.Add(1) }

func (o *optedIn) takeOne() bool {
	for {
		n := o.n.Load()
		if n <= 0 {
			return false
		}
		if o.n.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
