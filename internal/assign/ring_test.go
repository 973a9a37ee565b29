package assign

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/kshard/kshard/shard"
)

func TestNewIsIndependentOfMemberOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{2, 5, 17, 64} {
		members := statefulSetNames("kshard", n)
		want := ownerTable(mustRing(t, shard.Config{}, members))
		wantFP := mustRing(t, shard.Config{}, members).Fingerprint()
		for range 30 {
			shuffled := slices.Clone(members)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			r := mustRing(t, shard.Config{}, shuffled)
			if got := ownerTable(r); !slices.Equal(got, want) {
				t.Fatalf("n=%d: order %v gives a different assignment", n, shuffled)
			}
			if r.Fingerprint() != wantFP {
				t.Fatalf("n=%d: order %v gives fingerprint %s, want %s", n, shuffled, r.Fingerprint(), wantFP)
			}
		}
	}
}

func TestNewDoesNotRetainCallerSlice(t *testing.T) {
	members := []string{"b", "a"}
	r := mustRing(t, shard.Config{}, members)
	members[0] = "z"
	if got := r.Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Members() = %v after the caller changed its slice", got)
	}
	got := r.Members()
	got[0] = "mutated"
	if r.Members()[0] != "a" {
		t.Fatal("Members() returned the ring's own slice")
	}
}

func TestEmptyRingOwnsNothing(t *testing.T) {
	for _, r := range []*Ring{mustRing(t, shard.Config{}, nil), mustRing(t, shard.Config{}, []string{}), nil} {
		for _, p := range []int{0, 100, shard.DefaultPartitions - 1} {
			if m, ok := r.Owner(p); ok || m != "" {
				t.Fatalf("empty ring: Owner(%d) = %q, %v; want \"\", false", p, m, ok)
			}
		}
		if m, ok := r.OwnerOfKey("default/x"); ok || m != "" {
			t.Fatalf("empty ring: OwnerOfKey = %q, %v", m, ok)
		}
		if s := r.Partitions("anyone"); !s.IsEmpty() || s.Size() != shard.DefaultPartitions {
			t.Fatalf("empty ring: Partitions = %v of size %d", s, s.Size())
		}
		if len(r.Members()) != 0 || r.Contains("anyone") {
			t.Fatalf("empty ring has members %v", r.Members())
		}
	}
}

func TestSingleMemberOwnsEverything(t *testing.T) {
	for _, p := range []int{1, 7, 271, 1021} {
		r := mustRing(t, shard.Config{Partitions: p}, []string{"only"})
		if got := r.Partitions("only"); !got.Equal(shard.FullPartitionSet(p)) {
			t.Fatalf("P=%d: single member owns %d partitions", p, got.Len())
		}
		for part := range p {
			if m, ok := r.Owner(part); !ok || m != "only" {
				t.Fatalf("P=%d: Owner(%d) = %q, %v", p, part, m, ok)
			}
		}
	}
}

func TestOwnerOutOfRange(t *testing.T) {
	r := mustRing(t, shard.Config{Partitions: 31}, []string{"a", "b"})
	for _, p := range []int{-1, 31, 1 << 40} {
		if m, ok := r.Owner(p); ok || m != "" {
			t.Errorf("Owner(%d) = %q, %v; want \"\", false", p, m, ok)
		}
	}
}

func TestOwnerAndPartitionsAgree(t *testing.T) {
	r := mustRing(t, shard.Config{}, statefulSetNames("kshard", 7))
	union := shard.NewPartitionSet(shard.DefaultPartitions)
	total := 0
	for _, m := range r.Members() {
		s := r.Partitions(m)
		if !union.Intersect(s).IsEmpty() {
			t.Fatalf("%s shares partitions %v with another member", m, union.Intersect(s))
		}
		union = union.Union(s)
		total += s.Len()
		for p := range s.All() {
			if o, ok := r.Owner(p); !ok || o != m {
				t.Fatalf("Partitions(%s) has %d but Owner(%d) = %q", m, p, p, o)
			}
		}
	}
	if total != shard.DefaultPartitions || !union.Equal(shard.FullPartitionSet(shard.DefaultPartitions)) {
		t.Fatalf("members own %d partitions, want all %d exactly once", total, shard.DefaultPartitions)
	}
	// Partitions hands out a copy: mutating it must not change the ring.
	s := r.Partitions("kshard-0")
	s.Add(0)
	s.Remove(s.Slice()[len(s.Slice())-1])
	if !r.Partitions("kshard-0").Equal(r.Partitions("kshard-0")) || r.Partitions("kshard-0").Equal(s) {
		t.Fatal("Partitions returned the ring's own set")
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		cfg     shard.Config
		members []string
		check   func(error) bool
	}{
		{"duplicate member", shard.Config{}, []string{"a", "b", "a"}, isMemberError("a")},
		{"empty member name", shard.Config{}, []string{"a", ""}, isMemberError("")},
		{"negative partitions", shard.Config{Partitions: -1}, []string{"a"}, isConfigError("Partitions")},
		{"too many partitions", shard.Config{Partitions: shard.MaxPartitions + 1}, []string{"a"}, isConfigError("Partitions")},
		{"load of 1", shard.Config{Load: 1}, []string{"a"}, isConfigError("Load")},
		{"load below 1", shard.Config{Load: 0.5}, []string{"a"}, isConfigError("Load")},
		{"negative replication factor", shard.Config{ReplicationFactor: -1}, []string{"a"}, isConfigError("ReplicationFactor")},
		{"invalid config without members", shard.Config{Load: 0.9}, nil, isConfigError("Load")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.cfg, tt.members)
			if r != nil || !tt.check(err) {
				t.Fatalf("New() = %v, %v", r, err)
			}
		})
	}
}

func isMemberError(member string) func(error) bool {
	return func(err error) bool {
		var me *MemberError
		return errors.As(err, &me) && me.Member == member
	}
}

func isConfigError(field string) func(error) bool {
	return func(err error) bool {
		var ce *shard.ConfigError
		return errors.As(err, &ce) && ce.Field == field
	}
}

// More members than partitions is not an error: consistent's bound is
// ceil(P/N × load) ≥ 1 per member, so every partition finds a home and the
// surplus members own nothing. Replicas must keep working when a StatefulSet
// is scaled past P, not refuse to form a ring.
func TestMoreMembersThanPartitions(t *testing.T) {
	for _, tc := range []struct{ p, n int }{{7, 8}, {31, 100}, {271, 300}} {
		r := mustRing(t, shard.Config{Partitions: tc.p}, statefulSetNames("kshard", tc.n))
		total, idle := 0, 0
		bound := ceilLoad(tc.p, tc.n, shard.DefaultLoad)
		for _, m := range r.Members() {
			l := r.Partitions(m).Len()
			total += l
			if l == 0 {
				idle++
			}
			if l > bound {
				t.Fatalf("P=%d N=%d: %s owns %d > %d", tc.p, tc.n, m, l, bound)
			}
		}
		if total != tc.p {
			t.Fatalf("P=%d N=%d: %d partitions owned", tc.p, tc.n, total)
		}
		t.Logf("P=%d N=%d: %d members own nothing", tc.p, tc.n, idle)
	}
}

func TestRingFingerprint(t *testing.T) {
	a := mustRing(t, shard.Config{}, []string{"a", "b"})
	tests := []struct {
		name string
		r    *Ring
		same bool
	}{
		{"same members other order", mustRing(t, shard.Config{}, []string{"b", "a"}), true},
		{"explicit defaults", mustRing(t, shard.Config{Partitions: 271, Load: 1.05, ReplicationFactor: 40}, []string{"a", "b"}), true},
		{"the load before 1.05", mustRing(t, shard.Config{Load: 1.25}, []string{"a", "b"}), false},
		{"another member", mustRing(t, shard.Config{}, []string{"a", "c"}), false},
		{"one more member", mustRing(t, shard.Config{}, []string{"a", "b", "c"}), false},
		{"names that concatenate alike", mustRing(t, shard.Config{}, []string{"ab"}), false},
		{"another config", mustRing(t, shard.Config{Partitions: 1021}, []string{"a", "b"}), false},
	}
	for _, tt := range tests {
		if got := tt.r.Fingerprint() == a.Fingerprint(); got != tt.same {
			t.Errorf("%s: fingerprint %s vs %s, equal = %v, want %v", tt.name, tt.r.Fingerprint(), a.Fingerprint(), got, tt.same)
		}
	}
	// Length prefixes keep member lists apart that concatenate alike.
	if mustRing(t, shard.Config{}, []string{"ab", "c"}).Fingerprint() == mustRing(t, shard.Config{}, []string{"a", "bc"}).Fingerprint() {
		t.Error("[ab c] and [a bc] share a fingerprint")
	}
	if (*Ring)(nil).Fingerprint() != mustRing(t, shard.Config{}, nil).Fingerprint() {
		t.Error("nil ring and empty default ring should share a fingerprint")
	}
}

// The assignment is a wire contract: replicas on different builds must agree.
// This pins digests of assignments; if one changes, the placement changed
// and hashScheme must be bumped so that mixed rings refuse each other. The
// load 1.25 ring is what replicas built before DefaultLoad became 1.05
// place by default: a ring that sets Load 1.25 must still place exactly as
// they do, so that it can roll onto this version.
func TestAssignmentIsStableAcrossBuilds(t *testing.T) {
	for _, tc := range []struct {
		cfg  shard.Config
		want string // recorded from this implementation at hashScheme "xx1"
	}{
		{shard.Config{}, "[kshard-0=57 kshard-1=57 kshard-2=49 kshard-3=52 kshard-4=56] digest=8d22cf1d06095a8e"},
		{shard.Config{Load: 1.25}, "[kshard-0=60 kshard-1=55 kshard-2=49 kshard-3=52 kshard-4=55] digest=804298bfa6982c2f"},
	} {
		r := mustRing(t, tc.cfg, statefulSetNames("kshard", 5))
		counts := make([]string, 0, 5)
		for _, m := range r.Members() {
			counts = append(counts, fmt.Sprintf("%s=%d", m, r.Partitions(m).Len()))
		}
		got := fmt.Sprintf("%v digest=%x", counts, xxhash.Sum64String(strings.Join(ownerTable(r), ",")))
		if got != tc.want {
			t.Errorf("assignment of kshard-0..4 at %s changed:\n got %s\nwant %s\nif intended, bump hashScheme", tc.cfg.Fingerprint(), got, tc.want)
		}
	}
}

func TestRingConcurrentReads(t *testing.T) {
	r := mustRing(t, shard.Config{}, statefulSetNames("kshard", 9))
	want := ownerTable(r)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				key := fmt.Sprintf("ns-%d/obj-%d", g, i)
				p := r.Partition(key)
				if m, ok := r.OwnerOfKey(key); !ok || m != want[p] {
					errs <- fmt.Sprintf("OwnerOfKey(%q) = %q, want %q", key, m, want[p])
					return
				}
				_ = r.Partitions(want[p]).Has(p)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func ceilLoad(p, n int, load float64) int {
	// Integer form of consistent's bound, independent of its float code.
	return int((int64(p)*int64(load*1e6) + int64(n)*1e6 - 1) / (int64(n) * 1e6))
}
