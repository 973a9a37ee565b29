package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/kshard/kshard/shard"
)

// TestHashKeyEqualsHashOfKeyOf checks the string-free hash against xxhash of
// the joined key for every total length up to past the stack buffer and
// every position of the separator, so both the stack-copy path and the
// streamed path meet every split of a 32-byte stripe.
func TestHashKeyEqualsHashOfKeyOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, stackKey+70)
	for i := range buf {
		buf[i] = byte('a' + rng.IntN(26))
	}
	for total := 1; total <= len(buf); total++ {
		for sep := 0; sep < total; sep++ {
			ns, name := string(buf[:sep]), string(buf[sep+1:total])
			want := xxhash.Sum64String(shard.KeyOf(ns, name))
			if got := hashKey(ns, name); got != want {
				t.Fatalf("hashKey(%q, %q) = %#x, want %#x (key length %d)", ns, name, got, want, total)
			}
		}
	}
}

func TestFastPathMatchesShardPartitioner(t *testing.T) {
	for _, n := range []int{1, 7, shard.DefaultPartitions, 1021} {
		sp := shard.NewPartitioner(n)
		ps := NewPartitions(sp)
		if !ps.Fast() {
			t.Fatalf("P=%d: the allocation-free path is off for shard's own partitioner", n)
		}
		if ps.Count() != n {
			t.Fatalf("P=%d: Count() = %d", n, ps.Count())
		}
		for i := range 5000 {
			ns := fmt.Sprintf("ns-%d", i%37)
			if i%5 == 0 {
				ns = ""
			}
			name := fmt.Sprintf("obj-%d-é", i)
			switch i % 97 {
			case 0:
				name = strings.Repeat("x", 200+i%300) // long, some beyond the stack buffer
			case 1:
				name = ""
			}
			if got, want := ps.Of(ns, name), sp.Partition(shard.KeyOf(ns, name)); got != want {
				t.Fatalf("P=%d: Of(%q, %q) = %d, shard says %d", n, ns, name, got, want)
			}
		}
	}
}

// TestDefaultPartitionerIsFast covers the value a zero Config produces:
// NewPartitioner(0) means DefaultPartitions and must still be recognised.
func TestDefaultPartitionerIsFast(t *testing.T) {
	ps := NewPartitions(shard.NewPartitioner(0))
	if !ps.Fast() || ps.Count() != shard.DefaultPartitions {
		t.Fatalf("NewPartitioner(0): fast=%v count=%d, want fast with %d partitions", ps.Fast(), ps.Count(), shard.DefaultPartitions)
	}
}

type byLength struct{ n int }

func (r byLength) Partition(key string) int { return len(key) % r.n }
func (r byLength) Count() int               { return r.n }

// wrapped embeds shard's own partitioner but is another type: it may
// override Partition, so it must not take the fast path.
type wrapped struct{ shard.Partitioner }

func TestOtherPartitionersAreUsedAsIs(t *testing.T) {
	ps := NewPartitions(byLength{n: 5})
	if ps.Fast() {
		t.Fatal("fast path enabled for a foreign partitioner")
	}
	if got := ps.Of("ab", "cd"); got != len("ab/cd")%5 {
		t.Fatalf("Of = %d, want the custom partitioner's %d", got, len("ab/cd")%5)
	}
	// A pointer type that is not comparable by value is fine too.
	ps = NewPartitions(&byLength{n: 3})
	if ps.Fast() || ps.Of("", "abcd") != 1 {
		t.Fatalf("pointer partitioner: fast=%v Of=%d, want slow path and 1", ps.Fast(), ps.Of("", "abcd"))
	}
	ps = NewPartitions(wrapped{shard.NewPartitioner(7)})
	if ps.Fast() {
		t.Fatal("fast path enabled for a type that wraps shard's partitioner")
	}
}

var (
	key36NS, key36Name = "kube-system", "coredns-7db6d8ff4d-abcde" // 36 bytes joined
	// A 63-byte namespace and a 200-byte name: 264 bytes joined.
	longNS, longName = strings.Repeat("n", 63), strings.Repeat("o", 200)
	// Longer than any valid key: the streamed path.
	hugeNS, hugeName = strings.Repeat("n", 63), strings.Repeat("o", 400)
)

func TestFastPathDoesNotAllocate(t *testing.T) {
	ps := NewPartitions(shard.NewPartitioner(shard.DefaultPartitions))
	for _, k := range [][2]string{{key36NS, key36Name}, {"", key36Name}, {longNS, longName}, {hugeNS, hugeName}} {
		allocs := testing.AllocsPerRun(1000, func() { _ = ps.Of(k[0], k[1]) })
		if allocs != 0 {
			t.Fatalf("Of with a %d-byte key allocates %.1f times per call, want 0", len(k[0])+1+len(k[1]), allocs)
		}
	}
}

var sink int

func benchOf(b *testing.B, ns, name string) {
	ps := NewPartitions(shard.NewPartitioner(shard.DefaultPartitions))
	b.ReportAllocs()
	for b.Loop() {
		sink = ps.Of(ns, name)
	}
}

func benchViaKeyOf(b *testing.B, ns, name string) {
	p := shard.NewPartitioner(shard.DefaultPartitions)
	b.ReportAllocs()
	for b.Loop() {
		sink = p.Partition(shard.KeyOf(ns, name))
	}
}

// The gate's budget: 0 allocations and ≤ 40 ns for a 36-byte key.
func BenchmarkPartitionOf36(b *testing.B)        { benchOf(b, key36NS, key36Name) }
func BenchmarkPartitionOf264(b *testing.B)       { benchOf(b, longNS, longName) }
func BenchmarkPartitionOf464(b *testing.B)       { benchOf(b, hugeNS, hugeName) }
func BenchmarkPartitionViaKeyOf36(b *testing.B)  { benchViaKeyOf(b, key36NS, key36Name) }
func BenchmarkPartitionViaKeyOf264(b *testing.B) { benchViaKeyOf(b, longNS, longName) }
