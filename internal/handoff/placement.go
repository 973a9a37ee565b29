package handoff

import (
	"slices"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/internal/handoffhook"
	"github.com/kshard/kshard/shard"
)

// Ring placement and weights. The ring is built from the view (the live
// active members of this fingerprint) and, on a balanced ring
// (shard.Config.Balance), from the partitions' weights: the largest weight
// any live member publishes for each. Placement decides the target; it
// never decides who may run a partition (claims do).

// placement is the ring this replica places partitions by, rebuilt only
// when its view or weights change.
type placement struct {
	cfg         shard.Config
	build       handoffhook.RingBuilder // assign.NewWeighted; the simulation shares one across its cores (New's hooks)
	built       bool
	view        []string       // the members the ring was built from, sorted
	viewWeights assign.Weights // the weights it was built with
	recent      []ringEntry    // oldest first
	ring        *assign.Ring
	err         error
}

// recentRings is how many rings a placement keeps for views it may
// return to.
const recentRings = 4

type ringEntry struct {
	view    []string
	weights assign.Weights
	ring    *assign.Ring
	err     error
}

func newPlacement(cfg shard.Config) placement {
	return placement{cfg: cfg, build: assign.NewWeighted}
}

// place makes the ring that of view (sorted) and weights, building it
// unless it is the current one or one of the recent ones.
func (pl *placement) place(view []string, weights assign.Weights) {
	if pl.built && slices.Equal(view, pl.view) && weights.Equal(pl.viewWeights) {
		return
	}
	pl.view, pl.viewWeights, pl.built = slices.Clone(view), weights, true
	for _, e := range pl.recent {
		if slices.Equal(e.view, pl.view) && e.weights.Equal(weights) {
			pl.ring, pl.err = e.ring, e.err
			return
		}
	}
	pl.ring, pl.err = pl.build(pl.cfg, pl.view, weights)
	// Membership flaps (A → AB → A) between few views; keeping the last
	// rings spares rebuilding them.
	if len(pl.recent) == recentRings {
		pl.recent = pl.recent[1:]
	}
	pl.recent = append(pl.recent, ringEntry{view: pl.view, weights: weights, ring: pl.ring, err: pl.err})
}

// usable reports whether there is a ring to place by.
func (pl *placement) usable() bool { return pl.ring != nil && pl.err == nil }

// weightReport is what a replica of a balanced ring publishes
// (Record.Weights): the quantized object counts of the partitions its cache
// holds and has synced.
type weightReport struct {
	partitions int
	// counts are the object counts the shell last reported
	// (ObjectsCounted), and countedSynced the synced partitions they cover.
	counts        []int
	countedSynced shard.PartitionSet
	published     assign.Weights
}

func newWeightReport(partitions int) weightReport { return weightReport{partitions: partitions} }

// counted takes in a count of the cache's objects per partition, complete
// for the partitions synced before counting.
func (w *weightReport) counted(synced shard.PartitionSet, counts []int) {
	w.counts = slices.Clone(counts)
	w.countedSynced = shard.NewPartitionSet(w.partitions).Union(synced)
}

// weightHysteresis is how many buckets (of about 10 % each) a partition's
// count may drift from the weight the view already has for it before this
// replica publishes a new one: the ring, and so the placement, stays put
// under the small changes of a live cluster, and a partition's new owner,
// counting the same objects a little later, confirms the old weight rather
// than moving the partition again.
const weightHysteresis = 2

// update recomputes the weights to publish: those of the partitions the
// cache holds synced (cacheSynced), against the weights the view has
// (viewWeights); it reports whether they changed. A partition synced since
// the last count carries the weight the view has for it until it is
// counted: its old owner hands it over as soon as this replica reports it
// warm, in the same Record, and stops reporting it; had the weight waited
// for the next count, the partition would be of unknown weight meanwhile,
// the ring placed by number, and partitions would move for nothing
// (measured with unknown weights placed as average ones: a rolling restart
// of 3 replicas that kept rebalancing for minutes).
func (w *weightReport) update(cacheSynced shard.PartitionSet, viewWeights assign.Weights) (changed bool) {
	seen := func(p int) uint8 {
		if len(viewWeights) != w.partitions {
			return 0
		}
		return viewWeights[p]
	}
	next := make(assign.Weights, w.partitions)
	for p := range cacheSynced.All() {
		if !w.countedSynced.Has(p) || p >= len(w.counts) {
			next[p] = seen(p)
			continue
		}
		b := assign.WeightBucket(w.counts[p])
		if s := seen(p); s != 0 && max(b, s)-min(b, s) <= weightHysteresis {
			b = s
		}
		next[p] = b
	}
	if next.Known() == 0 {
		next = nil
	}
	if next.Equal(w.published) {
		return false
	}
	w.published = next
	return true
}
