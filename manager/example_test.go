package manager_test

import (
	"context"
	"log"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
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
