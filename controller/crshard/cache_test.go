package crshard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func newLabelsRing(t *testing.T) *Ring {
	t.Helper()
	r, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-0", CacheMode: CacheLabels, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNewCacheRefusesWhatItCannotHonour: every cache.Options field the
// sharded cache cannot honour is named in NewCache's error.
func TestNewCacheRefusesWhatItCannotHonour(t *testing.T) {
	r := newLabelsRing(t)
	opts := crcache.Options{
		DefaultNamespaces:            map[string]crcache.Config{"a": {}, "b": {LabelSelector: labels.Everything()}},
		DefaultLabelSelector:         labels.SelectorFromSet(labels.Set{"x": "y"}),
		DefaultFieldSelector:         fields.OneTermEqualSelector("metadata.name", "n"),
		DefaultTransform:             func(o any) (any, error) { return o, nil },
		DefaultWatchErrorHandler:     func(context.Context, *toolscache.Reflector, error) {},
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
		DefaultEnableWatchBookmarks:  ptr.To(false),
		ByObject:                     map[client.Object]crcache.ByObject{&corev1.Secret{}: {}},
		ReaderFailOnMissingInformer:  true,
		NewInformer: func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
			return nil
		},
	}
	_, err := r.NewCache(unreachable(), opts)
	if err == nil {
		t.Fatal("NewCache accepted options it cannot honour")
	}
	for _, field := range []string{"DefaultNamespaces", `DefaultNamespaces["b"]`, "DefaultLabelSelector", "DefaultFieldSelector", "DefaultTransform", "DefaultWatchErrorHandler",
		"DefaultUnsafeDisableDeepCopy", "DefaultEnableWatchBookmarks", "ByObject", "ReaderFailOnMissingInformer", "NewInformer"} {
		if !strings.Contains(err.Error(), "cache.Options."+field+" is not supported") {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
	// What the manager sets, one namespace and a resync are honoured.
	if _, err := r.NewCache(unreachable(), crcache.Options{DefaultNamespaces: map[string]crcache.Config{"a": {}}, SyncPeriod: ptr.To(time.Hour)}); err != nil {
		t.Fatalf("NewCache refused options it honours: %v", err)
	}
	if _, err := r.NewCache(unreachable(), crcache.Options{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a second NewCache on one ring: %v, want a refusal", err)
	}
}

// TestCacheModeMismatchesAreRefused: a labels ring on a manager whose cache
// is not the ring's, and an unknown CacheMode, fail with errors saying what
// to set. (NewCache in CacheMode full is controller-runtime's cache:
// TestNewCacheInFullModeIsControllerRuntimes.)
func TestCacheModeMismatchesAreRefused(t *testing.T) {
	r := newLabelsRing(t)
	mgr := newTestManager(t, false) // controller-runtime's own cache
	if err := r.SetupWithManager(mgr); err == nil || !strings.Contains(err.Error(), "NewCache: ring.NewCache") {
		t.Fatalf("a labels ring on a manager with its own cache: %v, want an error naming NewCache", err)
	}
	if _, err := New(unreachable(), Options{Ring: "test", LeaseNamespace: "ns", Identity: "r-0", CacheMode: "server", Registerer: prometheus.NewRegistry()}); err == nil || !strings.Contains(err.Error(), `CacheMode "server"`) {
		t.Fatalf("CacheMode server: %v, want a refusal", err)
	}
	// The ring's cache is accepted.
	r2 := newLabelsRing(t)
	mgr2, err := crmanager.New(unreachable(), crmanager.Options{NewCache: r2.NewCache, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.SetupWithManager(mgr2); err != nil {
		t.Fatalf("a labels ring on a manager built with ring.NewCache: %v", err)
	}
}

// With CacheMode full, NewCache is controller-runtime's own cache, so a
// manager is built the same way in either mode.
func TestNewCacheInFullModeIsControllerRuntimes(t *testing.T) {
	r := newTestRing(t, 0)
	c, err := r.NewCache(unreachable(), crcache.Options{DefaultNamespaces: map[string]crcache.Config{"a": {}, "b": {}}})
	if err != nil {
		t.Fatalf("NewCache in full mode: %v", err)
	}
	if _, sharded := c.(*shardedCache); sharded {
		t.Fatal("NewCache in full mode built the sharded cache")
	}
}
