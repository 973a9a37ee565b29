package shard

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
)

func mustRanges(t testing.TB, s Scheme, p int) RangePartitioner {
	t.Helper()
	r, err := NewRangePartitioner(s, p)
	if err != nil {
		t.Fatalf("NewRangePartitioner(%q, %d): %v", s, p, err)
	}
	return r
}

// randomUID returns a UUID-shaped string, like the API server's UIDs.
func randomUID(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
}

func TestServerHashIsTheShardingPackagesHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []string{"", "default", "kube-system", "a", strings.Repeat("é", 40)}
	for range 2000 {
		values = append(values, randomUID(rng))
	}
	for _, v := range values {
		if got, want := fmt.Sprintf("%016x", serverHash(v)), sharding.HashField(v); got != want {
			t.Fatalf("ServerHash(%q) = %s, sharding.HashField says %s", v, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = serverHash("0b7e6bb0-5a36-4c8a-9f55-2b1f8a1c9d3e") }); a != 0 {
		t.Fatalf("ServerHash allocates %.1f times per call", a)
	}
}

func TestRangeBoundsAreExact(t *testing.T) {
	tests := []struct {
		p    int
		want []HashRange
	}{
		{1, []HashRange{{0, math.MaxUint64}}},
		{2, []HashRange{{0, 1<<63 - 1}, {1 << 63, math.MaxUint64}}},
		{4, []HashRange{{0, 0x3fffffffffffffff}, {0x4000000000000000, 0x7fffffffffffffff}, {0x8000000000000000, 0xbfffffffffffffff}, {0xc000000000000000, math.MaxUint64}}},
		// w = floor(2^64/3) = 0x5555555555555555; 2^64 = 3w + 1, so the
		// last range is one hash wider.
		{3, []HashRange{{0, 0x5555555555555554}, {0x5555555555555555, 0xaaaaaaaaaaaaaaa9}, {0xaaaaaaaaaaaaaaaa, math.MaxUint64}}},
	}
	for _, tt := range tests {
		r := mustRanges(t, SchemeUID, tt.p)
		for p, want := range tt.want {
			if got, ok := r.rangeOf(p); !ok || got != want {
				t.Errorf("P=%d: rangeOf(%d) = %#x, %v; want %#x", tt.p, p, got, ok, want)
			}
		}
		for _, p := range []int{-1, tt.p} {
			if _, ok := r.rangeOf(p); ok {
				t.Errorf("P=%d: rangeOf(%d) ok, want out of range", tt.p, p)
			}
		}
	}
}

var rangeCounts = []int{1, 2, 3, 7, 64, DefaultPartitions, 1000, 1021, MaxNamespacePartitions, MaxUIDPartitions}

// TestRangesTileTheHashSpace: the ranges start at 0, end at 2^64−1, follow
// each other without gap or overlap, are all floor(2^64/P) wide except the
// last, which is wider by 2^64 mod P.
func TestRangesTileTheHashSpace(t *testing.T) {
	for _, n := range rangeCounts {
		r := mustRanges(t, SchemeUID, n)
		var next uint64
		for p := range n {
			hr, ok := r.rangeOf(p)
			if !ok {
				t.Fatalf("P=%d: rangeOf(%d) not ok", n, p)
			}
			if hr.First != next || hr.Last < hr.First {
				t.Fatalf("P=%d: partition %d is %#x, want it to start at %#x", n, p, hr, next)
			}
			// Widths in big integers: the last range of P=1 is 2^64 wide.
			width := new(big.Int).Add(new(big.Int).SetUint64(hr.Last-hr.First), big.NewInt(1))
			want := new(big.Int).Div(space, big.NewInt(int64(n)))
			if p == n-1 {
				want.Add(want, new(big.Int).Mod(space, big.NewInt(int64(n))))
			}
			if width.Cmp(want) != 0 {
				t.Fatalf("P=%d: partition %d is %v wide, want %v", n, p, width, want)
			}
			next = hr.Last + 1 // wraps to 0 after the last
		}
		if next != 0 {
			t.Fatalf("P=%d: the last range ends at %#x, want 2^64-1", n, next-1)
		}
	}
}

var space = new(big.Int).Lsh(big.NewInt(1), 64) // 2^64

// TestEveryHashIsInExactlyOnePartition checks random hashes and every
// boundary ±1: partitionOfHash names a range that contains the hash, and its
// neighbours do not (with the tiling above, no other range can).
func TestEveryHashIsInExactlyOnePartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range rangeCounts {
		r := mustRanges(t, SchemeUID, n)
		hashes := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
		for p := range n {
			hr, _ := r.rangeOf(p)
			hashes = append(hashes, hr.First, hr.First-1, hr.First+1, hr.Last, hr.Last+1, hr.Last-1)
		}
		for range 20000 {
			hashes = append(hashes, rng.Uint64())
		}
		for _, h := range hashes {
			p := r.partitionOfHash(h)
			if p < 0 || p >= n {
				t.Fatalf("P=%d: PartitionOfHash(%#x) = %d, out of range", n, h, p)
			}
			in := 0
			for q := max(p-1, 0); q <= min(p+1, n-1); q++ {
				if hr, _ := r.rangeOf(q); hr.contains(h) {
					in++
					if q != p {
						t.Fatalf("P=%d: hash %#x is in partition %d's range, PartitionOfHash says %d", n, h, q, p)
					}
				}
			}
			if in != 1 {
				t.Fatalf("P=%d: hash %#x is in %d of the ranges around partition %d, want 1", n, h, in, p)
			}
		}
	}
}

func TestPartitionOfObjectAndKey(t *testing.T) {
	ns := mustRanges(t, SchemeNamespace, DefaultPartitions)
	uid := mustRanges(t, SchemeUID, DefaultPartitions)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 1000 {
		namespace := fmt.Sprintf("team-%d", i%50)
		if i%10 == 0 {
			namespace = "" // cluster-scoped
		}
		u := randomUID(rng)
		name := fmt.Sprintf("obj-%d", i)
		want := ns.partitionOfHash(serverHash(namespace))
		if p, ok := ns.PartitionOfObject(namespace, u); !ok || p != want {
			t.Fatalf("namespace scheme: PartitionOfObject(%q, %q) = %d, %v; want %d", namespace, u, p, ok, want)
		}
		// A key carries its namespace, so namespace mode routes keys exactly.
		if p := ns.Partition(KeyOf(namespace, name)); p != want {
			t.Fatalf("namespace scheme: Partition(%q) = %d, its object is in %d", KeyOf(namespace, name), p, want)
		}
		for _, r := range []RangePartitioner{ns, uid} {
			if got, want := r.PartitionOfKey(namespace, name), r.Partition(KeyOf(namespace, name)); got != want {
				t.Fatalf("%s: PartitionOfKey(%q, %q) = %d, Partition(key) = %d", r.Scheme(), namespace, name, got, want)
			}
		}
		want = uid.partitionOfHash(serverHash(u))
		if p, ok := uid.PartitionOfObject(namespace, u); !ok || p != want {
			t.Fatalf("uid scheme: PartitionOfObject(%q, %q) = %d, %v; want %d", namespace, u, p, ok, want)
		}
	}
	// Without a UID, the uid scheme cannot place an object.
	if p, ok := uid.PartitionOfObject("default", ""); ok || p != -1 {
		t.Fatalf("uid scheme: PartitionOfObject without a UID = %d, %v; want -1, false", p, ok)
	}
	// Keys naming no object (singletons) still get a stable partition.
	if got, want := uid.Partition("singleton/gc"), uid.partitionOfValue("singleton/gc"); got != want {
		t.Fatalf("uid scheme: Partition(singleton key) = %d, want %d", got, want)
	}
}

func TestSelectorMergesAdjacentRanges(t *testing.T) {
	r := mustRanges(t, SchemeUID, 4)
	tests := []struct {
		set  []int
		want string
	}{
		{[]int{0, 1, 2, 3}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{[]int{0, 1, 3}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || " +
			"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
		{[]int{1, 2}, "shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')"},
		{[]int{0, 2}, "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || " +
			"shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')"},
	}
	for _, tt := range tests {
		got, err := r.Selector(NewPartitionSet(4, tt.set...))
		if err != nil || got != tt.want {
			t.Errorf("Selector(%v) = %q, %v\nwant %q", tt.set, got, err, tt.want)
		}
	}
	ns := mustRanges(t, SchemeNamespace, 1)
	if got, _ := ns.Selector(FullPartitionSet(1)); got != "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')" {
		t.Errorf("namespace scheme, P=1: Selector = %q", got)
	}
}

func TestSelectorRejectsEmptyAndForeignSets(t *testing.T) {
	r := mustRanges(t, SchemeUID, 7)
	if s, err := r.Selector(NewPartitionSet(7)); !errors.Is(err, ErrNoPartitions) || s != "" {
		t.Fatalf("Selector(empty) = %q, %v; want ErrNoPartitions: \"\" would select everything", s, err)
	}
	if _, err := r.Selector(NewPartitionSet(8, 1)); err == nil || !strings.Contains(err.Error(), "8 partitions but the ring has 7") {
		t.Fatalf("Selector(set of another size) = %v, want an error naming both sizes", err)
	}
}

var selectorTerm = regexp.MustCompile(`^shardRange\((object\.metadata\.[a-z]+), '(0x[0-9a-f]+)', '(0x[0-9a-f]+)'\)$`)

// parseSelector reads a selector the way the server's grammar allows: terms
// joined by " || ". The server itself parses with cel-go
// (k8s.io/apiserver/pkg/sharding), which the root module must not import;
// the integration test in shard/cache sends these selectors to a real API
// server and compares its echo.
func parseSelector(t *testing.T, s string) sharding.Selector {
	t.Helper()
	var reqs []sharding.ShardRangeRequirement
	for _, term := range strings.Split(s, " || ") {
		m := selectorTerm.FindStringSubmatch(term)
		if m == nil {
			t.Fatalf("selector term %q is not shardRange(field, 'start', 'end')", term)
		}
		if !sharding.HexLess(m[2], m[3]) {
			t.Fatalf("selector term %q has start ≥ end", term)
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: m[1], Start: m[2], End: m[3]})
	}
	return sharding.NewSelector(reqs...)
}

// TestSelectorAgreesWithShardingMatches builds selectors of random sets and
// checks, for random objects, that the sharding package's Matches (the
// server's and the client-side check) selects exactly the objects whose
// partition is in the set, and that the selector is already in the
// canonical form the server echoes.
func TestSelectorAgreesWithShardingMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, scheme := range []Scheme{SchemeNamespace, SchemeUID} {
		for _, n := range []int{1, 2, 5, DefaultPartitions, 1021} {
			r := mustRanges(t, scheme, n)
			for round := range 5 {
				set := NewPartitionSet(n)
				for p := range n {
					if rng.IntN(3) == 0 || round == 4 && p == n-1 {
						set.Add(p)
					}
				}
				if set.IsEmpty() {
					set.Add(rng.IntN(n))
				}
				s, err := r.Selector(set)
				if err != nil {
					t.Fatal(err)
				}
				sel := parseSelector(t, s)
				if sel.String() != s {
					t.Fatalf("%s P=%d: selector is not canonical:\n ours    %q\n sharding %q", scheme, n, s, sel.String())
				}
				ranges, _ := r.Ranges(set)
				if len(sel.Requirements()) != len(ranges) {
					t.Fatalf("%s P=%d: %d terms for %d merged ranges", scheme, n, len(sel.Requirements()), len(ranges))
				}
				for i := range 400 {
					obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						Namespace: "ns-" + strconv.Itoa(rng.IntN(300)), Name: "cm-" + strconv.Itoa(i),
						UID: types.UID(randomUID(rng)),
					}}
					if i%13 == 0 {
						obj.Namespace = ""
					}
					p, _ := r.PartitionOfObject(obj.Namespace, string(obj.UID))
					got, err := sel.Matches(obj)
					if err != nil {
						t.Fatal(err)
					}
					if got != set.Has(p) {
						t.Fatalf("%s P=%d: Matches(%s/%s uid %s) = %v, but partition %d in set is %v", scheme, n, obj.Namespace, obj.Name, obj.UID, got, p, set.Has(p))
					}
				}
			}
		}
	}
}

// alternating returns {first, first+2, …} below n.
func alternating(n, first int) PartitionSet {
	s := NewPartitionSet(n)
	for p := first; p < n; p += 2 {
		s.Add(p)
	}
	return s
}

// TestWorstCaseSelectorLength checks the formula against every subset for
// small P, and the alternating set for large P.
func TestWorstCaseSelectorLength(t *testing.T) {
	for _, scheme := range []Scheme{SchemeNamespace, SchemeUID} {
		for n := 1; n <= 11; n++ {
			r := mustRanges(t, scheme, n)
			longest := 0
			for bitsOfSet := 1; bitsOfSet < 1<<n; bitsOfSet++ {
				set := NewPartitionSet(n)
				for p := range n {
					if bitsOfSet&(1<<p) != 0 {
						set.Add(p)
					}
				}
				s, err := r.Selector(set)
				if err != nil {
					t.Fatal(err)
				}
				longest = max(longest, len(s))
			}
			if want := worstCaseSelectorLength(scheme, n); longest != want {
				t.Fatalf("%s P=%d: longest selector over all subsets is %d, WorstCaseSelectorLength says %d", scheme, n, longest, want)
			}
		}
		for _, n := range []int{100, 101, DefaultPartitions, 1021} {
			r := mustRanges(t, scheme, n)
			// The alternating set holding the last partition is the worst.
			s, _ := r.Selector(alternating(n, (n-1)%2))
			if want := worstCaseSelectorLength(scheme, n); len(s) != want {
				t.Fatalf("%s P=%d: alternating selector is %d long, formula %d", scheme, n, len(s), want)
			}
		}
	}
}

// TestLargestPartitionCountFitsTheServerLimit: at the largest P of each
// ranged scheme the worst selector fits maxSelectorLength, one more
// partition would not, and Config refuses it naming the limit.
func TestLargestPartitionCountFitsTheServerLimit(t *testing.T) {
	for _, tt := range []struct {
		scheme Scheme
		max    int
	}{{SchemeNamespace, MaxNamespacePartitions}, {SchemeUID, MaxUIDPartitions}} {
		if got := tt.scheme.MaxPartitions(); got != tt.max {
			t.Fatalf("%s: MaxPartitions() = %d, want %d", tt.scheme, got, tt.max)
		}
		r := mustRanges(t, tt.scheme, tt.max)
		worst := 0
		for first := range 2 {
			s, _ := r.Selector(alternating(tt.max, first))
			worst = max(worst, len(s))
		}
		if worst > maxSelectorLength || worst != worstCaseSelectorLength(tt.scheme, tt.max) {
			t.Fatalf("%s P=%d: worst selector %d characters (formula %d), limit %d", tt.scheme, tt.max, worst, worstCaseSelectorLength(tt.scheme, tt.max), maxSelectorLength)
		}
		// P+1 or P+2 adds a range (ceil(P/2) grows on odd P).
		over := tt.max + 1
		if worstCaseSelectorLength(tt.scheme, over) == worst {
			over++
		}
		if l := worstCaseSelectorLength(tt.scheme, over); l <= maxSelectorLength {
			t.Fatalf("%s: P=%d's worst selector is %d characters, within the limit: MaxPartitions is not the largest", tt.scheme, over, l)
		}
		t.Logf("%s: P ≤ %d, worst selector %d characters (P=%d: %d)", tt.scheme, tt.max, worst, over, worstCaseSelectorLength(tt.scheme, over))
		err := Config{Partitions: tt.max + 1, Scheme: tt.scheme}.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "Partitions" || !strings.Contains(err.Error(), "shard-selector limit of 100000") {
			t.Fatalf("%s: Validate(P=%d) = %v, want a Partitions error naming the selector limit", tt.scheme, tt.max+1, err)
		}
		if _, err := NewRangePartitioner(tt.scheme, tt.max+1); err == nil {
			t.Fatalf("%s: NewRangePartitioner(P=%d) succeeded", tt.scheme, tt.max+1)
		}
	}
}

func TestNewRangePartitionerRejectsKeyScheme(t *testing.T) {
	for _, s := range []Scheme{SchemeKey, "", "Namespace"} {
		if _, err := NewRangePartitioner(s, 7); err == nil {
			t.Errorf("NewRangePartitioner(%q) succeeded", s)
		}
	}
}

// TestNamesDifferingInTheLastCharacterShareARange pins a property of the
// server's hash that the README warns about: FNV-1a folds the last byte in
// with one multiplication by a prime of 2^40+435, so values that differ only
// in their last character hash less than 2^48.01 apart, while a range is at
// least 2^64/MaxUIDPartitions ≈ 2^52.7 wide. Such namespaces ("team-1",
// "team-2", …) always land in one partition or two adjacent ones.
func TestNamesDifferingInTheLastCharacterShareARange(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const tail = "abcdefghijklmnopqrstuvwxyz0123456789-"
	for _, n := range []int{DefaultPartitions, 1021, MaxUIDPartitions} {
		r := mustRanges(t, SchemeUID, n)
		for range 200 {
			prefix := fmt.Sprintf("team%d-", rng.IntN(1_000_000))
			lo, hi := n, -1
			for i := range len(tail) {
				p := r.partitionOfValue(prefix + tail[i:i+1])
				lo, hi = min(lo, p), max(hi, p)
			}
			if hi-lo > 1 {
				t.Fatalf("P=%d: %q + one character spans partitions %d..%d; the README's statement is wrong", n, prefix, lo, hi)
			}
		}
	}
}
