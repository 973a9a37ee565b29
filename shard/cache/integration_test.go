package cache_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard/cache"
)

// Widget is a custom resource type known only to the test's scheme.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

type WidgetSpec struct {
	Size int `json:"size"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func (l *WidgetList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]Widget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Widget)
	}
	return &out
}

func widgetScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(cachetest.WidgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, cachetest.WidgetGV)
	return s
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestIntegrationCache(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; skipped with -short")
	}
	cp := controlplane.ForTest(t, controlplane.Options{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	dyn := dynamic.NewForConfigOrDie(cp.Config())

	c, err := cache.New(cp.Config(), cache.Options{Scheme: widgetScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Start(runCtx) })
	defer func() { cancel(); wg.Wait() }()

	// The Widget kind is not served yet: a clear error.
	_, err = c.Informer(ctx, &Widget{})
	if err == nil || !strings.Contains(err.Error(), "does not serve example.kshard.io/v1, Kind=Widget") {
		t.Fatalf("informer for an unserved kind: %v, want a does-not-serve error", err)
	}

	// Typed built-in kind: Get and List, with NotFound for a missing object.
	for _, name := range []string{"b", "a"} {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"}}, Data: map[string]string{"k": name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var cm corev1.ConfigMap
	await(t, "ConfigMap b in the cache", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "b"}, &cm) == nil
	})
	if cm.Data["k"] != "b" {
		t.Fatalf("cached ConfigMap data %v, want k=b", cm.Data)
	}
	cm.Data["k"] = "mutated" // a deep copy: the cache must not change
	var again corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "b"}, &again); err != nil || again.Data["k"] != "b" {
		t.Fatalf("Get after mutating a previous result: %v %v; Get must return deep copies", err, again.Data)
	}
	err = c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "missing"}, &cm)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object: %v, want NotFound", err)
	}
	var list corev1.ConfigMapList
	await(t, "both ConfigMaps listed", func() bool {
		if err := c.List(ctx, &list, "default"); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, it := range list.Items {
			if it.Labels["app"] == "x" {
				n++
			}
		}
		return n == 2
	})
	var other corev1.ConfigMapList
	if err := c.List(ctx, &other, "no-such-namespace"); err != nil || len(other.Items) != 0 {
		t.Fatalf("List in an empty namespace: %v, %d items", err, len(other.Items))
	}

	// Metadata-only: a separate informer holding PartialObjectMetadata.
	meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
	await(t, "metadata-only Get", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "a"}, meta) == nil
	})
	if meta.Labels["app"] != "x" || meta.Kind != "ConfigMap" {
		t.Fatalf("metadata-only object: labels %v kind %q", meta.Labels, meta.Kind)
	}
	metaList := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}}
	if err := c.List(ctx, metaList, "default"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range metaList.Items {
		if it.Labels["app"] == "x" {
			names = append(names, it.Name)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "a,b" {
		t.Fatalf("metadata-only list: %v, want a,b", names)
	}

	// Install the Widget CRD: the refreshing mapper finds it on the next
	// request, and the typed informer decodes Widgets with the test scheme.
	cachetest.CreateCRD(t, ctx, dyn, cachetest.WidgetCRD())
	widgets := dyn.Resource(cachetest.WidgetGV.WithResource("widgets")).Namespace("default")
	await(t, "Widget resource served", func() bool {
		_, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.kshard.io/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": "w1"}, "spec": map[string]interface{}{"size": 3},
		}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	await(t, "Widget informer created after the CRD", func() bool {
		_, err := c.Informer(ctx, &Widget{})
		return err == nil
	})
	var w Widget
	await(t, "Widget in the cache", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "w1"}, &w) == nil
	})
	if w.Spec.Size != 3 {
		t.Fatalf("cached Widget spec %+v, want size 3", w.Spec)
	}
	var wl WidgetList
	if err := c.List(ctx, &wl, ""); err != nil || len(wl.Items) != 1 {
		t.Fatalf("List Widgets: %v, %d items", err, len(wl.Items))
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("WaitForCacheSync returned false")
	}
}
