package handoffsim

import (
	"time"

	"github.com/kshard/kshard/shard"
)

// partCache is a process's sharded cache (Options.PartitionCache): every
// partition its core holds (Ready.Hold) is listed — a LIST that takes a
// random time, is now and then very slow and, while the faults last,
// sometimes fails and is retried — and counts as synced only once its LIST
// has succeeded. The oracle checks that no partition activates on a
// process whose cache has not synced it (synced before act).
type partCache struct {
	hold, synced shard.PartitionSet
	// token[q] changes whenever q's hold starts or ends, so a LIST
	// outcome for an earlier hold is dropped.
	token []uint64
	// changed: SyncedPartitions differs from what the shell last read (an external
	// shell's PartitionCache.Changed).
	changed chan struct{}
	// labels: the cache of a kind sharded by labels (Options.Labels,
	// labelcache.go), whose label segments are the LISTs above; nil
	// without.
	labels *labelCache
}

func newPartCache(partitions int) partCache {
	empty := shard.NewPartitionSet(partitions)
	return partCache{hold: empty.Clone(), synced: empty.Clone(), token: make([]uint64, partitions), changed: make(chan struct{}, 1)}
}

// The longest LIST of a gained range, and the longest wait before a failed
// one is retried.
const (
	maxListTime  = 8 * time.Second
	maxListRetry = time.Second
)

// listTime is how long one LIST of a gained range takes, and whether it
// fails: slow LISTs (a large range, a loaded API server) happen at any
// time; failures only while the faults last.
func (w *world) listTime() (time.Duration, bool) {
	w.lists++
	d, slow, fails := w.drawListTime()
	if slow {
		w.slowLists++
	}
	if fails {
		w.failedLists++
	}
	return d, fails
}

// drawListTime draws one LIST's time, whether it is slow, and whether it
// fails.
func (w *world) drawListTime() (d time.Duration, slow, fails bool) {
	d = w.between(5*time.Millisecond, 200*time.Millisecond)
	if slow = w.rng.IntN(10) == 0; slow {
		d = w.between(time.Second, maxListTime)
	}
	return d, slow, !w.quiet && w.rng.IntN(100) < 15
}

// holdCache makes the cache hold set: new partitions are listed, released
// ones leave at once.
func (p *proc) holdCache(set shard.PartitionSet) {
	c := &p.pcache
	if set.Size() == 0 {
		return
	}
	if set.Equal(c.hold) {
		if c.labels != nil {
			// Still a Hold: the ring's first one, empty, gives the kind
			// its held set.
			p.holdLabels(set)
		}
		return
	}
	gained, released := set.Difference(c.hold), c.hold.Difference(set)
	c.hold = set.Clone()
	for q := range released.All() {
		c.token[q]++
	}
	if !released.Intersect(c.synced).IsEmpty() {
		c.synced = c.synced.Difference(released)
		// Reported after the Ready being applied, never inside it.
		p.w.after(0, func() {
			if p.alive {
				p.cacheChanged()
			}
		})
	}
	if c.labels != nil {
		p.holdLabels(set)
	}
	for q := range gained.All() {
		c.token[q]++
		if c.labels == nil || c.labels.running {
			p.list(q, c.token[q]) // else the label segments list as the views start
		}
	}
	if !gained.IsEmpty() || !released.IsEmpty() {
		p.w.tracef("%s cache holds %v (+%v −%v)", p, set, gained, released)
	}
}

// holdOf is what the process's cache holds after r: Ready.Hold, or the
// core's claim when the core was built without the synced-before-act rule
// (Options.IgnoreCacheSync), which names no Hold.
func (p *proc) holdOf(hold shard.PartitionSet) shard.PartitionSet {
	if hold.Size() != 0 {
		return hold
	}
	return p.core.Claim()
}

// list runs one LIST of q's range for the hold marked tok, retrying while
// it fails.
func (p *proc) list(q int, tok uint64) {
	w := p.w
	d, fails := w.listTime()
	var done func()
	done = func() {
		if !p.alive || p.pcache.token[q] != tok {
			return
		}
		if p.frozen(done) {
			return
		}
		if fails {
			w.tracef("%s LIST of partition %d fails; retrying", p, q)
			w.after(w.between(100*time.Millisecond, maxListRetry), func() { p.list(q, tok) })
			return
		}
		if p.pcache.labels != nil {
			p.segmentListed(q)
		}
		p.pcache.synced.Add(q)
		p.cacheChanged()
	}
	w.after(d, done)
}

// syncedPartitions is what the cache reports synced: the held partitions
// whose LIST has succeeded, over both views with labels (labelSynced).
func (p *proc) syncedPartitions() shard.PartitionSet {
	if p.pcache.labels != nil {
		return p.labelSynced()
	}
	return p.pcache.synced.Clone()
}

// cacheAdmits is the oracle's synced-before-act check of p activating
// partition q: its cache must have listed it (with labels, both views, and
// every object of q it can know of must be in them).
func (p *proc) cacheAdmits(q int) bool {
	w := p.w
	switch {
	case !w.p.partitionCache:
		return true
	case p.pcache.labels != nil:
		return p.labelsAdmit(q)
	case !p.pcache.synced.Has(q):
		w.fail("%s activates %d before its cache has listed it (held %v, synced %v)", p, q, p.pcache.hold.Has(q), p.pcache.synced)
		return false
	}
	return true
}

// cacheChanged reports the cache's synced set to the core, through the
// shell's PartitionCache when there is one.
func (p *proc) cacheChanged() {
	if p.shell != nil {
		select {
		case p.pcache.changed <- struct{}{}:
		default:
		}
		p.shell.CacheChanged()
		return
	}
	p.core.PartitionsSynced(p.syncedPartitions())
	if p.w.objects != nil {
		p.countLater()
	}
	p.step()
}

// ---- PartitionCache, for an external shell ----

// Hold sets the partitions the cache must list and watch.
func (p *proc) Hold(set shard.PartitionSet) {
	if p.alive {
		p.holdCache(set)
	}
}

// SyncedPartitions returns the held partitions whose LIST has succeeded
// (with labels, over both views).
func (p *proc) SyncedPartitions() shard.PartitionSet { return p.syncedPartitions() }

// Changed receives a value when SyncedPartitions may have changed.
func (p *proc) Changed() <-chan struct{} { return p.pcache.changed }

// countLater reports the cache's object counts to the core up to 2 s from
// now, as the manager's counter does on its own tick (Options.Balance): the
// partitions synced then, with the world's counts.
func (p *proc) countLater() {
	var count func()
	count = func() {
		if !p.alive || p.frozen(count) {
			return
		}
		p.core.ObjectsCounted(p.pcache.synced.Clone(), p.w.objects)
		p.step()
	}
	p.w.after(p.w.between(time.Millisecond, maxCountLag), count)
}

// maxCountLag is how long after its synced partitions change a process's
// object counts reach its core (Options.Balance), as the manager's counter
// ticks.
const maxCountLag = 2 * time.Second
