//go:build !mutant_issue41

package handoffsim

import (
	"strings"
	"testing"

	"github.com/kshard/kshard/shard"
)

// No set of the modelled cache is smaller than the ring: a view's dirty set
// of size 0 (issue 41's) asked to mark a partition fails the seed instead of
// dropping the mark as PartitionSet.Add once did.
func TestMarkDirtyOutsideTheSetFails(t *testing.T) {
	w := newWorld(0, Options{Labels: true, LabelFixes: AllLabelFixes}.withDefaults())
	p := &proc{w: w, id: "pod-0", inc: "i1"}
	p.markDirty(&unlView{dirty: shard.NewPartitionSet(w.lab.partitions)}, w.lab.partitions-1)
	if w.violation != "" {
		t.Fatalf("a partition within the set: %s", w.violation)
	}
	p.markDirty(&unlView{dirty: shard.NewPartitionSet(0)}, 0)
	if !strings.Contains(w.violation, "outside its dirty set of size 0") {
		t.Fatalf("violation %q, want the set's size named", w.violation)
	}
}
