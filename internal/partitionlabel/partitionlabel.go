// Package partitionlabel reads the partition labels package shard names
// (shard.PartitionLabelKey, shard.PartitionLabelValue): it parses a label's
// value and builds the label selectors of a replica's partitions and of
// the objects no valid label places, for kshard's caches sharded by labels,
// the CLI and the simulation.
package partitionlabel

import (
	"strconv"
	"strings"

	"github.com/kshard/kshard/shard"
)

// Domain is the suffix of every partition label's prefix:
// "<ring>.kshard.io/..." (shard.PartitionLabelKey).
const Domain = "kshard.io"

// Parse returns the partition a label value names, and false
// when it names none of a ring of partitions partitions (empty, not a
// canonical decimal, or out of range): such an object is unlabelled for the
// ring and gets labelled again.
func Parse(value string, partitions int) (int, bool) {
	if value == "" || len(value) > 6 || (len(value) > 1 && value[0] == '0') {
		return 0, false
	}
	p := 0
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		p = p*10 + int(c-'0')
	}
	return p, p < partitions
}

// SelectorIn returns the label selector of the objects labelled with a
// partition of set: "<key> in (p1,p2,…)". An empty set has no selector
// (shard.ErrNoPartitions): the caller must not list at all.
func SelectorIn(key string, set shard.PartitionSet) (string, error) {
	if set.IsEmpty() {
		return "", shard.ErrNoPartitions
	}
	return key + " in (" + joinPartitions(set) + ")", nil
}

// SelectorUnlabelled returns the label selector of the objects that
// carry no valid partition label of a ring of partitions partitions:
// "<key> notin (0,1,…,P−1)", which matches objects without the key as well
// as those whose value names no partition (written by hand or by another
// tool). In steady state it matches nothing.
func SelectorUnlabelled(key string, partitions int) string {
	return key + " notin (" + joinPartitions(shard.FullPartitionSet(partitions)) + ")"
}

func joinPartitions(set shard.PartitionSet) string {
	var b strings.Builder
	first := true
	for p := range set.All() {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}
