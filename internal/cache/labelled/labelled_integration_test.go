package labelled_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/cache/labelled"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// configMapClient is a Labelled's ObjectClient for ConfigMaps.
type configMapClient struct{ cs kubernetes.Interface }

func (c configMapClient) Get(ctx context.Context, ns, name string) (runtime.Object, error) {
	return c.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c configMapClient) PatchLabels(ctx context.Context, ns, name string, labels map[string]string) (string, error) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	cm, err := c.cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return "", err
	}
	return cm.ResourceVersion, nil
}

// labelledReplica is one Labelled over the fixture's ConfigMaps, with a
// handler that records what it was told.
type labelledReplica struct {
	lab *labelled.Labelled
	mu  sync.Mutex
	// seen: keys the handler was told of (true: present, false: deleted);
	// deletes: keys it was told were deleted.
	seen    map[string]bool
	deletes []string
}

func startLabelled(t *testing.T, cs kubernetes.Interface, p shard.Partitioner, tweaks ...func(*labelled.Options)) *labelledReplica {
	t.Helper()
	// Only the fixture's ConfigMaps: the control plane's own are no concern
	// of the test.
	lw := toolscache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = andLabel(o.LabelSelector, cachetest.ShardTestLabel)
	})
	opts := labelled.Options{
		LabelKey: cachetest.LabelKey, Partitioner: p, ListWatch: lw, Example: &corev1.ConfigMap{},
		Client: configMapClient{cs}, ConfirmAfter: 500 * time.Millisecond, LabelQPS: -1,
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	lab, err := labelled.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &labelledReplica{lab: lab, seen: map[string]bool{}}
	note := func(obj any, present bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm := obj.(*corev1.ConfigMap)
		r.mu.Lock()
		defer r.mu.Unlock()
		key := shard.KeyOf(cm.Namespace, cm.Name)
		r.seen[key] = present
		if !present {
			r.deletes = append(r.deletes, key)
		}
	}
	if _, err := lab.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note(obj, true) },
		UpdateFunc: func(_, obj any) { note(obj, true) },
		DeleteFunc: func(obj any) { note(obj, false) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); lab.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return r
}

func andLabel(selector, label string) string {
	if selector == "" {
		return label
	}
	return selector + "," + label
}

func (r *labelledReplica) cachedKeys() []string {
	var keys []string
	for _, obj := range r.lab.List() {
		cm := obj.(*corev1.ConfigMap)
		keys = append(keys, shard.KeyOf(cm.Namespace, cm.Name))
	}
	slices.Sort(keys)
	return keys
}

func (r *labelledReplica) deleted(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.deletes, key)
}

// keysIn lists every fixture ConfigMap and returns the keys of partitions
// in set, sorted.
func keysIn(t *testing.T, cs kubernetes.Interface, p shard.Partitioner, set shard.PartitionSet) []string {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{LabelSelector: cachetest.ShardTestLabel})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, cm := range list.Items {
		if key := shard.KeyOf(cm.Namespace, cm.Name); set.Has(p.Partition(key)) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// awaitCond polls cond; on timeout it fails the test, with what the
// optional state function says.
// TestLabelledCacheOnStockServer runs two replicas' label-sharded caches on
// an API server without the ShardedListAndWatch gate: each labels and holds
// the objects of its own partitions, and an object whose label is stripped,
// edited or dropped by a replace is never reported gone while it exists.
func TestLabelledCacheOnStockServer(t *testing.T) { testLabelledCacheOnStockServer(t) }

// TestLabelledCacheCompactingEveryGain runs the same with every gain of
// partitions compacted (MaxSegments 1): the move of step 7 hands the label
// segments over to a compaction while third parties' edits are still
// being restored.
func TestLabelledCacheCompactingEveryGain(t *testing.T) {
	testLabelledCacheOnStockServer(t, func(o *labelled.Options) { o.MaxSegments = 1 })
}

func testLabelledCacheOnStockServer(t *testing.T, tweaks ...func(*labelled.Options)) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cachetest.CreateShardingFixture(t, ctx, cs, 6, 10) // 60 unlabelled ConfigMaps
	p := shard.NewPartitioner(8)
	a, b := startLabelled(t, cs, p, tweaks...), startLabelled(t, cs, p, tweaks...)
	setA, setB := shard.NewPartitionSet(8, 0, 1, 2, 3), shard.NewPartitionSet(8, 4, 5, 6, 7)
	a.lab.Hold(setA)
	b.lab.Hold(setB)
	cachetest.Await(t, "both replicas to sync their partitions", time.Minute, func() bool {
		return a.lab.SyncedPartitions().Equal(setA) && b.lab.SyncedPartitions().Equal(setB)
	})
	// Synced before labelling: the unlabelled view already serves them.
	if got, want := a.cachedKeys(), keysIn(t, cs, p, setA); !slices.Equal(got, want) {
		t.Fatalf("replica A caches %v before labelling, want its partitions' %v", got, want)
	}
	a.lab.SetActive(setA)
	b.lab.SetActive(setB)
	cachetest.Await(t, "every ConfigMap to carry its partition label", time.Minute, func() bool { return labelsRestored(ctx, cs, p) })
	cachetest.Await(t, "each replica to cache exactly its partitions' objects", 30*time.Second, func() bool {
		return slices.Equal(a.cachedKeys(), keysIn(t, cs, p, setA)) && slices.Equal(b.cachedKeys(), keysIn(t, cs, p, setB))
	}, func() string {
		return fmt.Sprintf("A caches %v, want %v; B caches %v, want %v", a.cachedKeys(), keysIn(t, cs, p, setA), b.cachedKeys(), keysIn(t, cs, p, setB))
	})
	if n := a.lab.Stats().Patches.Load() + b.lab.Stats().Patches.Load(); n != 60 {
		t.Errorf("the replicas sent %d label patches for 60 objects, want one each", n)
	}

	// A victim of replica A's partitions.
	victim := a.cachedKeys()[0]
	ns, name, _ := toolscache.SplitMetaNamespaceKey(victim)
	victimP := p.Partition(victim)
	// Read it continuously while third parties change its label: never
	// NotFound, never a delete event.
	stopReading := readContinuously(a.lab, victim)
	relabelled := func(what string) {
		cachetest.Await(t, "the victim relabelled after "+what, 30*time.Second, func() bool {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && cm.Labels[cachetest.LabelKey] == shard.PartitionLabelValue(victimP)
		})
	}
	// 1. Strip the label (a JSON patch removing it).
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/labels/t.kshard.io~1xx1-key-p8"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled("a strip")
	// 2. Edit it to name a partition of replica B.
	other := (victimP + 4) % 8
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, cachetest.LabelKey, shard.PartitionLabelValue(other))), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled("an edit to another replica's partition")
	// 3. Edit it to a value that names no partition.
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"garbage"}}}`, cachetest.LabelKey)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled("an edit to a value that names no partition")
	// 4. Replace it (PUT) without the label, as an apply of a manifest by
	// another manager might.
	cur, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cur.Labels, cachetest.LabelKey)
	cur.Data = map[string]string{"replaced": "yes"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	relabelled("a replace without it")
	cachetest.Await(t, "replica A to cache the replaced state", 10*time.Second, func() bool {
		obj, ok, _ := a.lab.GetByKey(victim)
		return ok && obj.(*corev1.ConfigMap).Data["replaced"] == "yes"
	})
	checkMisses(t, victim, stopReading)
	if a.deleted(victim) {
		t.Errorf("replica A's handler was told %s was deleted while it existed", victim)
	}
	if _, ok, _ := b.lab.GetByKey(victim); ok {
		t.Errorf("replica B serves %s, of replica A's partition %d", victim, victimP)
	}

	// 5. A real deletion is passed on, after the confirming read.
	reads := a.lab.Stats().ConfirmReads.Load()
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cachetest.Await(t, "replica A to pass the deletion on", 30*time.Second, func() bool { return a.deleted(victim) })
	if _, ok, _ := a.lab.GetByKey(victim); ok {
		t.Errorf("replica A still serves %s after its deletion was confirmed", victim)
	}
	if a.lab.Stats().ConfirmReads.Load() <= reads {
		t.Error("the deletion was passed on without a confirming read")
	}

	// 6. A new object, created unlabelled, is labelled by its owner.
	created := ""
	for i := 0; created == ""; i++ {
		n := fmt.Sprintf("new-%d", i)
		if setA.Has(p.Partition(shard.KeyOf(ns, n))) {
			created = n
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: created, Labels: map[string]string{cachetest.ShardTestLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cachetest.Await(t, "the new object labelled and cached", 30*time.Second, func() bool {
		obj, ok, _ := a.lab.GetByKey(shard.KeyOf(ns, created))
		return ok && obj.(*corev1.ConfigMap).Labels[cachetest.LabelKey] == shard.PartitionLabelValue(p.Partition(shard.KeyOf(ns, created)))
	})

	// 7. Partitions move from B to A: A lists them (labelled already, no
	// write) and serves them.
	patches := a.lab.Stats().Patches.Load() + b.lab.Stats().Patches.Load()
	moved := shard.NewPartitionSet(8, 4, 5)
	b.lab.SetActive(setB.Difference(moved))
	b.lab.Hold(setB.Difference(moved))
	a.lab.Hold(setA.Union(moved))
	cachetest.Await(t, "replica A to sync the moved partitions", 30*time.Second, func() bool {
		return a.lab.SyncedPartitions().Equal(setA.Union(moved))
	})
	a.lab.SetActive(setA.Union(moved))
	if got, want := a.cachedKeys(), keysIn(t, cs, p, setA.Union(moved)); !slices.Equal(got, want) {
		t.Errorf("after the move replica A caches %v, want %v", got, want)
	}
	cachetest.Await(t, "replica B to drop the moved partitions", 10*time.Second, func() bool {
		return slices.Equal(b.cachedKeys(), keysIn(t, cs, p, setB.Difference(moved)))
	})
	if n := a.lab.Stats().Patches.Load() + b.lab.Stats().Patches.Load(); n != patches {
		t.Errorf("the move wrote %d labels, want none", n-patches)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted victim reads %v", err)
	}

	// 8. A third party edits an object's label to another partition while
	// both its own partition and the named one are between owners (a
	// crash, say): the named one's new owner lists it before it
	// activates, and its own partition's new owner never sees it. It must
	// be relabelled when the named partition activates, not on the
	// object's next change, which may never come.
	heldA := setA.Union(moved)
	victim = a.cachedKeys()[0]
	ns, name, _ = toolscache.SplitMetaNamespaceKey(victim)
	own, named := p.Partition(victim), 6
	a.lab.SetActive(heldA.Difference(shard.NewPartitionSet(8, own)))
	a.lab.Hold(heldA.Difference(shard.NewPartitionSet(8, own)))
	b.lab.SetActive(shard.NewPartitionSet(8, 7))
	b.lab.Hold(shard.NewPartitionSet(8, 7))
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, cachetest.LabelKey, shard.PartitionLabelValue(named))), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	heldB := shard.NewPartitionSet(8, named, 7)
	b.lab.Hold(heldB)
	cachetest.Await(t, "replica B to sync the partition the label names", 30*time.Second, func() bool { return b.lab.SyncedPartitions().Equal(heldB) })
	b.lab.SetActive(heldB)
	a.lab.Hold(heldA)
	cachetest.Await(t, "replica A to sync the victim's partition again", 30*time.Second, func() bool { return a.lab.SyncedPartitions().Equal(heldA) })
	a.lab.SetActive(heldA)
	cachetest.Await(t, "the victim relabelled with its own partition and served by its owner", 30*time.Second, func() bool {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		_, served, _ := a.lab.GetByKey(victim)
		return err == nil && cm.Labels[cachetest.LabelKey] == shard.PartitionLabelValue(own) && served
	}, func() string {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		_, served, _ := a.lab.GetByKey(victim)
		return fmt.Sprintf("%s (partition %d) is labelled %q (read error %v); replica A serves it: %t", victim, own, cm.Labels[cachetest.LabelKey], err, served)
	})

	// 9. Many labels changed at once, each object moving between the
	// views again and again as third parties change its label and the
	// replicas restore it: a read never misses one.
	victims := a.cachedKeys()
	stopReading = readContinuously(a.lab, victims...)
	// Deferred, so the misses are reported even if the relabelling below
	// times out.
	defer func() {
		checkMisses(t, "an object that existed while its label changed", stopReading)
	}()
	edits := []struct {
		pt    types.PatchType
		patch string
	}{
		{types.JSONPatchType, `[{"op":"remove","path":"/metadata/labels/t.kshard.io~1xx1-key-p8"}]`},
		{types.MergePatchType, fmt.Sprintf(`{"metadata":{"labels":{%q:"garbage"}}}`, cachetest.LabelKey)},
		{types.MergePatchType, fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, cachetest.LabelKey, shard.PartitionLabelValue(7))},
	}
	for i := range 300 {
		key := victims[i%len(victims)]
		ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
		e := edits[(i+i/len(victims))%len(edits)] // each victim gets every edit in turn
		// A strip of a label a third party removed a moment ago fails; so
		// be it.
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, e.pt, []byte(e.patch), metav1.PatchOptions{}); err != nil && !apierrors.IsInvalid(err) {
			t.Fatal(err)
		}
	}
	cachetest.Await(t, "every object relabelled after the burst", 30*time.Second, func() bool {
		return slices.Equal(keysIn(t, cs, p, heldA), a.cachedKeys()) && labelsRestored(ctx, cs, p)
	}, func() string {
		list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: cachetest.ShardTestLabel})
		var wrong []string
		for _, cm := range list.Items {
			if key := shard.KeyOf(cm.Namespace, cm.Name); cm.Labels[cachetest.LabelKey] != shard.PartitionLabelValue(p.Partition(key)) {
				wrong = append(wrong, fmt.Sprintf("%s (partition %d) labelled %q", key, p.Partition(key), cm.Labels[cachetest.LabelKey]))
			}
		}
		return fmt.Sprintf("replica A caches %d objects, want %d; wrong labels (list error %v): %v", len(a.cachedKeys()), len(keysIn(t, cs, p, heldA)), err, wrong)
	})
}

// checkMisses stops the reader and fails the test when any of its reads
// missed: an object that exists is never reported gone.
func checkMisses(t *testing.T, what string, stop func() ([]string, int)) {
	t.Helper()
	if misses, reads := stop(); len(misses) > 0 {
		t.Errorf("%d of %d reads missed %s, first %v", len(misses), reads, what, misses[:min(len(misses), 5)])
	}
}

// readContinuously reads keys from lab in a loop until the returned stop
// function is called, which returns the reads that found nothing or failed
// and how many reads there were.
func readContinuously(lab *labelled.Labelled, keys ...string) (stop func() (misses []string, reads int)) {
	done, stopped := make(chan struct{}), make(chan struct{})
	var misses []string
	reads := 0
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, key := range keys {
				if _, ok, err := lab.GetByKey(key); !ok || err != nil {
					misses = append(misses, fmt.Sprintf("%s (found %t, %v)", key, ok, err))
				}
				reads++
			}
		}
	}()
	return func() ([]string, int) {
		close(done)
		<-stopped
		return misses, reads
	}
}

// labelsRestored reports whether every fixture ConfigMap carries its own
// partition's label.
func labelsRestored(ctx context.Context, cs kubernetes.Interface, p shard.Partitioner) bool {
	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: cachetest.ShardTestLabel})
	if err != nil {
		return false
	}
	for _, cm := range list.Items {
		if cm.Labels[cachetest.LabelKey] != shard.PartitionLabelValue(p.Partition(shard.KeyOf(cm.Namespace, cm.Name))) {
			return false
		}
	}
	return true
}
