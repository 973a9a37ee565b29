package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// Informer is what sources use of a kind's informer: a client-go
// SharedIndexInformer for a kind cached whole, a *Segmented for a sharded
// kind. An alias of an interface literal, so that package controller's
// identical alias is the same type.
type Informer = interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error
	GetStore() toolscache.Store
}

// Sharding configures a Cache that holds, for each namespaced typed kind,
// only the objects of the partitions this replica holds (Cache.Hold), on the
// API server's sharded list and watch (Kubernetes 1.36, KEP-5866).
type Sharding struct {
	// Partitioner is the ring's partition function; its scheme must be
	// ranged (shard.SchemeNamespace or shard.SchemeUID). Required.
	Partitioner shard.RangePartitioner
	// Full lists kinds cached whole, as without Sharding: those a
	// reconciler reads outside the partitions it owns (a ConfigMap every
	// replica reads, say). Cluster-scoped and metadata-only kinds are
	// always cached whole (see ModeReport).
	Full []Object
	// SharedNamespaces are namespaces every replica caches for every
	// sharded kind, whatever partitions it owns: where reconcilers read
	// objects shared across partitions (settings or credentials in the
	// operator's namespace, say) while the kinds of those objects stay
	// sharded elsewhere. Each adds its partition to the held set, so the
	// other namespaces of that partition come along (about 1/P of them),
	// and the shared objects' events reach every replica's sources, as
	// mapped requests do. Only with shard.SchemeNamespace: under the uid
	// scheme a namespace spreads over every partition (list the kind in
	// Full instead).
	SharedNamespaces []string
	// Logger receives one line per kind naming the mode chosen and why.
	// Defaults to logr.Discard().
	Logger logr.Logger
}

// ErrPartitionNotHeld is wrapped by the error of a Get or List of a sharded
// kind that names an object or namespace of a partition this replica does
// not hold. It is not a NotFound: the object may well exist. Read such
// objects through the API server, list the kind in Sharding.Full, or the
// namespace in Sharding.SharedNamespaces.
var ErrPartitionNotHeld = errors.New("cache: the partition is not held by this replica's sharded cache")

// sharedPartitions returns the partitions of sh.SharedNamespaces, or an
// error naming the first namespace that cannot be shared.
func (sh *Sharding) sharedPartitions() (shard.PartitionSet, error) {
	rp := sh.Partitioner
	set := shard.NewPartitionSet(rp.Count())
	for _, ns := range sh.SharedNamespaces {
		if rp.Scheme() != shard.SchemeNamespace {
			return set, fmt.Errorf("cache: Options.Sharding.SharedNamespaces needs the namespace scheme, not %q: under it a namespace spreads over every partition; list the kinds read there in Sharding.Full instead", rp.Scheme())
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return set, fmt.Errorf("cache: Options.Sharding.SharedNamespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
		p, _ := rp.PartitionOfObject(ns, "")
		set.Add(p)
	}
	return set, nil
}

// Cache modes of a kind, as ModeReport and the kshard_cache_mode metric
// name them.
const (
	// ModeSharded: the API server filters the kind's list and watch by
	// the replica's partitions; the cache holds only those.
	ModeSharded = "sharded"
	// ModeFallback: sharding was asked for, but the API server does not
	// filter the kind (no feature gate, an old server, a custom resource
	// whose LIST echoes no ShardInfo in 1.36, or the probe failed): one
	// informer lists, watches and stores the whole kind, as a full cache
	// does (the memory is not saved), and reads and events are filtered on
	// the client, so the cache still answers only for held partitions.
	ModeFallback = "fallback"
	// ModeFull: the kind is cached whole (no sharding, Sharding.Full,
	// cluster-scoped or metadata-only).
	ModeFull = "full"
)

// KindMode is how one kind is cached, and why.
type KindMode struct {
	Kind   schema.GroupVersionKind
	Mode   string // ModeSharded, ModeFallback or ModeFull
	Reason string // why not ModeSharded; "" when sharded
	// ObjectsListed counts the objects the API server returned to the
	// kind's LISTs (sharded and fallback kinds; see Segmented).
	ObjectsListed int64
}

// ModeReport returns how every kind created so far is cached, sorted by
// kind.
func (c *Cache) ModeReport() []KindMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]KindMode, 0, len(c.informers))
	for key, e := range c.informers {
		m := e.mode
		m.Kind = key.gvk
		if e.seg != nil {
			m.ObjectsListed = e.seg.ObjectsListed()
		}
		if key.metadataOnly {
			m.Kind.Kind += " (metadata)"
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
		if !key.metadataOnly {
			entries[key.gvk] = e
		}
	}
	c.mu.Unlock()
	out := make(map[schema.GroupVersionKind]int, len(entries))
	for gvk, e := range entries {
		if e.seg != nil {
			out[gvk] = len(e.seg.List())
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
	segs := make([]*Segmented, 0, len(c.informers))
	for _, e := range c.informers {
		// A kind cached whole has no Segmented (entry.seg is nil).
		if e.seg != nil {
			segs = append(segs, e.seg)
		}
	}
	c.mu.Unlock()
	// The kinds' stores are walked outside c.mu, as in ObjectCounts: each
	// Segmented guards its own, and Hold and Get must not wait for a walk.
	counts := make([]int, c.sharding.Partitioner.Count())
	for _, seg := range segs {
		seg.countPartitions(counts)
	}
	return counts
}

// shardingFor decides how the kind of key is cached. It probes the API
// server once per kind, retrying while the server is unreachable; a probe
// that fails otherwise (forbidden, say) falls back, logged: the client-side
// check keeps a fallback exact.
func (c *Cache) shardingFor(ctx context.Context, key informerKey, mapping *meta.RESTMapping) KindMode {
	sh := c.sharding
	switch {
	case sh == nil:
		return KindMode{Mode: ModeFull, Reason: "sharding is off"}
	case key.metadataOnly:
		return KindMode{Mode: ModeFull, Reason: "metadata-only kinds are cached whole: the API server does not echo ShardInfo on metadata-only lists"}
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return KindMode{Mode: ModeFull, Reason: "cluster-scoped kinds are cached whole"}
	case slices.Contains(c.fullKinds, key.gvk):
		return KindMode{Mode: ModeFull, Reason: "listed in Sharding.Full"}
	}
	if sh.Partitioner.Count() < 2 {
		return KindMode{Mode: ModeFull, Reason: "a ring of one partition has nothing to shard"}
	}
	selector, err := sh.Partitioner.Selector(shard.NewPartitionSet(sh.Partitioner.Count(), 0))
	if err == nil {
		var dc dynamic.Interface
		if dc, err = dynamic.NewForConfigAndClient(c.config, c.httpClient); err == nil {
			ns, _ := c.namespaceFor(mapping)
			var probe ShardProbe
			// Patient like the informers: a replica started while the API
			// server is unreachable must not settle for the fallback.
			probe, err = retryUnreachable(ctx, func() (ShardProbe, error) {
				return ProbeShardSelector(ctx, dc, mapping.Resource, ns, selector)
			})
			if err == nil {
				if probe.Filtered {
					return KindMode{Mode: ModeSharded}
				}
				return KindMode{Mode: ModeFallback, Reason: probe.Reason}
			}
		}
	}
	return KindMode{Mode: ModeFallback, Reason: fmt.Sprintf("probing the API server's sharded list failed (%v); listing the whole kind and filtering on the client", err)}
}

// newSegmented builds the sharded informer of a typed kind.
func (c *Cache) newSegmented(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, mode KindMode) (*Segmented, error) {
	lw, example, err := c.typedListWatch(gvk, mapping)
	if err != nil {
		return nil, err
	}
	return NewSegmented(SegmentedOptions{
		Partitioner: c.sharding.Partitioner,
		ListWatch:   lw.ListWatch,
		Example:     example,
		Filtered:    mode.Mode == ModeSharded,
		Logger:      c.sharding.Logger.WithValues("kind", gvk.String()),
	})
}

// Hold sets the partitions whose objects the sharded kinds hold: the ring's
// target, claimed, active and draining partitions (ring.PartitionCache),
// and always those of Sharding.SharedNamespaces. Kinds created later start
// holding them. Without Sharding it does nothing.
func (c *Cache) Hold(set shard.PartitionSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sharding == nil {
		return
	}
	c.held = set.Union(c.shared)
	for _, e := range c.informers {
		if e.seg != nil {
			e.seg.Hold(c.held)
		}
	}
}

// SyncedPartitions returns the held partitions that every sharded kind has
// listed and watches now (ring.PartitionCache). Without Sharding, or
// before any sharded kind exists, that is every held partition.
func (c *Cache) SyncedPartitions() shard.PartitionSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.held.Clone()
	for _, e := range c.informers {
		if e.seg != nil {
			out = out.Intersect(e.seg.SyncedPartitions())
		}
	}
	return out
}

// Changed is closed when SyncedPartitions may have changed; call it again
// for the next change (ring.PartitionCache).
func (c *Cache) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// signalLocked closes the current Changed channel. Call with c.mu held.
func (c *Cache) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// forward turns a Segmented's changes into the Cache's until ctx ends.
func (c *Cache) forward(ctx context.Context, seg *Segmented) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-seg.Changed():
			c.mu.Lock()
			c.signalLocked()
			c.mu.Unlock()
		}
	}
}

// awaitPartition waits until partition p of seg's kind is synced, or
// fails at once with ErrPartitionNotHeld if it is not held.
func (c *Cache) awaitPartition(ctx context.Context, seg *Segmented, gr schema.GroupResource, what string, p int, ok bool) error {
	for {
		changed := c.Changed()
		if !ok || !seg.Held().Has(p) {
			return fmt.Errorf("%w: %s %s is in partition %d (%s); this replica reads only the partitions it holds: read it from the API server, list its kind in the manager's FullCacheKinds, or its namespace in SharedNamespaces",
				ErrPartitionNotHeld, gr, what, p, c.sharding.Partitioner.Scheme())
		}
		if seg.SyncedPartitions().Has(p) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cache: waiting for partition %d of %s to sync: %w", p, gr, ctx.Err())
		}
	}
}

// getSharded is Get for a sharded kind.
func (c *Cache) getSharded(ctx context.Context, e *entry, key string, namespace, name string) (any, bool, error) {
	p, ok := c.sharding.Partitioner.PartitionOfObject(namespace, "")
	if c.sharding.Partitioner.Scheme() != shard.SchemeNamespace {
		// Under SchemeUID the key does not tell the partition: look in
		// every held partition; absence cannot be told from elsewhere.
		obj, found, err := e.seg.GetByKey(key)
		if err == nil && !found {
			err = fmt.Errorf("%w: %s %s is not in the partitions held here, and under the uid scheme its partition cannot be told from its name",
				ErrPartitionNotHeld, e.mapping.Resource.GroupResource(), key)
		}
		return obj, found, err
	}
	if err := c.awaitPartition(ctx, e.seg, e.mapping.Resource.GroupResource(), key, p, ok); err != nil {
		return nil, false, err
	}
	return e.seg.GetByKey(key)
}

// listSharded is List for a sharded kind: the objects of namespace if it is
// in a held partition, or of every held partition when namespace is "".
func (c *Cache) listSharded(ctx context.Context, e *entry, namespace string) ([]any, error) {
	gr := e.mapping.Resource.GroupResource()
	if namespace == "" {
		return e.seg.List(), nil
	}
	if c.sharding.Partitioner.Scheme() == shard.SchemeNamespace {
		p, ok := c.sharding.Partitioner.PartitionOfObject(namespace, "")
		if err := c.awaitPartition(ctx, e.seg, gr, "in namespace "+namespace, p, ok); err != nil {
			return nil, err
		}
	}
	return e.seg.ListNamespace(namespace)
}
