package kshardtest

import (
	"context"
	"time"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/manager/kshardtest/recorder"
	"github.com/kshard/kshard/shard"
)

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
func RecordReconciles(rec *recorder.Writer, gen GenFunc, r controller.Reconciler) controller.Reconciler {
	return controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
		start := time.Now()
		g, ok, err := gen(ctx, req)
		if err != nil {
			return controller.Result{}, err
		}
		if !ok {
			return r.Reconcile(ctx, req)
		}
		rc, err := rec.Started(req.Key(), g, start)
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
		if err := rec.Ended(rc, unfinished); err != nil && failure == nil {
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
func RecordRing(mgr *manager.Manager, rec *recorder.Writer) controller.Manager {
	return ringRecorder{Manager: mgr, rec: rec}
}

type ringRecorder struct {
	*manager.Manager
	rec *recorder.Writer
}

func (m ringRecorder) Add(r controller.Runnable) error {
	if c, ok := r.(controller.Controller); ok {
		r = &recordedController{Controller: c, rec: m.rec}
	}
	return m.Manager.Add(r)
}

type recordedController struct {
	controller.Controller
	rec *recorder.Writer
}

func (c *recordedController) Activate(ctx context.Context, set shard.PartitionSet) error {
	if err := c.rec.Ring(recorder.KindActivate, set.Slice()); err != nil {
		return err
	}
	return c.Controller.Activate(ctx, set)
}

// Admit is how the manager activates (it replays separately): the
// partitions are recorded active before their gate opens.
func (c *recordedController) Admit(ctx context.Context, set shard.PartitionSet) error {
	if err := c.rec.Ring(recorder.KindActivate, set.Slice()); err != nil {
		return err
	}
	return c.Controller.Admit(ctx, set)
}

func (c *recordedController) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if err := c.rec.Ring(recorder.KindRevoke, set.Slice()); err != nil {
		return err
	}
	if err := c.Controller.Revoke(ctx, set, fence); err != nil {
		return err
	}
	return c.rec.Ring(recorder.KindRevoked, set.Slice())
}
