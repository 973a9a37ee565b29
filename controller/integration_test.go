package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// cacheManager is the smallest real Manager: the shared cache of
// shard/cache plus a list of runnables the test starts itself.
type cacheManager struct {
	cache *cache.Cache
	opts  controller.Options
	mu    sync.Mutex
	added []controller.Runnable
}

func (m *cacheManager) GetInformers() controller.Informers       { return m.cache }
func (m *cacheManager) GetScheme() *runtime.Scheme               { return m.cache.Scheme() }
func (m *cacheManager) GetRESTMapper() meta.RESTMapper           { return m.cache.RESTMapper() }
func (m *cacheManager) GetLogger() logr.Logger                   { return logr.Discard() }
func (m *cacheManager) GetControllerOptions() controller.Options { return m.opts }
func (m *cacheManager) Add(r controller.Runnable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.added = append(m.added, r)
	return nil
}

// recorder records which requests a replica reconciled.
type recorder struct {
	mu   sync.Mutex
	seen map[controller.Request]int
}

func newRecorder() *recorder { return &recorder{seen: map[controller.Request]int{}} }

func (r *recorder) Reconcile(_ context.Context, req controller.Request) (controller.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[req]++
	return controller.Result{}, nil
}

func (r *recorder) count(req controller.Request) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[req]
}

func (r *recorder) keys() []controller.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []controller.Request
	for k := range r.seen {
		out = append(out, k)
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = map[controller.Request]int{}
}

func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// startAll runs the cache and the given controllers until the test ends.
func startAll(t *testing.T, c *cache.Cache, ctrls ...controller.Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Start(ctx) })
	for _, ctrl := range ctrls {
		wg.Go(func() {
			if err := ctrl.Start(ctx); err != nil {
				t.Errorf("controller %s: %v", ctrl.Name(), err)
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func request(ns, name string) controller.Request {
	r := controller.Request{}
	r.Namespace, r.Name = ns, name
	return r
}

func TestIntegrationOwnsAndShardGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ns := "it-controller"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cp.Config(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}

	// Bad input surfaces at build time against the real API server.
	type unknownKind struct{ corev1.ConfigMap }
	badMgr := &cacheManager{cache: c, opts: controller.Options{Registerer: prometheus.NewRegistry()}}
	err = controller.NewControllerManagedBy(badMgr).For(&metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Gadget"}}).Complete(newRecorder())
	if err == nil || !strings.Contains(err.Error(), "does not serve example.com/v1, Kind=Gadget") {
		t.Fatalf("building a controller For a kind the API server does not serve: %v, want a clear error", err)
	}
	err = controller.NewControllerManagedBy(badMgr).For(&unknownKind{}).Complete(newRecorder())
	if err == nil || !strings.Contains(err.Error(), "not registered in the scheme") {
		t.Fatalf("building a controller For a type unknown to the scheme: %v, want a clear error", err)
	}

	// Two "replicas" sharing one cache, each with its own half of the ring.
	partitioner := shard.NewPartitioner(shard.DefaultPartitions)
	half := [2]shard.PartitionSet{shard.NewPartitionSet(shard.DefaultPartitions), shard.NewPartitionSet(shard.DefaultPartitions)}
	for p := range shard.DefaultPartitions {
		half[p%2].Add(p)
	}
	var recs [2]*recorder
	var ctrls [2]controller.Controller
	for i := range 2 {
		recs[i] = newRecorder()
		mgr := &cacheManager{cache: c, opts: controller.Options{
			Registerer: prometheus.NewRegistry(), StartInactive: true, Partitioner: partitioner,
			MaxConcurrentReconciles: 2, DrainGracePeriod: time.Second,
		}}
		ctrls[i], err = controller.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Build(recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := ctrls[i].Activate(ctx, half[i]); err != nil {
			t.Fatal(err)
		}
	}
	startAll(t, c, ctrls[0], ctrls[1])
	owner := func(r controller.Request) int {
		if half[0].Has(partitioner.Partition(r.Key())) {
			return 0
		}
		return 1
	}

	// Phase 1: each ConfigMap is reconciled by the replica owning its
	// partition, and only by it.
	var cms []*corev1.ConfigMap
	for i := range 40 {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms = append(cms, cm)
	}
	for _, cm := range cms {
		r := request(ns, cm.Name)
		awaitCond(t, "reconcile of "+cm.Name+" by its owner", func() bool { return recs[owner(r)].count(r) > 0 })
	}
	for i := range 2 {
		for _, r := range recs[i].keys() {
			if owner(r) != i {
				t.Fatalf("replica %d reconciled %s of partition %d, which it does not own", i, r, partitioner.Partition(r.Key()))
			}
		}
	}

	// An owned Secret's create and update reconcile its owner.
	target := cms[0]
	r0 := request(ns, target.Name)
	own := owner(r0)
	yes := true
	before := recs[own].count(r0)
	secret, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "owned", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: target.Name, UID: target.UID, Controller: &yes}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	awaitCond(t, "owner reconciled after the Secret's creation", func() bool { return recs[own].count(r0) > before })
	before = recs[own].count(r0)
	secret.StringData = map[string]string{"k": "v"}
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, "owner reconciled after the Secret's update", func() bool { return recs[own].count(r0) > before })
	if recs[1-own].count(request(ns, "owned")) != 0 || recs[1-own].count(r0) != 0 {
		t.Fatal("the replica not owning the partition reconciled the owner or the Secret")
	}

	// Phase 2: replica 0 hands its half to replica 1: revoke (drain), then
	// activate. Every key of the moved half is reconciled by replica 1
	// (replayed from its cache), and replica 0 reconciles nothing more.
	if err := ctrls[0].Revoke(ctx, half[0], false); err != nil {
		t.Fatal(err)
	}
	recs[0].reset()
	recs[1].reset()
	if err := ctrls[1].Activate(ctx, half[0]); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms {
		r := request(ns, cm.Name)
		if owner(r) == 0 {
			awaitCond(t, "replay of "+cm.Name+" on the new owner", func() bool { return recs[1].count(r) > 0 })
		}
	}
	late, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	awaitCond(t, "new object reconciled by the replica owning everything", func() bool { return recs[1].count(request(ns, late.Name)) > 0 })
	if keys := recs[0].keys(); len(keys) != 0 {
		t.Fatalf("replica 0 reconciled %v after revoking all its partitions", keys)
	}
	if !ctrls[0].ActivePartitions().IsEmpty() || !ctrls[1].ActivePartitions().Equal(shard.FullPartitionSet(shard.DefaultPartitions)) {
		t.Fatalf("active partitions after the move: %d and %d", ctrls[0].ActivePartitions().Len(), ctrls[1].ActivePartitions().Len())
	}
}
