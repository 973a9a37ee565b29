package cache

import (
	"sort"

	"github.com/kshard/kshard/internal/cache/labelled"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Cache modes of a kind, as ModeReport and the kshard_cache_mode metric
// name them.
const (
	// ModeSharded: the API server filters the kind's list and watch by
	// the replica's partitions; the cache holds only those.
	ModeSharded = "sharded"
	// ModeFallback: sharding was asked for, but the API server does not
	// filter the kind (no feature gate, an old server, or the probe
	// failed), or the kind has no object yet to prove it does (probed
	// again at its first): one informer lists,
	// watches and stores the whole kind, as a full cache does (the memory
	// is not saved), and reads and events are filtered on the client, so
	// the cache still answers only for held partitions.
	ModeFallback = "fallback"
	// ModeLabels: the kind is listed and watched by the ring's partition
	// label (Sharding.Labels): the cache holds only the held partitions'
	// objects, on any API server.
	ModeLabels = "labels"
	// ModeFull: the kind is cached whole (no sharding, Sharding.Full,
	// cluster-scoped, metadata-only without labels, or a kind whose
	// objects' partitions cannot be told).
	ModeFull = "full"
)

// KindMode is how one kind is cached, and why.
type KindMode struct {
	Kind   schema.GroupVersionKind
	Mode   string // ModeSharded, ModeFallback or ModeFull
	Reason string // why not ModeSharded; "" when sharded
	// ObjectsListed counts the objects the API server returned to the
	// kind's LISTs (sharded and fallback kinds).
	ObjectsListed int64
	// LabelPatches counts the label patches sent and ConfirmReads the live
	// reads of objects that left a label selector (ModeLabels).
	LabelPatches, ConfirmReads int64
	// ForeignLabels counts the objects relabelled whose label carried a
	// value naming no partition.
	ForeignLabels int64
	// SelfCheck is the self-check's report of a kind cached by labels
	// ; nil in other modes, or when the check is off.
	SelfCheck *CheckReport
	// LabelBacklog is how many objects of a kind cached by labels wait
	// for this replica to write their partition label (queued, retries
	// included): an object without its label is in no replica's cache.
	// 0 in other modes.
	LabelBacklog int
	// HeldPartitions and SyncedPartitions count the partitions a sharded,
	// fallback or labelled kind holds (Cache.Hold) and has listed and
	// watches now; the ring activates a partition only once every such
	// kind has synced it (Cache.SyncedPartitions). 0 for a kind cached
	// whole.
	HeldPartitions, SyncedPartitions int
	// Informers describes the informers a partitioned kind runs, for
	// diagnosis: its segments and how many have synced, and for a kind
	// cached by labels its unlabelled views and what the speaking one
	// keeps. "" for a kind cached whole.
	Informers string

	// reprobe: in fallback only because the probe could not decide (the
	// kind had no object to test with); probed again at its first object.
	reprobe bool
}

// ModeReport returns how every kind created so far is cached, sorted by
// kind.
func (c *Cache) ModeReport() []KindMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]KindMode, 0, len(c.informers))
	for key, e := range c.informers {
		m := e.currentMode()
		m.Kind = key.gvk
		if e.part != nil {
			m.ObjectsListed = e.part.ObjectsListed()
			m.HeldPartitions, m.SyncedPartitions = e.part.Held().Len(), e.part.SyncedPartitions().Len()
			m.Informers = e.part.Describe()
		}
		if lab, ok := e.part.(*labelled.Labelled); ok {
			st := lab.Stats()
			m.LabelPatches, m.ConfirmReads, m.ForeignLabels = st.Patches.Load(), st.ConfirmReads.Load(), st.ForeignValues.Load()
			m.SelfCheck = checkReportOf(lab.CheckReport())
			m.LabelBacklog = lab.LabelBacklog()
			if f := lab.Forbidden(); f != "" {
				m.Reason = f
			}
		}
		if key.metadataOnly {
			m.Kind.Kind += " (metadata)"
		}
		if key.unstructured {
			m.Kind.Kind += " (unstructured)"
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind.String() < out[j].Kind.String() })
	return out
}

// ObjectCounts returns, per kind created so far, how many objects the cache
// holds and serves: for a sharded or fallback kind those of the held
// partitions, for a full kind all. It walks every store, so call it at
// scrape time, not on a hot path.
func (c *Cache) ObjectCounts() map[schema.GroupVersionKind]int {
	c.mu.Lock()
	entries := make(map[schema.GroupVersionKind]*entry, len(c.informers))
	for key, e := range c.informers {
		if !key.metadataOnly && !key.unstructured {
			entries[key.gvk] = e
		}
	}
	c.mu.Unlock()
	out := make(map[schema.GroupVersionKind]int, len(entries))
	for gvk, e := range entries {
		if e.part != nil {
			out[gvk] = len(e.part.List())
		} else {
			out[gvk] = len(e.informer.GetStore().ListKeys())
		}
	}
	return out
}

// ObjectsPerPartition returns, for every partition p of the ring (a slice of
// length Partitions), how many objects of the partition-sharded kinds the
// cache holds in p, summed over those kinds: the kinds in ModeSharded and
// those in ModeFallback, since a fallback kind, though listed whole, is
// partitioned by the same function. An object's partition is the ring's
// partition function for it (shard.RangePartitioner.PartitionOfObject: its
// namespace's under the namespace scheme, its UID's under the uid scheme),
// the one the segments store and serve by. Kinds cached whole (ModeFull:
// Sharding.Full, the manager's FullCacheKinds, cluster-scoped and
// metadata-only kinds) are not counted: they are cached independently of
// the ring, so they weigh the same on every replica whatever it holds. It
// returns nil when the cache has no Sharding.
//
// Each object is counted once, but not only for held partitions: a store
// may keep objects of partitions not held (a fallback kind stores the whole
// resource; a sharded segment keeps a released partition's objects until it
// stops), and they are counted too: callers mask the result with
// SyncedPartitions themselves. Summed over the held partitions (those of
// SyncedPartitions, once they have synced) it makes the sharded and
// fallback kinds' ObjectCounts. It walks every sharded kind's stores once,
// so call it at scrape or tick time, never on the event path.
func (c *Cache) ObjectsPerPartition() []int {
	if c.sharding == nil {
		return nil
	}
	c.mu.Lock()
	segs := make([]partitionedInformer, 0, len(c.informers))
	for _, e := range c.informers {
		// A kind cached whole has no partitioned informer.
		if e.part != nil {
			segs = append(segs, e.part)
		}
	}
	c.mu.Unlock()
	// The kinds' stores are walked outside c.mu, as in ObjectCounts: each
	// Segmented guards its own, and Hold and Get must not wait for a walk.
	counts := make([]int, c.sharding.partitions())
	for _, seg := range segs {
		seg.CountPartitions(counts)
	}
	return counts
}
