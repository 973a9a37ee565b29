package assign

import "github.com/kshard/kshard/shard"

// ringChange is what one member gains and loses between two rings.
type ringChange struct {
	Gained shard.PartitionSet // owned in the new ring, not in the old
	Lost   shard.PartitionSet // owned in the old ring, not in the new
}

// ringDiff returns, for every member of old or new, the partitions it gains and
// loses going from old to new; members whose partitions do not change get
// empty sets. A nil ring counts as a ring without members and with the other
// ring's partition count.
func ringDiff(old, new *Ring) map[string]ringChange {
	size := 0
	members := map[string]struct{}{}
	for _, r := range []*Ring{old, new} {
		if r == nil {
			continue
		}
		size = max(size, r.cfg.Partitions)
		for _, m := range r.members {
			members[m] = struct{}{}
		}
	}
	owned := func(r *Ring, m string) shard.PartitionSet {
		if s, ok := r.ownedSet(m); ok {
			return s
		}
		return shard.NewPartitionSet(size)
	}
	out := make(map[string]ringChange, len(members))
	for m := range members {
		before, after := owned(old, m), owned(new, m)
		out[m] = ringChange{Gained: after.Difference(before), Lost: before.Difference(after)}
	}
	return out
}
