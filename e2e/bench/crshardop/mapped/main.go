// Command mapped is a controller-runtime operator, converted to kshard's
// adapter, whose only source maps events of another kind to its keys: it
// has no For type, and Watches ConfigMaps with EnqueueRequestsFromMapFunc.
// Its reconciler records each ConfigMap's generation in an annotation. With
// no For objects to replay, an event dropped while its key's partition
// moves is reconciled only because activation replays the Watches handler;
// the chaos test (TestMappedOperatorChaos) checks that none is lost.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/controller/crshard"
	"github.com/kshard/kshard/internal/kitwriter"
)

const annObserved = "mapped.kshard.io/observed"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mapped:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		name          = flag.String("name", "mapped", "ring name")
		namespace     = flag.String("namespace", "kshard-test", "namespace of the ConfigMaps and of the ring's Leases")
		identity      = flag.String("identity", "", "replica identity")
		latency       = flag.Duration("latency", 5*time.Millisecond, "simulated latency of each reconcile that has work to do")
		leaseDuration = flag.Duration("lease-duration", 10*time.Second, "Lease duration")
		renewDeadline = flag.Duration("renew-deadline", 6666*time.Millisecond, "renew deadline")
		renewPeriod   = flag.Duration("renew-period", 2*time.Second, "renew period")
		drainGrace    = flag.Duration("drain-grace", 0, "drain grace period")
	)
	flag.Parse()
	if *identity == "" {
		return errors.New("--identity is required")
	}
	log.SetLogger(zap.New())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ring, err := crshard.New(cfg, crshard.Options{Ring: *name, LeaseNamespace: *namespace, Identity: *identity, LeaseDuration: *leaseDuration,
		RenewDeadline: *renewDeadline, RenewPeriod: *renewPeriod, DrainGracePeriod: *drainGrace})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := ring.SetupWithManager(mgr); err != nil {
		return err
	}
	r := &reconciler{client: mgr.GetClient(), latency: *latency}
	err = crshard.ControllerManagedBy(mgr).
		Named("mapped").
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(toKey), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return isKit(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return isKit(e.ObjectNew) && !maps.Equal(data(e.ObjectOld), data(e.ObjectNew))
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// toKey maps a ConfigMap to the key of the same name: the controller's own
// keys, which name no object of a For type.
func toKey(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

func isKit(o client.Object) bool {
	return o != nil && o.GetLabels()[kitwriter.Label] == kitwriter.LabelValue
}

func data(o client.Object) map[string]string {
	if cm, ok := o.(*corev1.ConfigMap); ok {
		return cm.Data
	}
	return nil
}

type reconciler struct {
	client  client.Client
	latency time.Duration
}

// Reconcile records the ConfigMap's generation in its annotation after the
// simulated latency, unless it is already there.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	gen := cm.Data[kitwriter.GenKey]
	if cm.Annotations[annObserved] == gen {
		return reconcile.Result{}, nil
	}
	t := time.NewTimer(r.latency)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return reconcile.Result{}, ctx.Err()
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annObserved: gen}}})
	err := r.client.Patch(ctx, &cm, client.RawPatch(types.MergePatchType, patch))
	return reconcile.Result{}, client.IgnoreNotFound(err)
}
