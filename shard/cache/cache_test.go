package cache

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// offline returns a cache whose mapper knows only ConfigMaps, pointed at an
// address nothing listens on: these tests must not need a server.
func offline(t *testing.T) *Cache {
	t.Helper()
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type notInScheme struct{ corev1.ConfigMap }

func TestInformerErrorsNameTheProblem(t *testing.T) {
	c := offline(t)
	cases := map[string]struct {
		obj  Object
		want string
	}{
		"unknown type":        {&notInScheme{}, "is not registered in the scheme; add it"},
		"not served":          {&corev1.Pod{}, "the API server does not serve /v1, Kind=Pod"},
		"metadata no type":    {&metav1.PartialObjectMetadata{}, "has no TypeMeta"},
		"metadata not served": {&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Gadget"}}, "does not serve example.com/v1, Kind=Gadget"},
		"nil":                 {nil, "object is nil"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.Informer(context.Background(), tc.obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestInformerIsSharedPerKind(t *testing.T) {
	c := offline(t)
	a, err := c.Informer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Informer(context.Background(), &corev1.ConfigMap{})
	m, err := c.Informer(context.Background(), &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two informers for one kind")
	}
	if a == m {
		t.Fatal("the metadata-only informer must be separate from the typed one")
	}
}

func TestMisuseIsReported(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Fatal("New(nil) must fail")
	}
	c := offline(t)
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "b"}, &corev1.ConfigMap{})
	if err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("Get before Start: %v, want a not-started error", err)
	}
	if err := c.List(context.Background(), &corev1.ConfigMap{}, ""); err == nil {
		t.Fatal("List with a non-list type must fail")
	}
	if _, err := c.Informer(context.Background(), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Start returns at once, leaving the cache stopped
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err == nil {
		t.Fatal("second Start must fail")
	}
	if _, err := c.Informer(context.Background(), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("an existing informer stays available: %v", err)
	}
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
	if _, err := c.Informer(context.Background(), m); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("creating an informer after the cache stopped: %v, want a stopped error", err)
	}
}
