package assign

import (
	"fmt"
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestRingPartitionMatchesPartitioner(t *testing.T) {
	r := mustRing(t, shard.Config{Partitions: 1021}, []string{"a", "b"})
	part := shard.NewPartitioner(1021)
	for i := range 500 {
		key := fmt.Sprintf("ns/obj-%d", i)
		if r.Partition(key) != part.Partition(key) {
			t.Fatalf("ring and partitioner disagree on %q", key)
		}
		owner, ok := r.OwnerOfKey(key)
		want, _ := r.Owner(part.Partition(key))
		if !ok || owner != want {
			t.Fatalf("OwnerOfKey(%q) = %q, %v; want %q", key, owner, ok, want)
		}
	}
}

func TestPartitionerForAndRingFollowTheScheme(t *testing.T) {
	keys := []string{"default/a", "kube-system/coredns", "cluster-thing", "singleton/gc"}
	for _, scheme := range []shard.Scheme{shard.SchemeKey, shard.SchemeNamespace, shard.SchemeUID} {
		cfg := shard.Config{Partitions: 31, Scheme: scheme}
		pf, err := shard.PartitionerFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ring := mustRing(t, cfg, []string{"a", "b"})
		rp, ranged := ring.RangePartitioner()
		if ranged != scheme.Ranged() {
			t.Fatalf("%s: ring.RangePartitioner ok = %v", scheme, ranged)
		}
		for _, k := range keys {
			var want int
			if ranged {
				want = rp.Partition(k)
			} else {
				want = shard.NewPartitioner(31).Partition(k)
			}
			if got := pf.Partition(k); got != want {
				t.Fatalf("%s: PartitionerFor.Partition(%q) = %d, want %d", scheme, k, got, want)
			}
			if got := ring.Partition(k); got != want {
				t.Fatalf("%s: Ring.Partition(%q) = %d, want %d", scheme, k, got, want)
			}
		}
	}
	if _, err := shard.PartitionerFor(shard.Config{Scheme: "rendezvous"}); err == nil {
		t.Fatal("PartitionerFor accepted an unknown scheme")
	}
}

// A ring of a ranged scheme beyond the scheme's partition limit (the
// shard selector's length) is refused, as Config.Validate refuses it.
func TestNewRejectsPartitionsBeyondTheSelectorLimit(t *testing.T) {
	for _, scheme := range []shard.Scheme{shard.SchemeNamespace, shard.SchemeUID} {
		over := scheme.MaxPartitions() + 1
		if _, err := New(shard.Config{Partitions: over, Scheme: scheme}, []string{"a"}); err == nil {
			t.Fatalf("%s: New(P=%d) succeeded", scheme, over)
		}
	}
}
