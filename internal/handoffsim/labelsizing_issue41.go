//go:build mutant_issue41

package handoffsim

// The cache as it was before issue 41's fix (built only with the tag
// mutant_issue41; labelsizing.go is the product's): with key partitioning
// there is no range partitioner, so a kind created before the ring's first
// Hold got a held set of size 0, its unlabelled view a keeps and a dirty
// set of size 0, and PartitionSet.Add ignored a partition outside the set.
// The view's LIST dropped every object without marking a partition dirty,
// so the first Hold listed nothing again.

const mutant = "issue 41: a kind's sets sized 0 before the ring's first Hold, out-of-range PartitionSet.Add ignored"

func heldBeforeFirstHold(int) int { return 0 }

func (p *proc) markDirty(v *unlView, q int) {
	if uint(q) < uint(v.dirty.Size()) {
		v.dirty.Add(q)
	}
}
