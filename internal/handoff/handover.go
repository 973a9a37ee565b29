package handoff

import (
	"time"

	"github.com/kshard/kshard/shard"
)

// handover keeps partitions that left this replica's target active until
// their new owner's cache holds them (make before break), each for at most
// HandoverTimeout. Break before make would leave a partition unreconciled
// while its new owner lists its objects (with a sharded cache, seconds at
// tens of thousands of objects). The new owner cannot activate it before
// that anyway: claims are unchanged (an active partition stays claimed), so
// this delays a handoff but never lets two replicas run a partition.
type handover struct {
	timeout time.Duration // HandoverTimeout; negative: break before make
	// pending: active partitions out of the target kept active, each
	// since since[p].
	pending shard.PartitionSet
	since   []time.Time
}

func newHandover(timeout time.Duration, partitions int) handover {
	return handover{timeout: timeout, pending: shard.NewPartitionSet(partitions), since: make([]time.Time, partitions)}
}

// revoke returns the partitions of leaving (active, out of the target) to
// revoke at now. Each other one is kept while its new owner is still
// listing it (listing) and its timeout has not passed. Without a ring to
// place by (ringUsable false), or with the wait turned off, all go at once.
func (h *handover) revoke(now time.Time, leaving shard.PartitionSet, ringUsable bool, listing func(p int) bool) shard.PartitionSet {
	h.pending = h.pending.Intersect(leaving) // drop those back in the target, or revoked (a fence)
	revoke := leaving.Clone()
	if h.timeout < 0 || !ringUsable {
		return revoke
	}
	for p := range leaving.All() {
		if !h.pending.Has(p) {
			h.pending.Add(p)
			h.since[p] = now
		}
		if now.Sub(h.since[p]) < h.timeout && listing(p) {
			revoke.Remove(p)
			continue
		}
		h.pending.Remove(p)
	}
	return revoke
}

// nextDeadline considers when each kept partition's timeout passes.
func (h *handover) nextDeadline(consider func(time.Time)) {
	for p := range h.pending.All() {
		consider(h.since[p].Add(h.timeout))
	}
}
