package manager

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// With PartitionBy namespace and the gate on, the example operator's
// custom resource runs sharded: each replica's cache mode, kshard_cache_mode
// and /readyz?verbose say so, the two caches hold disjoint parts of the
// Widgets that together make all, and every Widget is reconciled, never on
// two replicas at once. (That the server's LISTs return only the held
// partitions is checked in shard/cache,
// TestIntegrationCustomResourcesSharded.)
func TestShardedCacheOfCustomResources(t *testing.T) {
	ctx := context.Background()
	cfg, cs, _ := shardedRing(t, true, 0, 0)
	dyn := dynamic.NewForConfigOrDie(cfg)
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(v1alpha1.CRD), 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(v1alpha1.GroupVersion.WithResource("widgets"))
	eventually(t, time.Minute, "Widgets served", func() (bool, string) {
		_, err := widgets.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
	var all []string
	for i := range 12 {
		ns := shardedNS(i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Widget",
				"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("w-%d", k)},
			}}
			if _, err := widgets.Namespace(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			all = append(all, shard.KeyOf(ns, w.GetName()))
		}
	}
	slices.Sort(all)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	start := func(id string) *replica {
		mgr, err := New(cfg, Options{
			Ring: "it", LeaseNamespace: "it", Identity: id, Scheme: scheme,
			PartitionBy: shard.SchemeNamespace, Partitions: 16,
			LeaseDuration: 3 * time.Second, RenewPeriod: 300 * time.Millisecond, RenewDeadline: 2 * time.Second,
			DrainGracePeriod: time.Second, GracefulShutdownTimeout: 20 * time.Second,
			MetricsBindAddress: "127.0.0.1:0", HealthProbeBindAddress: "127.0.0.1:0", Logger: testLogger(t, id),
		})
		if err != nil {
			t.Fatal(err)
		}
		err = controller.NewControllerManagedBy(mgr).For(&v1alpha1.Widget{}).
			WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: true}).
			Complete(controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
				begin := time.Now()
				j.add(interval{replica: id, key: req.Key(), start: begin, end: time.Now()})
				return controller.Result{}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		return runReplica(t, mgr)
	}
	r0, r1 := start("r-0"), start("r-1")
	eventually(t, 30*time.Second, "two replicas to split the ring", func() (bool, string) { return ringSettled(ctx, cs, "it", "r-0", "r-1") })
	eventually(t, 30*time.Second, "every Widget reconciled", func() (bool, string) {
		seen := map[string]bool{}
		for _, iv := range j.snapshot() {
			seen[iv.key] = true
		}
		return len(seen) >= len(all), fmt.Sprintf("%d of %d Widgets", len(seen), len(all))
	})

	kind := v1alpha1.GroupVersion.WithKind("Widget").String()
	cached := func(r *replica) []string {
		var l v1alpha1.WidgetList
		if err := r.mgr.GetCache().List(ctx, &l, ""); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, w := range l.Items {
			keys = append(keys, shard.KeyOf(w.Namespace, w.Name))
		}
		slices.Sort(keys)
		return keys
	}
	var k0, k1 []string
	eventually(t, 10*time.Second, "the caches to hold disjoint parts of every Widget", func() (bool, string) {
		k0, k1 = cached(r0), cached(r1)
		union := slices.Concat(k0, k1)
		slices.Sort(union)
		return slices.Equal(union, all) && len(k0) > 0 && len(k1) > 0, fmt.Sprintf("r-0 %d, r-1 %d of %d", len(k0), len(k1), len(all))
	})
	for _, r := range []*replica{r0, r1} {
		id := r.mgr.Identity()
		modes := r.mgr.GetCache().ModeReport()
		if len(modes) != 1 || modes[0].Kind.String() != kind || modes[0].Mode != cache.ModeSharded {
			t.Fatalf("%s: cache modes %+v, want %s sharded", id, modes, kind)
		}
		if _, body := get("http://" + r.mgr.MetricsAddr() + "/metrics"); !strings.Contains(body, fmt.Sprintf(`kshard_cache_mode{group=%q,kind=%q,kind_name="Widget",mode="sharded",version=%q} 1`, v1alpha1.GroupVersion.Group, kind, v1alpha1.GroupVersion.Version)) {
			t.Errorf("%s: /metrics has no kshard_cache_mode line for sharded Widgets", id)
		}
		if code, body := get("http://" + r.mgr.ProbeAddr() + "/readyz?verbose"); code != 200 || !strings.Contains(body, "[i]cache: "+kind+" sharded") {
			t.Errorf("%s: /readyz?verbose = %d %q, want ready with Widgets sharded", id, code, body)
		}
	}
	t.Logf("r-0 caches %d, r-1 %d of %d Widgets", len(k0), len(k1), len(all))
	if o := overlaps(j.snapshot()); len(o) > 0 {
		t.Fatalf("%d overlapping reconciles, first: %s", len(o), o[0])
	}
}
