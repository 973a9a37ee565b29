package kshardtest

import (
	"context"
	"time"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager"
)

// Recorder records one replica run's reconciles and ring events for the
// kit's checker (Env.Check). Every Replica has one; RecordReconciles and
// RecordRing write into it.
type Recorder struct {
	w *recorder.Writer
}

// NotFound records that a reconcile's cache read of key, begun at start,
// has just found no object: the checker reports such a read of an object
// that existed then (an object a sharded cache lost). Record it from a
// reconciler that reads the kit's objects through its cache.
func (r *Recorder) NotFound(key string, start time.Time) error { return r.w.NotFound(key, start) }

// Close closes the Recorder's file. A replica binary's main closes its
// Replica's Recorder after the run returns; StartInProcess closes it.
func (r *Recorder) Close() error { return r.w.Close() }

// GenFunc reads the generation of the object req names, as the reconcile
// about to run sees it (typically from the manager's cache); ok is false
// when the object is gone, and that reconcile is not recorded. The lost
// update check compares it with the generations the writer wrote.
type GenFunc func(ctx context.Context, req controller.Request) (gen int64, ok bool, err error)

// RecordReconciles wraps r so that every reconcile is recorded into rec:
// its start, the generation gen reads, its end and whether it failed. A
// reconcile that returns an error, or whose context ended before it
// returned, is recorded as not finished, so it cannot count as having
// reconciled its generation.
func RecordReconciles(rec *Recorder, gen GenFunc, r controller.Reconciler) controller.Reconciler {
	return controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
		start := time.Now()
		g, ok, err := gen(ctx, req)
		if err != nil {
			return controller.Result{}, err
		}
		if !ok {
			return r.Reconcile(ctx, req)
		}
		rc, err := rec.w.Started(req.Key(), g, start)
		if err != nil {
			return controller.Result{}, err
		}
		res, failure := r.Reconcile(ctx, req)
		// A reconcile that returned nil after its context ended may have
		// stopped early without saying so: record it as unfinished, so the
		// checker errs towards reporting a lost update, never hiding one.
		unfinished := failure
		if unfinished == nil {
			unfinished = ctx.Err()
		}
		if err := rec.w.Ended(rc, unfinished); err != nil && failure == nil {
			return res, err
		}
		return res, failure
	})
}

// RecordRing wraps mgr so that the controllers built on it record when
// their partitions are activated and revoked, for the checker's partition
// ownership check. Build controllers on what it returns:
//
//	controller.NewControllerManagedBy(kshardtest.RecordRing(mgr, r.Recorder))
func RecordRing(mgr *manager.Manager, rec *Recorder) controller.Manager {
	return recorder.RecordRing(mgr, rec.w)
}
