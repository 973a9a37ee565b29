package manager_test

import (
	"context"
	"log"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
)

// runReplica is the whole of a shard-aware operator: every replica runs it,
// and each reconciles only the ConfigMaps of the partitions the ring gives it.
func runReplica(ctx context.Context) error {
	cfg, err := manager.GetConfig() // $KUBECONFIG, the in-cluster service account, or ~/.kube/config
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Ring:           "configmap-stamper",   // every replica of this operator
		LeaseNamespace: "operators",           // where the ring's Leases live; it must exist
		Identity:       os.Getenv("POD_NAME"), // stable and unique: a StatefulSet pod name
	})
	if err != nil {
		return err
	}
	err = controller.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Complete(controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
			// Runs only for keys of partitions this replica owns, never at
			// the same time as on another replica.
			return controller.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx) // until ctx ends; then drains, hands off and leaves
}

// Compiled, not run: it needs a cluster.
func Example() {
	if err := runReplica(manager.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}

// runShardedReplica caches only its own namespaces' ConfigMaps (the sharded
// cache, Kubernetes 1.36 sharded list/watch), except those of the namespace
// "operators", which every replica caches whole: the shared settings
// ConfigMap there is read from the cache on every replica, and a change of
// it requeues every ConfigMap this replica owns.
func runShardedReplica(ctx context.Context) error {
	cfg, err := manager.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Ring: "configmap-stamper", LeaseNamespace: "operators", Identity: os.Getenv("POD_NAME"),
		PartitionBy:      shard.SchemeNamespace,
		SharedNamespaces: []string{"operators"},
	})
	if err != nil {
		return err
	}
	c := mgr.GetCache()
	settings := types.NamespacedName{Namespace: "operators", Name: "stamper-settings"}
	err = controller.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Watches(&corev1.ConfigMap{}, controller.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ controller.Object) []controller.Request {
			var all corev1.ConfigMapList
			if err := c.List(ctx, &all, ""); err != nil { // the namespaces this replica holds
				return nil
			}
			reqs := make([]controller.Request, 0, len(all.Items))
			for _, cm := range all.Items {
				reqs = append(reqs, controller.Request{NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}})
			}
			return reqs // the gate drops those of partitions owned elsewhere
		}), controller.NewPredicateFuncs(func(o controller.Object) bool {
			return o.GetNamespace() == settings.Namespace && o.GetName() == settings.Name
		})).
		Complete(controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
			var s corev1.ConfigMap
			if err := c.Get(ctx, settings, &s); err != nil { // from the cache, on every replica
				return controller.Result{}, err
			}
			return controller.Result{}, nil
		}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Compiled, not run: it needs a cluster with the ShardedListAndWatch gate
// (without it the cache falls back to listing everything, still correct).
func Example_sharedNamespaces() {
	if err := runShardedReplica(manager.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}
