package crshard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// copyReplica is one replica of a controller whose map function maps each
// Secret to the ConfigMap of the same name, which the reconciler creates
// (recording its identity): the For replay cannot produce that key, since
// no such ConfigMap exists until the Secret's event is reconciled.
type copyReplica struct {
	ring *Ring
	reg  *prometheus.Registry
	stop func() error
}

func startCopyReplica(t *testing.T, cp *controlplane.ControlPlane, ns, identity string) *copyReplica {
	t.Helper()
	cfg := cp.Config()
	reg := prometheus.NewRegistry()
	ring, err := New(cfg, Options{
		Ring: "replay", LeaseNamespace: ns, Identity: identity, Registerer: reg,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RenewPeriod: time.Second,
		GracefulShutdownTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := crmanager.New(cfg, crmanager.Options{
		Scheme:  clientgoscheme.Scheme,
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Two replicas of one controller in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient()
	err = ring.NewControllerManagedBy(mgr).Named("copy").For(&corev1.ConfigMap{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var s corev1.Secret
			if err := c.Get(ctx, req.NamespacedName, &s); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}, Data: map[string]string{"by": identity}}
			if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return &copyReplica{ring: ring, reg: reg, stop: stop}
}

// dropped is how many requests the gate refused for a partition not
// active here (kshard_gate_decisions_total{decision="foreign"}).
func (r *copyReplica) dropped(t *testing.T) float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "kshard_gate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == "foreign" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestMappedEventDroppedDuringHandoffIsReplayed: on a real API server, a
// Secret created while its mapped key's partition moves from r-0 to r-1 is
// dropped by both (r-0 revoked the partition, r-1 has not admitted it yet);
// r-1's activation replays the Watches handler over the cached Secrets, so
// the key is reconciled, by r-1.
func TestMappedEventDroppedDuringHandoffIsReplayed(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	// controller-runtime warns, with a stack, when its logger is used
	// before one is set.
	crlog.SetLogger(logr.Discard())
	const ns = "replay"
	admin, err := client.New(cp.Config(), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// The first activation after arming blocks until released: the
	// partitions it activates are then revoked at their previous owner and
	// not yet admitted at the new one.
	var armed atomic.Bool
	activating := make(chan []int, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	Observe(&Observer{Ring: func(kind string, parts []int) error {
		if kind == "activate" && armed.CompareAndSwap(true, false) {
			activating <- parts
			<-release
		}
		return nil
	}})
	t.Cleanup(func() { Observe(nil) })
	t.Cleanup(unblock) // runs before the replicas stop

	r0 := startCopyReplica(t, cp, ns, "r-0")
	waitUntil(t, time.Minute, "r-0 to own every partition", func() bool {
		for p := range r0.ring.parts.Count() {
			if !r0.ring.gate.Active(p) {
				return false
			}
		}
		return true
	})
	armed.Store(true)
	r1 := startCopyReplica(t, cp, ns, "r-1")
	var moving []int
	select {
	case moving = <-activating:
	case <-time.After(time.Minute):
		t.Fatal("timed out waiting for r-1 to activate partitions")
	}
	movingSet := map[int]bool{}
	for _, p := range moving {
		movingSet[p] = true
		if r0.ring.gate.Active(p) {
			t.Fatalf("partition %d is being activated at r-1 while still active at r-0", p)
		}
	}
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("in-%d", i); movingSet[r1.ring.parts.Of(ns, n)] {
			name = n
		}
	}
	drop0, drop1 := r0.dropped(t), r1.dropped(t)
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "both replicas to drop the Secret's mapped request", func() bool {
		return r0.dropped(t) > drop0 && r1.dropped(t) > drop1
	})
	unblock()

	var cm corev1.ConfigMap
	key := types.NamespacedName{Namespace: ns, Name: name}
	waitUntil(t, 30*time.Second, "the dropped event to be reconciled after r-1's activation", func() bool {
		return admin.Get(ctx, key, &cm) == nil
	})
	if by := cm.Data["by"]; by != "r-1" {
		t.Fatalf("the key was reconciled by %q, want r-1, its new owner", by)
	}
	if err := errors.Join(r1.stop(), r0.stop()); err != nil {
		t.Fatalf("stopping the replicas: %v", err)
	}
}
