package cache

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/shard"
)

// A shared namespace's partition is held from the start and stays held
// whatever the ring asks the cache to hold.
func TestSharedNamespacesAreAlwaysHeld(t *testing.T) {
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 271)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Sharding: &Sharding{Partitioner: rp, SharedNamespaces: []string{"operator-system"}}})
	if err != nil {
		t.Fatal(err)
	}
	// A sharded kind's informer, not run: Hold only records its set.
	seg, err := segmented.New(segmented.Options{Partitioner: rp, ListWatch: &toolscache.ListWatch{}, Example: &corev1.ConfigMap{}})
	if err != nil {
		t.Fatal(err)
	}
	c.informers[informerKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}] = &entry{part: seg}
	p, _ := rp.PartitionOfObject("operator-system", "")
	other := (p + 1) % rp.Count()
	if got := c.held.Slice(); len(got) != 1 || got[0] != p {
		t.Fatalf("held before any Hold: %v, want [%d] (operator-system's partition)", got, p)
	}
	c.Hold(shard.NewPartitionSet(rp.Count(), other))
	for what, held := range map[string]shard.PartitionSet{"the cache": c.held, "the kind": seg.Held()} {
		if !held.Has(p) || !held.Has(other) || held.Len() != 2 {
			t.Errorf("%s holds %v after Hold([%d]), want %d and %d", what, held.Slice(), other, other, p)
		}
	}
	c.Hold(shard.NewPartitionSet(rp.Count()))
	for what, held := range map[string]shard.PartitionSet{"the cache": c.held, "the kind": seg.Held()} {
		if got := held.Slice(); len(got) != 1 || got[0] != p {
			t.Errorf("%s holds %v after Hold([]), want [%d]", what, got, p)
		}
	}
}

func TestSharedNamespacesErrors(t *testing.T) {
	ns, _ := shard.NewRangePartitioner(shard.SchemeNamespace, 271)
	uid, _ := shard.NewRangePartitioner(shard.SchemeUID, 271)
	for name, tc := range map[string]struct {
		rp     shard.RangePartitioner
		shared []string
		want   string
	}{
		"uid scheme":   {uid, []string{"operator-system"}, `needs the namespace scheme, not "uid"`},
		"invalid name": {ns, []string{"not/a-namespace"}, `"not/a-namespace" is not a namespace name`},
		"empty name":   {ns, []string{""}, `"" is not a namespace name`},
	} {
		_, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Sharding: &Sharding{Partitioner: tc.rp, SharedNamespaces: tc.shared}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
