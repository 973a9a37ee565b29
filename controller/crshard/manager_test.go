package crshard

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The ring's manager refuses, by name, what would run unsharded on every
// replica, and accepts what the ring opted in or was told is meant for
// every replica.
func TestManagerRefusesWhatWouldRunOnEveryReplica(t *testing.T) {
	r := newTestRing(t, 0)
	opts := crmanager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if _, err := r.NewManager(unreachable(), crmanager.Options{LeaderElection: true, LeaderElectionID: "x"}); err == nil || !strings.Contains(err.Error(), "LeaderElection") {
		t.Errorf("NewManager with leader election: %v, want it refused", err)
	}
	mgr, err := r.NewManager(unreachable(), opts)
	if err != nil {
		t.Fatal(err)
	}
	nop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	run := crmanager.RunnableFunc(func(context.Context) error { return nil })

	err = builder.ControllerManagedBy(mgr).Named("plain").For(&corev1.ConfigMap{}).Complete(nop)
	if err == nil || !strings.Contains(err.Error(), "not opted into the ring") || !strings.Contains(err.Error(), "crshard.ControllerManagedBy") {
		t.Errorf("a plain controller: %v, want it refused naming crshard.ControllerManagedBy", err)
	}
	if err := ControllerManagedBy(mgr).Named("sharded").For(&corev1.ConfigMap{}).Complete(nop); err != nil {
		t.Errorf("a controller built with crshard.ControllerManagedBy: %v", err)
	}
	copts, err := r.Options(mgr, controller.Options{Reconciler: nop}, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.New("viaoptions", mgr, copts); err != nil {
		t.Errorf("controller.New on Ring.Options: %v", err)
	}
	if _, err := controller.New("unopted", mgr, controller.Options{Reconciler: nop}); err == nil {
		t.Error("controller.New without Ring.Options was accepted")
	}
	if err := mgr.Add(run); err == nil || !strings.Contains(err.Error(), "AddSingleton") {
		t.Errorf("a Runnable that needs leader election: %v, want it refused naming AddSingleton", err)
	}
	if err := mgr.Add(EveryReplica(run)); err != nil {
		t.Errorf("EveryReplica(runnable): %v", err)
	}
	if got := ControllerManagedBy(mgr).ring; got != r {
		t.Errorf("ControllerManagedBy(mgr) found ring %p, want %p (NewManager sets the ring up)", got, r)
	}
}
