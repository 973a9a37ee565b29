package crshard_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kshard/kshard/controller/crshard"
)

// A controller built with controller.New opts into the ring through
// Ring.Options(mgr, options, forObj), as the package doc says; this example
// compiles only while that is the signature. Namespace and Identity are
// left to their defaults, the pod's ($POD_NAMESPACE, $POD_NAME).
func ExampleRing_Options() {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Println(err)
		return
	}
	ring, err := crshard.New(cfg, crshard.Options{Ring: "my-operator"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{LeaderElection: false})
	if err != nil {
		fmt.Println(err)
		return
	}
	reconciler := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	options, err := ring.Options(mgr, controller.Options{Reconciler: reconciler}, &corev1.ConfigMap{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := controller.New("configmaps", mgr, options)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Watch(source.Kind(mgr.GetCache(), &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})); err != nil {
		fmt.Println(err)
		return
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Println(err)
	}
}
