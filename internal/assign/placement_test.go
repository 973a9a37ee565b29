package assign

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/buraksezer/consistent"

	"github.com/kshard/kshard/shard"
)

// consistentPanics reports whether consistent v1.0.0 itself panics on cfg
// and members, calling it directly without kshard's validation.
func consistentPanics(cfg shard.Config, members []string) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	ms := make([]consistent.Member, len(members))
	for i, m := range members {
		ms[i] = member(m)
	}
	consistent.New(ms, consistent.Config{
		PartitionCount: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor, Load: cfg.Load, Hasher: xxhasher{},
	})
	return false
}

// checkCapacity must reject exactly the inputs on which consistent panics.
// Loads ≤ 1 are outside what Validate allows; they are used here because they
// are the only way to make consistent panic, which proves the check is exact
// rather than merely never failing.
func TestCheckCapacityMatchesConsistentExactly(t *testing.T) {
	panics, placed := 0, 0
	for _, p := range []int{1, 2, 7, 31, 271} {
		for _, load := range []float64{0.3, 0.5, 0.75, 0.9, 0.99, 1, 1.01, 1.25, 2} {
			for n := 1; n <= 40; n++ {
				cfg := shard.Config{Partitions: p, Load: load, ReplicationFactor: 3}
				members := statefulSetNames("m", n)
				predicted := checkCapacity(cfg, n) != nil
				if actual := consistentPanics(cfg, members); predicted != actual {
					t.Fatalf("P=%d N=%d load=%g: checkCapacity predicts panic=%v, consistent panic=%v", p, n, load, predicted, actual)
				}
				if predicted {
					panics++
				} else {
					placed++
				}
			}
		}
	}
	if panics == 0 || placed == 0 {
		t.Fatalf("grid exercised %d panicking and %d placing inputs; want both", panics, placed)
	}
	t.Logf("%d panicking and %d placing inputs agree", panics, placed)
}

func TestCapacityErrorSaysWhatToChange(t *testing.T) {
	err := checkCapacity(shard.Config{Partitions: 7, Load: 0.5, ReplicationFactor: 3}, 2)
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Partitions != 7 || ce.Members != 2 {
		t.Fatalf("checkCapacity = %v, want *CapacityError for 7 partitions on 2 members", err)
	}
	want := "shard: 7 partitions cannot be placed on 2 members at load 0.5; raise Load above 1 or Partitions, or lower the member count"
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

// No member count is too large at a valid load (see checkCapacity).
func TestCheckCapacityNeverFailsAtValidLoad(t *testing.T) {
	for _, p := range []int{1, 2, 271, 1021} {
		for _, load := range []float64{1.0000001, 1.25, 3} {
			for _, n := range []int{1, p - 1, p, p + 1, 10 * p} {
				if n < 1 {
					continue
				}
				if err := checkCapacity(shard.Config{Partitions: p, Load: load}, n); err != nil {
					t.Fatalf("P=%d N=%d load=%g: %v", p, n, load, err)
				}
			}
		}
	}
}

// The last-line recover turns a library panic into a *PlacementError. With a
// hasher that maps every virtual node to one point, the member added last
// takes the whole circle, so at P=7 and N=2 it fills its bound of 5 and
// consistent panics on a valid Config that checkCapacity accepts: the kind of
// case (virtual-node collisions, astronomically unlikely with 64-bit xxhash)
// the recover is there for.
func TestPlaceRecoversPanicIntoError(t *testing.T) {
	cfg := shard.Config{Partitions: 7, Load: 1.25, ReplicationFactor: 3}
	if err := checkCapacity(cfg, 2); err != nil {
		t.Fatalf("checkCapacity rejected a valid config: %v", err)
	}
	owners, err := place(cfg, []string{"a", "b"}, constHasher{})
	var pe *PlacementError
	if owners != nil || !errors.As(err, &pe) {
		t.Fatalf("place = %v, %v; want a *PlacementError", owners, err)
	}
}

type constHasher struct{}

func (constHasher) Sum64([]byte) uint64 { return 42 }

// truncHasher keeps 6 bits of xxhash, so virtual nodes collide often.
type truncHasher struct{}

func (truncHasher) Sum64(b []byte) uint64 { return xxhasher{}.Sum64(b) & 63 }

// consistent's placement depends on insertion order only when virtual nodes
// collide (the member added last takes the shared position). This shows the
// dependence is real, which is why New sorts members before adding them.
func TestConsistentDependsOnOrderOnlyThroughCollisions(t *testing.T) {
	cfg := shard.Config{Partitions: 271, Load: 1.25, ReplicationFactor: 10}
	members := statefulSetNames("kshard", 8)
	rng := rand.New(rand.NewPCG(3, 5))

	tableFor := func(h consistent.Hasher, order []string) []string {
		ms := make([]consistent.Member, len(order))
		for i, m := range order {
			ms[i] = member(m)
		}
		c := consistent.New(ms, consistent.Config{PartitionCount: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor, Load: cfg.Load, Hasher: h})
		out := make([]string, cfg.Partitions)
		for p := range out {
			out[p] = c.GetPartitionOwner(p).String()
		}
		return out
	}

	orderMattered := false
	xxWant, truncWant := tableFor(xxhasher{}, members), tableFor(truncHasher{}, members)
	for range 20 {
		order := slices.Clone(members)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if !slices.Equal(tableFor(xxhasher{}, order), xxWant) {
			t.Fatalf("without collisions, order %v changed consistent's assignment", order)
		}
		if !slices.Equal(tableFor(truncHasher{}, order), truncWant) {
			orderMattered = true
		}
		// New sorts before calling place, which makes the result the same
		// for every order even when virtual nodes collide.
		sorted := slices.Sorted(slices.Values(order))
		got, err := place(cfg, sorted, truncHasher{})
		if err != nil || !slices.Equal(got, truncWant) {
			t.Fatalf("place on sorted members differs under collisions: %v", err)
		}
	}
	if !orderMattered {
		t.Fatal("colliding hasher never made order matter; the test no longer shows why New sorts")
	}
}
