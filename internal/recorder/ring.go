package recorder

import (
	"context"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
)

// RecordRing wraps mgr so that the controllers built on it record into w
// when their partitions are activated and revoked, for the checker's
// partition ownership check. Build controllers on what it returns.
func RecordRing(mgr *manager.Manager, w *Writer) controller.Manager {
	return ringRecorder{Manager: mgr, rec: w}
}

type ringRecorder struct {
	*manager.Manager
	rec *Writer
}

func (m ringRecorder) Add(r controller.Runnable) error {
	if c, ok := r.(controller.Controller); ok {
		r = &recordedController{Controller: c, rec: m.rec}
	}
	return m.Manager.Add(r)
}

type recordedController struct {
	controller.Controller
	rec *Writer
}

func (c *recordedController) Activate(ctx context.Context, set shard.PartitionSet) error {
	if err := c.rec.Ring(KindActivate, set.Slice()); err != nil {
		return err
	}
	return c.Controller.Activate(ctx, set)
}

// Admit is how the manager activates (it replays separately): the
// partitions are recorded active before their gate opens.
func (c *recordedController) Admit(ctx context.Context, set shard.PartitionSet) error {
	if err := c.rec.Ring(KindActivate, set.Slice()); err != nil {
		return err
	}
	return c.Controller.Admit(ctx, set)
}

func (c *recordedController) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if err := c.rec.Ring(KindRevoke, set.Slice()); err != nil {
		return err
	}
	if err := c.Controller.Revoke(ctx, set, fence); err != nil {
		return err
	}
	return c.rec.Ring(KindRevoked, set.Slice())
}
