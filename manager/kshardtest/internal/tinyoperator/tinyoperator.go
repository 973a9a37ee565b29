// Package tinyoperator is the smallest operator the test kit's own tests run:
// it reconciles the kit's ConfigMaps (kshardtest.IsObject) by reading them
// and sleeping a little, recording every reconcile.
package tinyoperator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/manager/kshardtest"
)

// Work is how long each reconcile takes.
const Work = 20 * time.Millisecond

// Run builds the operator's manager for r and runs it until ctx ends.
func Run(ctx context.Context, r kshardtest.Replica) error {
	mgr, err := manager.New(r.Config, r.Options)
	if err != nil {
		return err
	}
	work := controller.ReconcilerFunc(func(ctx context.Context, _ controller.Request) (controller.Result, error) {
		select {
		case <-time.After(Work):
			return controller.Result{}, nil
		case <-ctx.Done():
			return controller.Result{}, ctx.Err()
		}
	})
	err = controller.NewControllerManagedBy(kshardtest.RecordRing(mgr, r.Recorder)).
		For(&corev1.ConfigMap{}).
		Named("tiny").
		WithEventFilter(controller.NewPredicateFuncs(kshardtest.IsObject)).
		// Replicas in one process each build a controller named "tiny".
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: true}).
		Complete(kshardtest.RecordReconciles(r.Recorder, kshardtest.ConfigMapGen(mgr.GetCache()), work))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
