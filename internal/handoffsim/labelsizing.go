//go:build !mutant_issue41

package handoffsim

// This file is how shard/cache sizes a labelled kind's partition sets
// before the ring's first Hold. labelsizing_issue41.go, built with the tag
// mutant_issue41 (never by default), replaces it with the cache as it was
// before issue 41's fix, so that a test built with the tag shows that the
// simulation finds that bug (TestMutantIssue41).

// mutant names the product behaviour this build models in place of the
// product's own: "" here.
const mutant = ""

// Mutant names the product behaviour the package was built to model in
// place of the product's own (by a build tag), "" when it models the
// product: tests built with a mutant's tag check that they run it.
func Mutant() string { return mutant }

// heldBeforeFirstHold is the size of the held set a kind created before
// the ring's first Hold gets from the cache: the ring's partition count,
// known when the manager builds the cache.
func heldBeforeFirstHold(partitions int) int { return partitions }

// markDirty records that view v dropped an object of partition q. The
// product's PartitionSet.Add is loud about a partition outside the set,
// and no set of the cache is smaller than the ring: one that is fails the
// seed.
func (p *proc) markDirty(v *unlView, q int) {
	if uint(q) >= uint(v.dirty.Size()) {
		p.w.fail("%s unlabelled view drops an object of partition %d, outside its dirty set of size %d: a set smaller than the ring's %d partitions",
			p, q, v.dirty.Size(), p.w.lab.partitions)
		return
	}
	v.dirty.Add(q)
}
