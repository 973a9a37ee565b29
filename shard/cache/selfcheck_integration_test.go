package cache_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// metadataLists counts the metadata-only LISTs sent through it (the
// self-check's: nothing else in the test lists metadata) and the bytes of
// their responses.
type metadataLists struct {
	next            http.RoundTripper
	requests, bytes atomic.Int64
}

func (m *metadataLists) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
		return resp, err
	}
	m.requests.Add(1)
	resp.Body = countingBody{resp.Body, &m.bytes}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestSelfCheckFindsAnObjectMissingFromTheStore runs a cache sharded by
// labels with a self-check every second over 1,000 ConfigMaps, a quarter of
// them created unlabelled, on a real API server. While the active
// partitions are labelled and a writer changes, creates and deletes
// objects, every check finds nothing missing. Then one object is deleted
// from its label segment's store behind the cache's back, as a bug would
// lose it: the next check reports it (within two intervals is the bound;
// it existed unchanged at the previous check, so one suffices), through
// CheckReport and ModeReport, and relists the segments, after which the
// cache serves it again and the checks find nothing missing.
func TestSelfCheckFindsAnObjectMissingFromTheStore(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const partitions, objects = 8, 1000
	p := shard.NewPartitioner(partitions)
	ns := "self-check"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(name string, labelled bool) error {
		var labels map[string]string
		if labelled {
			labels = map[string]string{cachetest.LabelKey: shard.PartitionLabelValue(p.Partition(shard.KeyOf(ns, name)))}
		}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"v": "0"},
		}, metav1.CreateOptions{})
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < objects; i += 8 {
				if err := create(fmt.Sprintf("cm-%04d", i), i%4 != 0); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	const interval = time.Second
	cfg := rest.CopyConfig(cp.Config())
	lists := &metadataLists{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lists.next = rt; return lists })
	c, err := cache.New(cfg, cache.Options{Namespace: ns, Sharding: &cache.Sharding{
		Labels: &cache.LabelSharding{Key: cachetest.LabelKey, Partitioner: p, QPS: -1, CheckInterval: interval},
		Logger: testr.New(t),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareRoute(&corev1.ConfigMap{}, shard.RouteSelf); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = c.Start(runCtx) })
	t.Cleanup(func() { stop(); run.Wait() })
	inf, err := c.Informer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	lab, ok := inf.(*labelled.Labelled)
	if !ok {
		t.Fatalf("ConfigMaps are cached by %T, want a *labelled.Labelled", inf)
	}
	held := shard.NewPartitionSet(partitions, 0, 1, 2, 4, 5, 7)
	c.Hold(held)
	c.SetActive(held)
	cachetest.Await(t, "the held partitions to sync", time.Minute, func() bool { return c.SyncedPartitions().Equal(held) })

	// Healthy, under churn: the labeller moves the unlabelled objects of
	// the active partitions into their label segments, and a writer
	// changes, creates and deletes objects, while checks run.
	// The report as users read it: the kind's ModeReport.
	report := func() cache.CheckReport {
		for _, m := range c.ModeReport() {
			if m.Kind.Kind == "ConfigMap" && m.SelfCheck != nil {
				return *m.SelfCheck
			}
		}
		t.Fatal("ModeReport has no self-check report of ConfigMaps")
		return cache.CheckReport{}
	}
	churnCtx, stopChurn := context.WithCancel(ctx)
	var churn sync.WaitGroup
	churn.Go(func() {
		pace := time.NewTicker(10 * time.Millisecond) // a writer's pace
		defer pace.Stop()
		for i := 0; churnCtx.Err() == nil; i++ {
			name := fmt.Sprintf("cm-%04d", (i*7)%objects)
			_, _ = cs.CoreV1().ConfigMaps(ns).Patch(churnCtx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"v":"%d"}}`, i), metav1.PatchOptions{})
			extra := fmt.Sprintf("extra-%04d", i)
			_ = create(extra, i%2 == 0)
			if i >= 3 {
				_ = cs.CoreV1().ConfigMaps(ns).Delete(churnCtx, fmt.Sprintf("extra-%04d", i-3), metav1.DeleteOptions{})
			}
			select {
			case <-churnCtx.Done():
			case <-pace.C:
			}
		}
	})
	start := report().Checks
	worst := 0
	cachetest.Await(t, "five checks under churn", time.Minute, func() bool {
		r := report()
		worst = max(worst, r.Missing)
		return r.Checks >= start+5
	})
	stopChurn()
	churn.Wait()
	if worst != 0 {
		t.Fatalf("a check of a healthy cache under churn found %d objects missing", worst)
	}

	// Steady: what a check costs.
	r0, req0, bytes0 := report(), lists.requests.Load(), lists.bytes.Load()
	cachetest.Await(t, "three more checks", 30*time.Second, func() bool { return report().Checks >= r0.Checks+3 })
	r1 := report()
	if r1.Missing != 0 {
		t.Fatalf("a check of a healthy cache found %d objects missing: %v", r1.Missing, r1.Examples)
	}
	checks := r1.Checks - r0.Checks
	t.Logf("a check: %d objects compared, %d LISTs, %v; about %d KiB of metadata a check (%d requests, %d bytes over %d checks)",
		r1.Checked, r1.Requests, r1.Took, (lists.bytes.Load()-bytes0)/checks/1024, lists.requests.Load()-req0, lists.bytes.Load()-bytes0, checks)
	if r1.Checked < objects/2 || r1.Requests < 3 {
		t.Fatalf("the last check compared %d objects in %d LISTs; want the held share (over %d) in pages of 500 and one LIST of the unlabelled", r1.Checked, r1.Requests, objects/2)
	}

	// A bug loses an object from its store.
	var victim string
	for i := 1; victim == ""; i++ {
		if name := fmt.Sprintf("cm-%04d", i); i%4 != 0 && held.Has(p.Partition(shard.KeyOf(ns, name))) {
			victim = shard.KeyOf(ns, name)
		}
	}
	before := report()
	if n := lab.DropForTest(victim); n != 1 {
		t.Fatalf("%s was in %d stores, want 1", victim, n)
	}
	getVictim := func() error {
		var cm corev1.ConfigMap
		return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: strings.TrimPrefix(victim, ns+"/")}, &cm)
	}
	if err := getVictim(); err == nil {
		t.Fatalf("Get(%s) found the object dropped from its store", victim)
	}
	var found cache.CheckReport
	cachetest.Await(t, "a check to report the missing object", 30*time.Second, func() bool {
		found = report()
		return found.Missing > 0 || found.Checks > before.Checks+2
	})
	if found.Missing != 1 || !slices.Equal(found.Examples, []string{victim}) || found.Relists != 1 {
		t.Fatalf("%d checks after the loss: %d missing %v, %d relists; want %s within two checks, relisted once",
			found.Checks-before.Checks, found.Missing, found.Examples, found.Relists, victim)
	}
	if modes := c.ModeReport(); len(modes) != 1 || modes[0].SelfCheck == nil || modes[0].SelfCheck.Missing != 1 {
		t.Errorf("ModeReport does not carry the finding: %+v", modes)
	}
	t.Logf("reported missing %d check(s) after the loss", found.Checks-before.Checks)
	cachetest.Await(t, "the relist to serve it again and a check to find nothing missing", 30*time.Second, func() bool {
		r := report()
		return getVictim() == nil && r.Missing == 0 && r.Checks > found.Checks
	}, func() string { return fmt.Sprintf("Get: %v; report %+v", getVictim(), report()) })
	if r := report(); r.Relists != 1 {
		t.Errorf("%d relists, want 1", r.Relists)
	}
}
