package cache_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/cache/labelled"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// watchSpy signals once a WATCH whose label selector holds want is sent:
// an informer's reflector watches only after its LIST has been filtered and
// stored, so the signal says the LIST is done.
type watchSpy struct {
	next http.RoundTripper
	want string
	once sync.Once
	seen chan struct{}
}

func (s *watchSpy) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if q.Get("watch") == "true" && strings.Contains(q.Get("labelSelector"), s.want) {
		s.once.Do(func() { close(s.seen) })
	}
	return s.next.RoundTrip(req)
}

// TestLabelledCacheStartedBeforeTheRing starts a cache sharded by labels
// under key partitioning (no range partitioner), creates its ConfigMap
// informer and lets the unlabelled view finish its first LIST before the
// ring's first Hold, as a replica does whose controllers start before its
// ring forms. Every object of the held partitions must then be cached, be
// it labelled, unlabelled, or labelled with a value naming no partition,
// and, once active, carry its partition's label. Before the cache's sets
// were built at the ring's partition count, that LIST dropped every object
// unseen (sets of size 0) and nothing listed them again: the replica ran
// its partitions on an empty store.
func TestLabelledCacheStartedBeforeTheRing(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const partitions = 8
	p := shard.NewPartitioner(partitions)
	ns := "started-before-ring"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Objects of every kind of label state, 12 of each.
	labelFor := map[string]func(key string) map[string]string{
		"none":    func(string) map[string]string { return nil },
		"garbled": func(string) map[string]string { return map[string]string{cachetest.LabelKey: "abc"} },
		"outside": func(string) map[string]string { return map[string]string{cachetest.LabelKey: "9999"} },
		"right": func(key string) map[string]string {
			return map[string]string{cachetest.LabelKey: shard.PartitionLabelValue(p.Partition(key))}
		},
	}
	var all []string
	for state, labels := range labelFor {
		for i := range 12 {
			name := fmt.Sprintf("%s-%02d", state, i)
			key := shard.KeyOf(ns, name)
			if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(key)},
				// Data, so that the API server tracks managedFields (an
				// object created with no field set gets none, ever).
				Data: map[string]string{"state": state},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			all = append(all, key)
		}
	}

	cfg := rest.CopyConfig(cp.Config())
	spy := &watchSpy{want: cachetest.LabelKey + " notin", seen: make(chan struct{})}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { spy.next = rt; return spy })
	c, err := cache.New(cfg, cache.Options{Namespace: ns, Sharding: &cache.Sharding{
		Labels: &cache.LabelSharding{Key: cachetest.LabelKey, Partitioner: p, QPS: -1},
		Logger: testr.New(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareRoute(&corev1.ConfigMap{}, shard.RouteSelf); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Start(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })
	if _, err := c.Informer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if got := c.ModeReport(); len(got) != 1 || got[0].Mode != cache.ModeLabels {
		t.Fatalf("ConfigMaps are cached as %+v, want mode %q", got, cache.ModeLabels)
	}
	select {
	case <-spy.seen:
	case <-ctx.Done():
		t.Fatal("the unlabelled view never finished its first LIST")
	}

	// The ring forms: this replica holds and then activates half the ring.
	held := shard.NewPartitionSet(partitions, 0, 2, 5, 7)
	var want []string
	for _, key := range all {
		if held.Has(p.Partition(key)) {
			want = append(want, key)
		}
	}
	slices.Sort(want)
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("%d of %d objects in the held partitions; the fixture does not exercise the filter", len(want), len(all))
	}
	c.Hold(held)
	cached := func() []string {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, ns); err != nil {
			return []string{"error: " + err.Error()}
		}
		var keys []string
		for _, cm := range list.Items {
			keys = append(keys, shard.KeyOf(cm.Namespace, cm.Name))
		}
		slices.Sort(keys)
		return keys
	}
	cachetest.Await(t, "the held partitions to sync", time.Minute, func() bool { return c.SyncedPartitions().Equal(held) })
	// Synced means complete: every object of the held partitions, whatever
	// its label, is served at once.
	if got := cached(); !slices.Equal(got, want) {
		t.Fatalf("synced on %v, the cache holds %v; want every object of those partitions %v", held, got, want)
	}
	for _, key := range want {
		var cm corev1.ConfigMap
		nsName := strings.SplitN(key, "/", 2)
		if err := c.Get(ctx, types.NamespacedName{Namespace: nsName[0], Name: nsName[1]}, &cm); err != nil {
			t.Errorf("Get(%s) of an existing object of a held partition: %v", key, err)
		}
	}

	c.SetActive(held)
	cachetest.Await(t, "the active partitions' objects to carry their partition label", time.Minute, func() bool {
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, cm := range list.Items {
			key := shard.KeyOf(cm.Namespace, cm.Name)
			if part := p.Partition(key); held.Has(part) && cm.Labels[cachetest.LabelKey] != shard.PartitionLabelValue(part) {
				return false
			}
		}
		return true
	})
	// The labels' writer is named in managedFields.
	i := slices.IndexFunc(want, func(key string) bool { return strings.HasPrefix(key, ns+"/none-") })
	if i < 0 {
		t.Fatalf("no unlabelled object among %v", want)
	}
	relabelled, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, want[i][len(ns)+1:], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, mf := range relabelled.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), cachetest.LabelKey) {
			managers = append(managers, mf.Manager)
		}
	}
	if !slices.Contains(managers, labelled.LabelFieldManager) {
		t.Errorf("the partition label of %s is managed by %v, want %q among them", want[i], managers, labelled.LabelFieldManager)
	}
	cachetest.Await(t, "the cache to hold exactly the held partitions' objects after labelling", 30*time.Second, func() bool {
		return slices.Equal(cached(), want)
	}, func() string { return fmt.Sprintf("cached %v, want %v", cached(), want) })
}
