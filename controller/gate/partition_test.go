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
		if !ps.isFast() {
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
	if !ps.isFast() || ps.Count() != shard.DefaultPartitions {
		t.Fatalf("NewPartitioner(0): fast=%v count=%d, want fast with %d partitions", ps.isFast(), ps.Count(), shard.DefaultPartitions)
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
	if ps.isFast() {
		t.Fatal("fast path enabled for a foreign partitioner")
	}
	if got := ps.Of("ab", "cd"); got != len("ab/cd")%5 {
		t.Fatalf("Of = %d, want the custom partitioner's %d", got, len("ab/cd")%5)
	}
	// A pointer type that is not comparable by value is fine too.
	ps = NewPartitions(&byLength{n: 3})
	if ps.isFast() || ps.Of("", "abcd") != 1 {
		t.Fatalf("pointer partitioner: fast=%v Of=%d, want slow path and 1", ps.isFast(), ps.Of("", "abcd"))
	}
	ps = NewPartitions(wrapped{shard.NewPartitioner(7)})
	if ps.isFast() {
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

func rangePartitioner(t testing.TB, s shard.Scheme, n int) shard.RangePartitioner {
	t.Helper()
	rp, err := shard.NewRangePartitioner(s, n)
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

// TestRangedSchemesPlaceObjectsAsTheServer: under the ranged schemes the
// gate routes an object by the hash range of its namespace or UID, which
// differs from the key's xxhash partition; keys still map as the shard
// partitioner maps them.
func TestRangedSchemesPlaceObjectsAsTheServer(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, scheme := range []shard.Scheme{shard.SchemeNamespace, shard.SchemeUID} {
		for _, n := range []int{1, 7, shard.DefaultPartitions, 1021} {
			rp := rangePartitioner(t, scheme, n)
			ps := NewPartitions(rp)
			if !ps.isFast() || ps.Count() != n || ps.scheme() != scheme {
				t.Fatalf("%s P=%d: fast=%v count=%d scheme=%q", scheme, n, ps.isFast(), ps.Count(), ps.scheme())
			}
			differs := 0
			for i := range 3000 {
				ns := fmt.Sprintf("team-%d", i%41)
				if i%7 == 0 {
					ns = ""
				}
				name := fmt.Sprintf("obj-%d", i)
				uid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1))
				if got, want := ps.Of(ns, name), rp.Partition(shard.KeyOf(ns, name)); got != want {
					t.Fatalf("%s P=%d: Of(%q, %q) = %d, shard says %d", scheme, n, ns, name, got, want)
				}
				want, _ := rp.PartitionOfObject(ns, uid)
				if got := ps.ofObject(ns, name, uid); got != want {
					t.Fatalf("%s P=%d: OfObject(%q, %q, %s) = %d, shard says %d", scheme, n, ns, name, uid, got, want)
				}
				if want != shard.NewPartitioner(n).Partition(shard.KeyOf(ns, name)) {
					differs++
				}
			}
			if n > 7 && differs == 0 {
				t.Fatalf("%s P=%d: every object landed in its key's xxhash partition; the scheme is not in use", scheme, n)
			}
		}
	}
}

// TestUIDSchemeWithoutUIDIsNeverAdmitted: a request whose object's UID is
// unknown has no partition under the uid scheme, and the gate refuses it.
func TestUIDSchemeWithoutUIDIsNeverAdmitted(t *testing.T) {
	ps := NewPartitions(rangePartitioner(t, shard.SchemeUID, 7))
	g := New(7, true)
	p := ps.ofObject("default", "web", "")
	if p != -1 || g.Active(p) || g.Enter(p) {
		t.Fatalf("OfObject without UID = %d (active %v); want -1, never admitted", p, g.Active(p))
	}
	// The namespace scheme needs no UID.
	ns := NewPartitions(rangePartitioner(t, shard.SchemeNamespace, 7))
	if p := ns.ofObject("default", "web", ""); p < 0 || p != ns.Of("default", "other") {
		t.Fatalf("namespace scheme: OfObject without UID = %d, want the namespace's partition %d", p, ns.Of("default", "other"))
	}
}

// A pointer to a RangePartitioner routes objects by their UID too.
func TestRangePartitionerPointerIsRanged(t *testing.T) {
	rp := rangePartitioner(t, shard.SchemeUID, 31)
	ps := NewPartitions(&rp)
	want, _ := rp.PartitionOfObject("ns", uid36)
	if !ps.isFast() || ps.scheme() != shard.SchemeUID || ps.ofObject("ns", "name", uid36) != want || ps.ofObject("ns", "name", "") != -1 {
		t.Fatalf("*RangePartitioner: fast=%v scheme=%q OfObject=%d, want ranged routing to %d", ps.isFast(), ps.scheme(), ps.ofObject("ns", "name", uid36), want)
	}
}

func TestKeySchemeOfObjectIgnoresUID(t *testing.T) {
	for _, p := range []shard.Partitioner{shard.NewPartitioner(31), byLength{n: 5}} {
		ps := NewPartitions(p)
		if ps.scheme() != shard.SchemeKey {
			t.Fatalf("scheme %q, want key", ps.scheme())
		}
		for _, uid := range []string{"", "0b7e6bb0-5a36-4c8a-9f55-2b1f8a1c9d3e"} {
			if got, want := ps.ofObject("ns", "name", uid), ps.Of("ns", "name"); got != want {
				t.Fatalf("%T: OfObject(uid %q) = %d, want the key's %d", p, uid, got, want)
			}
		}
	}
}

const uid36 = "0b7e6bb0-5a36-4c8a-9f55-2b1f8a1c9d3e"

func TestRangedPathsDoNotAllocate(t *testing.T) {
	for _, scheme := range []shard.Scheme{shard.SchemeNamespace, shard.SchemeUID} {
		ps := NewPartitions(rangePartitioner(t, scheme, shard.DefaultPartitions))
		for _, k := range [][2]string{{key36NS, key36Name}, {"", key36Name}, {longNS, longName}, {hugeNS, hugeName}} {
			if a := testing.AllocsPerRun(1000, func() { _ = ps.Of(k[0], k[1]) }); a != 0 {
				t.Fatalf("%s: Of allocates %.1f times per call", scheme, a)
			}
			if a := testing.AllocsPerRun(1000, func() { _ = ps.ofObject(k[0], k[1], uid36) }); a != 0 {
				t.Fatalf("%s: OfObject allocates %.1f times per call", scheme, a)
			}
		}
	}
}

func benchOfObject(b *testing.B, scheme shard.Scheme) {
	ps := NewPartitions(rangePartitioner(b, scheme, shard.DefaultPartitions))
	b.ReportAllocs()
	for b.Loop() {
		sink = ps.ofObject(key36NS, key36Name, uid36)
	}
}

// The ranged gate: FNV-1a of a 36-byte UID, resp. an 11-byte namespace, and
// one division; compare BenchmarkPartitionOf36 (xxhash of a 36-byte key).
func BenchmarkPartitionOfObjectUID36(b *testing.B)     { benchOfObject(b, shard.SchemeUID) }
func BenchmarkPartitionOfObjectNamespace(b *testing.B) { benchOfObject(b, shard.SchemeNamespace) }
