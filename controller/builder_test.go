package controller_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/controllertest"
	"github.com/kshard/kshard/shard"
)

func newManager() *controllertest.Manager {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	return &controllertest.Manager{
		Scheme:            clientgoscheme.Scheme,
		Mapper:            m,
		Cache:             controllertest.NewInformers(clientgoscheme.Scheme),
		ControllerOptions: controller.Options{Registerer: prometheus.NewRegistry()},
	}
}

var noop = controller.ReconcilerFunc(func(context.Context, controller.Request) (controller.Result, error) {
	return controller.Result{}, nil
})

type widget struct{ corev1.ConfigMap } // a type no scheme knows

func TestBuilderRejectsBadInput(t *testing.T) {
	cases := []struct {
		name  string
		build func(*controllertest.Manager) error
		want  string
	}{
		{"nil reconciler", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Complete(nil)
		}, "reconciler is nil"},
		{"nil ReconcilerFunc", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Complete(controller.ReconcilerFunc(nil))
		}, "nil ReconcilerFunc"},
		{"nil manager", func(*controllertest.Manager) error {
			return controller.NewControllerManagedBy(nil).For(&corev1.ConfigMap{}).Complete(noop)
		}, "manager is nil"},
		{"For twice", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).For(&corev1.Secret{}).Complete(noop)
		}, "For called more than once"},
		{"type unknown to the scheme", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&widget{}).Complete(noop)
		}, "not registered in the scheme"},
		{"kind not served", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Owns(&corev1.Pod{}).Complete(noop)
		}, "does not serve /v1, Kind=Pod"},
		{"Owns without For", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).Named("x").Owns(&corev1.Secret{}).Complete(noop)
		}, "Owns needs For"},
		{"no For and no name", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).Watches(&corev1.Secret{}, controller.EnqueueRequestForObject{}).Complete(noop)
		}, "no For kind and no name"},
		{"nil handler", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Watches(&corev1.Secret{}, nil).Complete(noop)
		}, "event handler is nil"},
		{"metadata-only without TypeMeta", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&metav1.PartialObjectMetadata{}).Complete(noop)
		}, "no TypeMeta"},
		{"negative option", func(m *controllertest.Manager) error {
			return controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).
				WithOptions(controller.Options{DrainGracePeriod: -time.Second}).Complete(noop)
		}, "DrainGracePeriod is -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager()
			err := tc.build(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if len(m.Runnables()) != 0 {
				t.Fatal("a failed build added a runnable to the manager")
			}
		})
	}
}

func TestControllerNamesAreUniquePerRegisterer(t *testing.T) {
	m := newManager()
	if err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Complete(noop); err != nil {
		t.Fatal(err)
	}
	err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Complete(noop)
	if err == nil || !strings.Contains(err.Error(), `"configmap"`) {
		t.Fatalf("second controller named configmap: %v, want a name clash error", err)
	}
	if err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{SkipNameValidation: true}).Complete(noop); err != nil {
		t.Fatalf("SkipNameValidation: %v", err)
	}
	other := newManager() // another registry: the name is free there
	if err := controller.NewControllerManagedBy(other).For(&corev1.ConfigMap{}).Complete(noop); err != nil {
		t.Fatalf("same name in another registry: %v", err)
	}
}

func TestBuilderForOwnsWatches(t *testing.T) {
	m := newManager()
	var mu sync.Mutex
	seen := map[types.NamespacedName]int{}
	reconciled := make(chan types.NamespacedName, 100)
	ext := make(chan controller.GenericEvent)
	c, err := controller.NewControllerManagedBy(m).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		WatchesSource(controller.Channel(ext, controller.EnqueueRequestForObject{})).
		WithEventFilter(controller.NewPredicateFuncs(func(o controller.Object) bool { return o.GetName() != "ignored" })).
		Build(controller.ReconcilerFunc(func(_ context.Context, r controller.Request) (controller.Result, error) {
			mu.Lock()
			seen[r.NamespacedName]++
			mu.Unlock()
			reconciled <- r.NamespacedName
			return controller.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "configmap" {
		t.Fatalf("default name %q, want configmap", c.Name())
	}
	if cs := m.Controllers(); len(cs) != 1 || cs[0] != c {
		t.Fatal("the manager did not receive the controller")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "owner", UID: "u1"}}
	if err := m.Cache.Add(cm); err != nil {
		t.Fatal(err)
	}
	if err := m.Cache.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ignored", UID: "u2"}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	expect := func(want types.NamespacedName) {
		t.Helper()
		select {
		case got := <-reconciled:
			if got != want {
				t.Fatalf("reconciled %v, want %v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for a reconcile of %v", want)
		}
	}
	expect(types.NamespacedName{Namespace: "team", Name: "owner"})

	yes := true
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "s", UID: "u3",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u1", Controller: &yes}}}}
	if err := m.Cache.Add(secret); err != nil {
		t.Fatal(err)
	}
	expect(types.NamespacedName{Namespace: "team", Name: "owner"})
	secret.Data = map[string][]byte{"k": []byte("v")}
	if err := m.Cache.Update(secret); err != nil {
		t.Fatal(err)
	}
	expect(types.NamespacedName{Namespace: "team", Name: "owner"})

	ext <- controller.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "external"}}}
	expect(types.NamespacedName{Namespace: "x", Name: "external"})

	mu.Lock()
	defer mu.Unlock()
	if seen[types.NamespacedName{Namespace: "team", Name: "ignored"}] != 0 {
		t.Fatal("WithEventFilter did not filter the For watch")
	}
}

func TestManagerOptionsShardTheController(t *testing.T) {
	m := newManager()
	m.ControllerOptions.StartInactive = true
	m.ControllerOptions.Partitioner = shard.NewPartitioner(13)
	c, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Build(noop)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ActivePartitions(); got.Size() != 13 || !got.IsEmpty() {
		t.Fatalf("controller under a sharding manager: active %s of %d, want none of 13", got, got.Size())
	}
	_, err = controller.NewControllerManagedBy(m).For(&corev1.Secret{}).
		WithOptions(controller.Options{Partitioner: shard.NewPartitioner(7)}).Build(noop)
	if err == nil || !strings.Contains(err.Error(), "ring has 13") {
		t.Fatalf("a partitioner that disagrees with the ring: %v, want an error", err)
	}
}

// TestShardedBuilderRefusesUnreplayedSources: under a sharding manager a
// Channel source is refused at build time, naming it and the opt-out,
// because nothing would deliver again the events it dropped for partitions
// not active here; Options.AllowUnreplayedSources accepts it.
func TestShardedBuilderRefusesUnreplayedSources(t *testing.T) {
	m := newManager()
	m.ControllerOptions.StartInactive = true
	ext := make(chan controller.GenericEvent)
	_, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).
		WatchesSource(controller.Channel(ext, controller.EnqueueRequestForObject{})).Build(noop)
	if err == nil || !strings.Contains(err.Error(), "channel source") || !strings.Contains(err.Error(), "AllowUnreplayedSources") {
		t.Fatalf("a channel source under a sharding manager: %v, want it refused, naming the source and the opt-out", err)
	}
	if n := len(m.Controllers()); n != 0 {
		t.Fatalf("the refused controller was added to the manager (%d controllers)", n)
	}
	if _, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).
		WatchesSource(controller.Channel(ext, controller.EnqueueRequestForObject{})).
		WithOptions(controller.Options{AllowUnreplayedSources: true}).Build(noop); err != nil {
		t.Fatalf("with AllowUnreplayedSources: %v", err)
	}
	standalone := newManager()
	if _, err := controller.NewControllerManagedBy(standalone).Named("standalone").
		WatchesSource(controller.Channel(ext, controller.EnqueueRequestForObject{})).Build(noop); err != nil {
		t.Fatalf("a channel source on a standalone controller, which never replays: %v", err)
	}
}

var _ runtime.Object = &widget{}

// flakyMapper fails with a transport error until healed, as a discovery
// mapper does while the API server is unreachable.
type flakyMapper struct {
	meta.RESTMapper
	mu     sync.Mutex
	healed bool
}

func (f *flakyMapper) heal() { f.mu.Lock(); f.healed = true; f.mu.Unlock() }

func (f *flakyMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	f.mu.Lock()
	healed := f.healed
	f.mu.Unlock()
	if !healed {
		return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	return f.RESTMapper.RESTMapping(gk, versions...)
}

// An unreachable API server at build time is not a build error: the owner
// mapping is resolved when the controller starts, and owned objects still
// map to their owners then.
func TestBuilderDefersMappingWhileTheAPIServerIsUnreachable(t *testing.T) {
	m := newManager()
	flaky := &flakyMapper{RESTMapper: m.Mapper}
	m.Mapper = flaky
	reconciled := make(chan types.NamespacedName, 10)
	_, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
		Build(controller.ReconcilerFunc(func(_ context.Context, r controller.Request) (controller.Result, error) {
			reconciled <- r.NamespacedName
			return controller.Result{}, nil
		}))
	if err != nil {
		t.Fatalf("build with an unreachable API server: %v", err)
	}
	flaky.heal()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	yes := true
	if err := m.Cache.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "s", UID: "u3",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u1", Controller: &yes}}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-reconciled:
		if want := (types.NamespacedName{Namespace: "team", Name: "owner"}); got != want {
			t.Fatalf("reconciled %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owned Secret did not enqueue its owner")
	}
}

// An unserved kind is still a build error when the API server answers.
func TestBuilderRejectsUnservedKind(t *testing.T) {
	m := newManager()
	_, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Owns(&corev1.Pod{}).Build(noop)
	if err == nil || !strings.Contains(err.Error(), "does not serve") {
		t.Fatalf("Owns(Pod) with Pods unserved: err = %v, want one saying the API server does not serve it", err)
	}
}

// When the owner mapping, deferred at build time, still fails as the
// controller starts, Start's error names the controller once, then the
// source.
func TestDeferredOwnsErrorNamesTheControllerOnce(t *testing.T) {
	m := newManager()
	m.Mapper = &flakyMapper{RESTMapper: m.Mapper} // never heals
	c, err := controller.NewControllerManagedBy(m).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Build(noop)
	if err != nil {
		t.Fatalf("build with an unreachable API server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = c.Start(ctx)
	want := `controller "configmap": starting source: Owns(*v1.Secret): `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Start: %v; want an error starting %q", err, want)
	}
	if n := strings.Count(err.Error(), `controller "configmap"`); n != 1 {
		t.Fatalf("Start's error names the controller %d times, want once: %v", n, err)
	}
}
