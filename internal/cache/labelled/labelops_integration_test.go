package labelled_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/internal/cache/cachetest"
	"github.com/kshard/kshard/internal/cache/labelled"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
)

// lineLog collects log lines for a test to count.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *lineLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// Objects that carry the ring's label key with a value naming no partition
// (written by hand or by another tool) are seen through the unlabelled
// view, served from the start, and relabelled by their partition's owner;
// each is counted in Stats.ForeignValues, and the first is logged,
// once. Objects already labelled right are not written.
func TestForeignLabelValuesAreRelabelledAndCounted(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	cs := kubernetes.NewForConfigOrDie(cp.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := shard.NewPartitioner(8)
	ns := "foreign-values"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Values another tool might write: none names a partition of 8.
	foreign := []string{"garbage", "8", "99", "007", "", "p3", "3.0"}
	var all []string
	create := func(name string, labels map[string]string) {
		labels[cachetest.ShardTestLabel] = "true"
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		all = append(all, shard.KeyOf(ns, name))
	}
	for i, v := range foreign {
		create(fmt.Sprintf("foreign-%d", i), map[string]string{cachetest.LabelKey: v})
	}
	for i := range 4 { // labelled right already: never written
		name := fmt.Sprintf("right-%d", i)
		create(name, map[string]string{cachetest.LabelKey: shard.PartitionLabelValue(p.Partition(shard.KeyOf(ns, name)))})
	}
	for i := range 4 { // unlabelled: labelled, but not counted as foreign
		create(fmt.Sprintf("bare-%d", i), map[string]string{})
	}
	slices.Sort(all)

	logs := &lineLog{}
	r := startLabelled(t, cs, p, func(o *labelled.Options) { o.Logger = funcr.New(logs.add, funcr.Options{}) })
	held := shard.FullPartitionSet(8)
	r.lab.Hold(held)
	cachetest.Await(t, "the cache to sync", time.Minute, func() bool { return r.lab.SyncedPartitions().Equal(held) })
	if got := r.cachedKeys(); !slices.Equal(got, all) {
		t.Fatalf("before labelling the cache serves %v, want every object %v", got, all)
	}
	r.lab.SetActive(held)
	cachetest.Await(t, "every object to carry its partition", time.Minute, func() bool {
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, cm := range list.Items {
			if cm.Labels[cachetest.LabelKey] != shard.PartitionLabelValue(p.Partition(shard.KeyOf(cm.Namespace, cm.Name))) {
				return false
			}
		}
		return true
	})
	st := r.lab.Stats()
	cachetest.Await(t, "the relabelling to be counted", 10*time.Second, func() bool { return st.ForeignValues.Load() == int64(len(foreign)) },
		func() string { return fmt.Sprintf("ForeignValues %d, want %d", st.ForeignValues.Load(), len(foreign)) })
	if n := st.Patches.Load(); n != int64(len(foreign)+4) {
		t.Errorf("%d label patches, want %d: one per foreign or bare object, none for the labelled ones", n, len(foreign)+4)
	}
	if n := logs.count("names no partition"); n != 1 {
		t.Errorf("the foreign values were logged %d times, want once:\n%s", n, strings.Join(logs.lines, "\n"))
	}
	if got := r.cachedKeys(); !slices.Equal(got, all) {
		t.Errorf("after labelling the cache serves %v, want %v", got, all)
	}
	for _, key := range all {
		if r.deleted(key) {
			t.Errorf("%s was reported deleted while it moved from the unlabelled view to its label", key)
		}
	}
}
