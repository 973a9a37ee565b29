package segmented

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// During a compaction the new segment and those it replaces store the same
// partitions' objects: each object is counted once, whichever speaks for
// its partition, and objects of a partition not held are counted too.
func TestCountPartitionsCountsEachObjectOnce(t *testing.T) {
	const parts = 4
	rp, err := shard.NewRangePartitioner(shard.SchemeUID, parts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Partitioner: rp, ListWatch: &toolscache.ListWatch{}, Example: &corev1.ConfigMap{}, Filtered: true})
	if err != nil {
		t.Fatal(err)
	}
	// UIDs of partitions 1 and 2: three of 1, two of 2; one object without
	// UID, in no partition under the uid scheme.
	var objs []*corev1.ConfigMap
	n := map[int]int{}
	for i := 0; n[1] < 3 || n[2] < 2; i++ {
		uid := fmt.Sprintf("uid-%d", i)
		p, _ := rp.PartitionOfObject("x", uid)
		if (p == 1 && n[1] < 3) || (p == 2 && n[2] < 2) {
			n[p]++
			objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: uid, UID: types.UID(uid)}})
		}
	}
	objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "no-uid"}})
	store := func(parts shard.PartitionSet, synced bool) *segment {
		inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		for _, o := range objs {
			// The object without UID goes to every store: the client-side
			// check would drop it, but were it stored it must not count.
			if p, ok := rp.PartitionOfObject(o.Namespace, string(o.UID)); !ok || parts.Has(p) {
				if err := inf.GetStore().Add(o); err != nil {
					t.Fatal(err)
				}
			}
		}
		seg := &segment{parts: parts, inf: inf}
		seg.synced.Store(synced)
		return seg
	}
	// An older synced segment of partition 1, and a compaction of 1 and 2
	// that has not synced yet; only 1 is held now.
	older, compaction := store(shard.NewPartitionSet(parts, 1), true), store(shard.NewPartitionSet(parts, 1, 2), false)
	compaction.compacts = true
	s.segments = []*segment{older, compaction}
	s.held = shard.NewPartitionSet(parts, 1)
	want := []int{0, 3, 2, 0}
	for _, stage := range []string{"compaction listing", "compaction synced"} {
		got := make([]int, parts)
		s.CountPartitions(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: counts %v, want %v", stage, got, want)
		}
		compaction.synced.Store(true)
	}
	if got := len(s.List()); got != 3 {
		t.Fatalf("List returns %d objects, want partition 1's 3", got)
	}
}
