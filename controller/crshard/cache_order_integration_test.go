package crshard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// ringAfterCache holds back every Lease request until the sharded cache's
// unlabelled view has watched, that is, listed and stored: the ring cannot
// form, nor tell the cache what to hold, before the cache's first LIST is
// done, as on a replica whose Lease informer is slow to start.
type ringAfterCache struct {
	next    http.RoundTripper
	label   string // the ring's partition label key
	once    sync.Once
	watched chan struct{}
}

func (r *ringAfterCache) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if q.Get("watch") == "true" && strings.Contains(q.Get("labelSelector"), r.label+" notin") {
		r.once.Do(func() { close(r.watched) })
	}
	if strings.Contains(req.URL.Path, "/apis/coordination.k8s.io/") {
		select {
		case <-r.watched:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return r.next.RoundTrip(req)
}

// TestShardedCacheStartedBeforeTheRing: a replica whose controller-runtime
// cache (CacheMode labels) made its ConfigMap informer before the manager
// started, and lists them before the ring's first update, must still cache, label and reconcile every one of them once its
// partitions are active, whether the object was unlabelled, labelled with
// a value naming no partition, or labelled right. Before the cache's sets
// were built at the ring's partition count, that first LIST dropped every
// unlabelled object for good: the replica ran the whole ring reconciling
// none of them.
func TestShardedCacheStartedBeforeTheRing(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ns := range []string{cacheTestNS, cacheTestLeaseNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := shard.PartitionLabelKey("cachetest", shard.Config{Partitions: cacheTestPartitions})
	parts := shard.NewPartitioner(cacheTestPartitions)
	var names []string
	for i := range cacheTestObjects {
		name := fmt.Sprintf("cm-%d", i)
		var labels map[string]string
		switch i % 3 {
		case 1:
			labels = map[string]string{key: "abc"}
		case 2:
			labels = map[string]string{key: shard.PartitionLabelValue(parts.Partition(shard.KeyOf(cacheTestNS, name)))}
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cacheTestNS, Labels: labels}, Data: map[string]string{"v": "1"}}
		if _, err := cs.CoreV1().ConfigMaps(cacheTestNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}

	cfg := rest.CopyConfig(cp.Config())
	gate := &ringAfterCache{label: key, watched: make(chan struct{})}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate })
	rs := newReconciles()
	// The ConfigMaps' informer exists before the manager starts, as when
	// a reconciler's setup asks for it: the ring has told the cache
	// nothing yet.
	a := startCacheReplica(t, cfg, "a", rs, func(mgr crmanager.Manager) {
		if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
	})

	waitFor(t, time.Minute, "the replica to run the whole ring", func() (bool, string) { return converged(ctx, parts, a) })
	waitFor(t, time.Minute, "every ConfigMap reconciled", func() (bool, string) {
		readers := rs.readers("1")
		return len(readers) == len(names), fmt.Sprintf("%d of %d reconciled", len(readers), len(names))
	})
	waitFor(t, time.Minute, "every ConfigMap cached and labelled with its partition", func() (bool, string) {
		items, err := a.cached(ctx)
		if err != nil {
			return false, err.Error()
		}
		list, err := cs.CoreV1().ConfigMaps(cacheTestNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cm := range list.Items {
			if want := shard.PartitionLabelValue(parts.Partition(shard.KeyOf(cm.Namespace, cm.Name))); cm.Labels[key] != want {
				return false, fmt.Sprintf("%s labelled %q, want %q", cm.Name, cm.Labels[key], want)
			}
		}
		return len(items) == len(names), fmt.Sprintf("%d of %d cached", len(items), len(names))
	})
	rs.check(t)
}
