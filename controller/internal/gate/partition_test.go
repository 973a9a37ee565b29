package gate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestFastPathMatchesShardPartitioner(t *testing.T) {
	for _, n := range []int{1, 7, shard.DefaultPartitions, 1021} {
		sp := shard.NewPartitioner(n)
		ps := NewPartitions(sp)
		if !ps.Fast() {
			t.Fatalf("P=%d: the allocation-free path is off for shard's own partitioner", n)
		}
		for i := range 5000 {
			ns := fmt.Sprintf("ns-%d", i%37)
			if i%5 == 0 {
				ns = ""
			}
			name := fmt.Sprintf("obj-%d", i)
			if i%97 == 0 {
				name = strings.Repeat("x", 300+i%50) // beyond the stack buffer
			}
			if got, want := ps.Of(ns, name), sp.Partition(shard.KeyOf(ns, name)); got != want {
				t.Fatalf("P=%d: Of(%q, %q) = %d, shard says %d", n, ns, name, got, want)
			}
		}
	}
}

type reversed struct{ n int }

func (r reversed) Partition(key string) int { return len(key) % r.n }
func (r reversed) Count() int               { return r.n }

func TestCustomPartitionerIsUsedAsIs(t *testing.T) {
	ps := NewPartitions(reversed{n: 5})
	if ps.Fast() {
		t.Fatal("fast path enabled for a foreign partitioner")
	}
	if got := ps.Of("ab", "cd"); got != len("ab/cd")%5 {
		t.Fatalf("Of = %d, want the custom partitioner's %d", got, len("ab/cd")%5)
	}
}

func TestFastPathDoesNotAllocate(t *testing.T) {
	ps := NewPartitions(shard.NewPartitioner(shard.DefaultPartitions))
	allocs := testing.AllocsPerRun(1000, func() {
		_ = ps.Of("kube-system", "coredns-7db6d8ff4d-abcde")
	})
	if allocs != 0 {
		t.Fatalf("Of allocates %.1f times per call, want 0", allocs)
	}
}

func BenchmarkPartitionOf(b *testing.B) {
	ps := NewPartitions(shard.NewPartitioner(shard.DefaultPartitions))
	b.ReportAllocs()
	for b.Loop() {
		_ = ps.Of("kube-system", "coredns-7db6d8ff4d-abcde")
	}
}

func BenchmarkPartitionViaKeyOf(b *testing.B) {
	p := shard.NewPartitioner(shard.DefaultPartitions)
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Partition(shard.KeyOf("kube-system", "coredns-7db6d8ff4d-abcde"))
	}
}
