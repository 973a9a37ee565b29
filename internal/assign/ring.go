package assign

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/kshard/kshard/shard"
)

// Ring is the assignment of a ring's partitions to its members. It is
// immutable once built and safe for concurrent reads. A nil *Ring behaves as
// a ring with the default Config and no members.
type Ring struct {
	cfg         shard.Config
	partitioner shard.Partitioner      // SchemeKey
	ranges      shard.RangePartitioner // the ranged schemes
	members     []string               // sorted
	owners      []string               // owners[p] is the member owning p; "" when none
	owned       map[string]shard.PartitionSet
	fingerprint string
}

// New assigns cfg.Partitions partitions to members. The order of members does
// not matter. An empty list is valid and gives a ring that owns nothing.
// New returns a *ConfigError for an invalid cfg, a *MemberError for an empty
// or duplicate member name. *CapacityError and *PlacementError mean that
// consistent could not place the partitions; validation makes both
// unreachable (see checkCapacity and place).
func New(cfg shard.Config, members []string) (*Ring, error) {
	return NewWeighted(cfg, members, nil)
}

// NewWeighted is New for a balanced ring (Config.Balance > 0): it places the
// partitions by weights, the buckets of their object counts (Weights, of
// length Partitions, or nil when none is known). It refines the placement
// only when every partition's weight is known, and is New otherwise: a
// ring that forms, or whose partitions of a dead member are still being
// listed by their new owners, moves once by weight when the counts are all
// in rather than at every report (each move of a partition costs its new
// owner a LIST, and a few in a row make the sharded cache compact, which
// lists everything it holds again). Without Balance the weights are
// ignored. The same members and weights give the same ring on every
// replica.
func NewWeighted(cfg shard.Config, members []string, weights Weights) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()

	sorted := slices.Clone(members)
	slices.Sort(sorted)
	for i, m := range sorted {
		if m == "" {
			return nil, &MemberError{Member: m, Reason: "member names must not be empty; use the replica identity (pod name)"}
		}
		if i > 0 && sorted[i-1] == m {
			return nil, &MemberError{Member: m, Reason: "appears more than once; each replica needs a unique identity"}
		}
	}
	if err := checkCapacity(cfg, len(sorted)); err != nil {
		return nil, err
	}

	owners, err := place(cfg, sorted, xxhasher{})
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Balance <= 0:
		weights = nil
	case len(weights) != 0 && len(weights) != cfg.Partitions:
		return nil, fmt.Errorf("shard: %d weights for a ring of %d partitions; pass one per partition, or nil", len(weights), cfg.Partitions)
	case weights.Known() == cfg.Partitions:
		refine(owners, sorted, loads(weights), cfg.Balance)
	default:
		// Some weight unknown: placed by number, as without Balance.
		weights = nil
	}
	owned := make(map[string]shard.PartitionSet, len(sorted))
	for _, m := range sorted {
		owned[m] = shard.NewPartitionSet(cfg.Partitions)
	}
	for p, m := range owners {
		if m != "" {
			s := owned[m] // shares storage with the map entry, so Add sticks
			s.Add(p)
		}
	}
	r := &Ring{
		cfg:         cfg,
		partitioner: shard.NewPartitioner(cfg.Partitions),
		members:     sorted,
		owners:      owners,
		owned:       owned,
		fingerprint: ringFingerprint(cfg, sorted, weights),
	}
	if cfg.Scheme.Ranged() {
		if r.ranges, err = shard.NewRangePartitioner(cfg.Scheme, cfg.Partitions); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkCapacity rejects exactly the inputs for which consistent v1.0.0 panics
// with "not enough room to distribute partitions". consistent caps each
// member at avg = ceil(P/N × Load), computed in float64 as below, and walks
// the whole circle before giving up, so it panics iff N × avg < P. With
// Load > 1, which Validate enforces, N × avg ≥ P × Load > P for every N: no
// member count is too large, and members beyond P simply own nothing. The
// check stays so that a future change to validation cannot reach the panic.
func checkCapacity(cfg shard.Config, members int) error {
	if members == 0 {
		return nil
	}
	perMember := math.Ceil(float64(cfg.Partitions) / float64(members) * cfg.Load)
	if float64(members)*perMember >= float64(cfg.Partitions) {
		return nil
	}
	return &CapacityError{Partitions: cfg.Partitions, Members: members, Load: cfg.Load}
}

// member is how a replica identity appears to consistent: String is the
// identity, hashed onto the circle.
type member string

func (m member) String() string { return string(m) }

// xxhasher is consistent's Hasher. It must never change for a given
// hashScheme: it decides where members and partitions sit on the circle.
type xxhasher struct{}

func (xxhasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// place runs consistent over the sorted members and returns the owner table.
// The hasher is a parameter only so that tests can force collisions.
// consistent's placement depends only on the set of circle positions, except
// when two virtual nodes collide and the one added last wins; adding members
// in sorted order makes even that case the same on every replica.
//
// The recover is the last line of defence promised in doc.go: checkCapacity
// already rejects every input known to panic, so it fires only on a bug or an
// unforeseen library behaviour, and turns a crash into an error.
func place(cfg shard.Config, sorted []string, hasher consistent.Hasher) (owners []string, err error) {
	owners = make([]string, cfg.Partitions)
	if len(sorted) == 0 {
		return owners, nil // consistent would leave every owner nil anyway
	}
	defer func() {
		if r := recover(); r != nil {
			owners, err = nil, &PlacementError{Partitions: cfg.Partitions, Members: len(sorted), Panic: fmt.Sprint(r)}
		}
	}()
	ms := make([]consistent.Member, len(sorted))
	for i, m := range sorted {
		ms[i] = member(m)
	}
	c := consistent.New(ms, consistent.Config{
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
		Hasher:            hasher,
	})
	for p := range owners {
		o := c.GetPartitionOwner(p)
		if o == nil {
			return nil, &PlacementError{Partitions: cfg.Partitions, Members: len(sorted), Panic: "partition " + strconv.Itoa(p) + " has no owner"}
		}
		owners[p] = o.String()
	}
	return owners, nil
}

// ringFingerprint hashes the sorted member names, each prefixed with its
// length so that no two lists collide by concatenation ("ab","c" vs "a","bc").
// A balanced ring's weights follow, after a separator no name holds.
func ringFingerprint(cfg shard.Config, sorted []string, weights Weights) string {
	h := xxhash.New()
	var n [binary.MaxVarintLen64]byte
	for _, m := range sorted {
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(m)))])
		_, _ = h.WriteString(m)
	}
	if len(weights) > 0 {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(weights)
	}
	return cfg.Fingerprint() + "-m" + strconv.Itoa(len(sorted)) + "-" + strconv.FormatUint(h.Sum64(), 16)
}

// loads turns buckets into loads (weightOf).
func loads(weights Weights) []uint64 {
	w := make([]uint64, len(weights))
	for p, b := range weights {
		w[p] = weightOf(b)
	}
	return w
}

// refine moves partitions from the heaviest member to the lightest while the
// heaviest exceeds the mean by more than tolerance. Each move takes the
// partition whose weight is nearest half the gap between the two, and only
// one lighter than the gap, so that both end below the old maximum: every
// move lowers the sum of the squared loads, and refine ends. Ties go to the
// first member in sorted order and the lowest partition; integer loads keep
// it deterministic across architectures.
func refine(owners []string, sorted []string, weights []uint64, tolerance float64) {
	if len(sorted) < 2 {
		return
	}
	index := make(map[string]int, len(sorted))
	for i, m := range sorted {
		index[m] = i
	}
	load := make([]uint64, len(sorted))
	var total uint64
	for p, m := range owners {
		load[index[m]] += weights[p]
		total += weights[p]
	}
	limit := uint64(float64(total) / float64(len(sorted)) * (1 + tolerance))
	for range owners { // a guard: the squared loads fall with every move
		hi, lo := 0, 0
		for i, l := range load {
			if l > load[hi] {
				hi = i
			}
			if l < load[lo] {
				lo = i
			}
		}
		if load[hi] <= limit {
			return
		}
		gap := load[hi] - load[lo]
		best, bestDistance := -1, uint64(0)
		for p, m := range owners {
			w := weights[p]
			if m != sorted[hi] || w == 0 || w >= gap {
				continue
			}
			d := max(2*w, gap) - min(2*w, gap)
			if best < 0 || d < bestDistance {
				best, bestDistance = p, d
			}
		}
		if best < 0 {
			return
		}
		owners[best] = sorted[lo]
		load[hi] -= weights[best]
		load[lo] += weights[best]
	}
}

// Config returns the ring's configuration with defaults applied.
func (r *Ring) Config() shard.Config {
	if r == nil {
		return shard.Config{}.WithDefaults()
	}
	return r.cfg
}

// Partition returns the partition of key, as PartitionerFor(r.Config())
// would. Under SchemeUID that is a stand-in for keys naming no object (see
// RangePartitioner.Partition); objects are placed by RangePartitioner.
func (r *Ring) Partition(key string) int {
	if r == nil {
		return shard.NewPartitioner(shard.DefaultPartitions).Partition(key)
	}
	if r.cfg.Scheme.Ranged() {
		return r.ranges.Partition(key)
	}
	return r.partitioner.Partition(key)
}

// RangePartitioner returns the ring's partition function when its Scheme is
// ranged; ok is false under SchemeKey.
func (r *Ring) RangePartitioner() (rp shard.RangePartitioner, ok bool) {
	if r == nil || !r.cfg.Scheme.Ranged() {
		return shard.RangePartitioner{}, false
	}
	return r.ranges, true
}

// Owner returns the member owning partition p. ok is false when the ring has
// no members or p is outside [0, P).
func (r *Ring) Owner(p int) (member string, ok bool) {
	if r == nil || uint(p) >= uint(len(r.owners)) {
		return "", false
	}
	m := r.owners[p]
	return m, m != ""
}

// OwnerOfKey returns the member owning key's partition; ok is false when the
// ring has no members.
func (r *Ring) OwnerOfKey(key string) (member string, ok bool) {
	return r.Owner(r.Partition(key))
}

// Partitions returns the partitions member owns, as a set the caller may
// mutate. It is empty (of size P) when member is not in the ring.
func (r *Ring) Partitions(member string) shard.PartitionSet {
	if r == nil {
		return shard.NewPartitionSet(shard.DefaultPartitions)
	}
	if s, ok := r.owned[member]; ok {
		return s.Clone()
	}
	return shard.NewPartitionSet(r.cfg.Partitions)
}

// ownedSet returns member's partitions without copying; callers must not
// mutate the result.
func (r *Ring) ownedSet(member string) (shard.PartitionSet, bool) {
	if r == nil {
		return shard.PartitionSet{}, false
	}
	s, ok := r.owned[member]
	return s, ok
}

// Contains reports whether member is in the ring.
func (r *Ring) Contains(member string) bool {
	if r == nil {
		return false
	}
	_, ok := r.owned[member]
	return ok
}

// Members returns the ring's members, sorted, in a slice the caller owns.
func (r *Ring) Members() []string {
	if r == nil {
		return []string{}
	}
	return slices.Clone(r.members)
}

// Fingerprint names the ring's Config and member set, e.g.
// "xx1-p271-l1.25-r40-m3-dfab1e42e8a4d051". Two rings with equal fingerprints
// have the same assignment.
func (r *Ring) Fingerprint() string {
	if r == nil {
		return ringFingerprint(shard.Config{}.WithDefaults(), nil, nil)
	}
	return r.fingerprint
}

// MemberError says which member name New refused and why.
type MemberError struct {
	Member string
	Reason string
}

func (e *MemberError) Error() string {
	return fmt.Sprintf("shard: member %q: %s", e.Member, e.Reason)
}

// CapacityError says that the partitions cannot be spread over the members
// within the load bound. Validation keeps it unreachable with consistent
// v1.0.0 (see checkCapacity); it exists so that the panic it guards against
// can never surface.
type CapacityError struct {
	Partitions int
	Members    int
	Load       float64
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("shard: %d partitions cannot be placed on %d members at load %g; raise Load above 1 or Partitions, or lower the member count",
		e.Partitions, e.Members, e.Load)
}

// PlacementError reports that consistent failed while placing partitions. It
// indicates a bug in kshard's validation; please report it with the message.
type PlacementError struct {
	Partitions int
	Members    int
	Panic      string // what consistent reported
}

func (e *PlacementError) Error() string {
	return fmt.Sprintf("shard: placing %d partitions on %d members failed (%s); this is a kshard bug, please report it",
		e.Partitions, e.Members, e.Panic)
}
