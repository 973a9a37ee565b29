package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/labelled"
	"github.com/kshard/kshard/internal/cache/segmented"
	"github.com/kshard/kshard/shard"
)

// Informer is what sources use of a kind's informer: a client-go
// SharedIndexInformer for a kind cached whole, a *segmented.Segmented for a sharded
// kind. An alias of an interface literal, so that package controller's
// identical alias is the same type.
type Informer = interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error
	GetStore() toolscache.Store
}

// Sharding configures a Cache that holds, for each namespaced kind, only
// the objects of the partitions this replica holds (Cache.Hold): on the API
// server's sharded list and watch (Kubernetes 1.36, KEP-5866) where it
// filters a kind, and by partition labels (Labels) where it does not or the
// ring's scheme is not ranged.
type Sharding struct {
	// Partitioner is the ring's partition function when its scheme is
	// ranged (shard.SchemeNamespace or shard.SchemeUID): kinds are then
	// listed with a shard selector where the API server applies one.
	// Required unless Labels is set.
	Partitioner shard.RangePartitioner
	// Labels shards kinds by the ring's partition label: kinds of a ring
	// whose scheme is not ranged (shard.SchemeKey), and with a ranged one
	// those the API server does not filter by a shard selector (no
	// feature gate: every managed cluster today), which would otherwise be
	// listed whole (ModeFallback).
	Labels *LabelSharding
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

// LabelSharding configures the gate-free sharded cache: every object of a
// sharded kind carries the ring's partition label, and a replica lists and
// watches only the labels of the partitions it holds.
type LabelSharding struct {
	// Key is the ring's partition label (shard.PartitionLabelKey).
	// Required.
	Key string
	// Partitioner is the ring's partition function of request keys
	// (shard.PartitionerFor). Required.
	Partitioner shard.Partitioner
	// WriteConfig is the client configuration label patches, and the
	// reviews of whether they are allowed, are sent with. Give it one
	// without the fencing transport: a label is a pure function of an
	// object's key, so a write that lands late is harmless, and a replica
	// whose lease has lapsed must still be able to label.
	// Defaults to the cache's configuration.
	WriteConfig *rest.Config
	// QPS bounds the label patches per kind per second (DefaultLabelQPS).
	QPS float64
	// KeepManagedFields keeps metadata.managedFields in cached objects;
	// by default a labelled kind's objects are stored without them.
	KeepManagedFields bool
	// CheckInterval is how often each labelled kind checks that its cache
	// holds every object of the partitions it reports synced: a paged
	// metadata-only LIST of the replica's share and of the unlabelled
	// objects (KindMode.SelfCheck).
	// Defaults to DefaultCheckInterval; negative: off.
	CheckInterval time.Duration
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
	set := shard.NewPartitionSet(sh.partitions())
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

// partitions is the ring's partition count: Labels' partitioner's when set
// (key partitioning has no range partitioner), else the range
// partitioner's. New has checked that the two agree when both are set.
func (sh *Sharding) partitions() int {
	if sh.Labels != nil {
		return sh.Labels.Partitioner.Count()
	}
	return sh.Partitioner.Count()
}

// DeclareRoute tells the cache how a source maps obj's kind to requests
// (controllers call it as they are built, before their sources start). A
// cache sharded by labels needs it for each kind it labels: under the key
// scheme an object's partition is that of its own key (shard.RouteSelf) or
// its controller owner's (shard.RouteOwner), and a kind only mapped by a
// function (shard.RouteMapped), or mapped both ways, is cached whole. It
// fails when the kind's informer exists already in a mode the new route
// does not fit.
func (c *Cache) DeclareRoute(obj Object, route shard.Route) error {
	key, err := c.keyOf(obj)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.routes[key], route) {
		c.routes[key] = append(c.routes[key], route)
	}
	e, ok := c.informers[key]
	if !ok || e.mode.Mode != ModeLabels {
		return nil
	}
	if r, why := c.labelRoute(key); r != e.route {
		return fmt.Errorf("cache: %s is already cached by partition label for route %s, and a source that maps it by route %s (%s) came after it started; build every controller before the manager starts, or list the kind in the manager's FullCacheKinds", key.gvk, e.route, route, why)
	}
	return nil
}

// labelRoute returns the route by which the kind of key is labelled, or 0
// and why when it cannot be. Call with c.mu held.
func (c *Cache) labelRoute(key informerKey) (shard.Route, string) {
	routes := c.routes[key]
	if c.sharding.Labels.Partitioner.Count() > 0 {
		if _, ranged := c.sharding.Labels.Partitioner.(shard.RangePartitioner); ranged {
			// A ranged scheme partitions by namespace: an object, its
			// owner and whatever maps within its namespace share it.
			return shard.RouteSelf, ""
		}
	}
	switch {
	case len(routes) == 0:
		return 0, "no controller watches it, so the partition of its objects cannot be told (a reconciler reading it by name may need any of them)"
	case slices.Contains(routes, shard.RouteMapped):
		return 0, "a controller maps its events with a function, so the partition of its objects cannot be told"
	case len(routes) > 1:
		return 0, "controllers map it both to its own key and to its owner's, which are different partitions"
	}
	return routes[0], ""
}

// shardingFor decides how the kind of key is cached, and by which route its
// labels are told (ModeLabels). It probes the API server once per kind
// where a shard selector could serve (probeServer), retrying while the
// server is unreachable; a probe that fails otherwise falls back, logged.
// A kind that had no object to probe with falls back until its first
// (reprobeFor), or is labelled where labels are on.
func (c *Cache) shardingFor(ctx context.Context, key informerKey, mapping *meta.RESTMapping) (KindMode, shard.Route) {
	sh := c.sharding
	switch {
	case sh == nil:
		return KindMode{Mode: ModeFull, Reason: "sharding is off"}, 0
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return KindMode{Mode: ModeFull, Reason: "cluster-scoped kinds are cached whole"}, 0
	case slices.Contains(c.fullKinds, key.gvk):
		return KindMode{Mode: ModeFull, Reason: "listed in Sharding.Full"}, 0
	case sh.partitions() < 2:
		return KindMode{Mode: ModeFull, Reason: "a ring of one partition has nothing to shard"}, 0
	}
	server := KindMode{Mode: ModeFull, Reason: "metadata-only kinds are not sharded by the API server: it echoes no ShardInfo on metadata-only lists"}
	if key.unstructured {
		server.Reason = "unstructured kinds are not sharded by the API server's selectors here: cache the kind's Go type, or shard by labels"
	}
	if !key.metadataOnly && !key.unstructured && sh.Partitioner.Count() > 0 {
		if server = c.probeServer(ctx, mapping); server.Mode == ModeSharded {
			return server, 0
		}
	}
	if sh.Labels == nil {
		return server, 0
	}
	c.mu.Lock()
	route, why := c.labelRoute(key)
	c.mu.Unlock()
	if route == 0 {
		return KindMode{Mode: ModeFull, Reason: why + "; cached whole (list it in FullCacheKinds to say so, or partition by namespace)"}, 0
	}
	if denied := c.canPatch(ctx, mapping); denied != "" {
		return KindMode{Mode: ModeFull, Reason: denied}, 0
	}
	return KindMode{Mode: ModeLabels}, route
}

// canPatch asks the API server (a SelfSubjectAccessReview) whether this
// replica may patch the kind, which labelling needs; it returns why not,
// or "" when it may. A review that cannot be made counts as allowed: the
// labeller reports a refusal when it meets one. The review is a POST made
// with the label writer's configuration: it asks about the writer's
// permissions, and it must not be refused as a late write of a replica
// whose lease lapsed.
func (c *Cache) canPatch(ctx context.Context, mapping *meta.RESTMapping) string {
	cs, err := authorizationv1.NewForConfigAndClient(c.labelWriteConfig(), c.labelHTTP)
	if err != nil {
		return ""
	}
	ns, _ := c.namespaceFor(mapping)
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: "patch", Group: mapping.Resource.Group, Resource: mapping.Resource.Resource,
		},
	}}
	got, err := retryUnreachable(ctx, c.clock, func() (*authzv1.SelfSubjectAccessReview, error) {
		return cs.SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	})
	if err != nil || got.Status.Allowed {
		return ""
	}
	return fmt.Sprintf("this replica may not patch %s (RBAC), which labelling its objects needs; cached whole: grant the ring's service account patch on it", mapping.Resource.GroupResource())
}

// labelWriteConfig is the configuration of label patches
// (LabelSharding.WriteConfig).
func (c *Cache) labelWriteConfig() *rest.Config {
	if w := c.sharding.Labels.WriteConfig; w != nil {
		return w
	}
	return c.config
}

// newSegmented builds the sharded informer of a typed kind.
func (c *Cache) newSegmented(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, mode KindMode, indexers toolscache.Indexers) (*segmented.Segmented, error) {
	lw, example, err := c.typedListWatch(gvk, mapping)
	if err != nil {
		return nil, err
	}
	return segmented.New(segmented.Options{
		Partitioner: c.sharding.Partitioner,
		ListWatch:   lw.ListWatch,
		Example:     example,
		Filtered:    mode.Mode == ModeSharded,
		Reprobe:     c.reprobeFor(gvk, mapping, mode),
		Indexers:    indexers,
		Logger:      c.sharding.Logger.WithValues("kind", gvk.String()),
		Clock:       c.clock,
	})
}

// newLabelled builds the label-sharded informer of a kind.
func (c *Cache) newLabelled(key informerKey, mapping *meta.RESTMapping, route shard.Route, indexers toolscache.Indexers) (*labelled.Labelled, error) {
	ls := c.sharding.Labels
	var lw toolscache.ListerWatcherWithContext
	var example runtime.Object
	var get func(ctx context.Context, ns, name string) (runtime.Object, error)
	ns, scoped := c.namespaceFor(mapping)
	if key.unstructured {
		var err error
		if lw, example, get, err = c.unstructuredLabelled(mapping); err != nil {
			return nil, err
		}
	} else if key.metadataOnly {
		mlw, err := c.metadataListWatch(key.gvk, mapping)
		if err != nil {
			return nil, err
		}
		lw, example = mlw, &metav1.PartialObjectMetadata{}
		mc, err := c.metadataClient()
		if err != nil {
			return nil, err
		}
		get = func(ctx context.Context, ns, name string) (runtime.Object, error) {
			obj, err := mc.Resource(mapping.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				obj.SetGroupVersionKind(key.gvk)
			}
			return obj, err
		}
	} else {
		tlw, ex, err := c.typedListWatch(key.gvk, mapping)
		if err != nil {
			return nil, err
		}
		lw, example = tlw.ListWatch, ex
		get = func(ctx context.Context, getNS, name string) (runtime.Object, error) {
			obj, err := c.scheme.New(key.gvk)
			if err != nil {
				return nil, err
			}
			err = tlw.rc.Get().NamespaceIfScoped(getNS, scoped || getNS != "").Resource(mapping.Resource.Resource).Name(name).Do(ctx).Into(obj)
			return obj, err
		}
	}
	_ = ns
	writer, err := metadata.NewForConfigAndClient(c.labelWriteConfig(), c.labelHTTP)
	if err != nil {
		return nil, fmt.Errorf("cache: building the label writer: %w", err)
	}
	var transform toolscache.TransformFunc
	if !ls.KeepManagedFields {
		transform = labelled.StripManagedFields
	}
	checkList, err := c.checkList(mapping)
	if err != nil {
		return nil, err
	}
	return labelled.New(labelled.Options{
		LabelKey: ls.Key, Partitioner: ls.Partitioner, Route: route,
		ListWatch: lw, Example: example, Transform: transform, LabelQPS: ls.QPS, Indexers: indexers,
		Client: labelled.NewObjectClient(get, writer.Resource(mapping.Resource)), CheckInterval: ls.CheckInterval, CheckList: checkList,
		Logger: c.sharding.Logger.WithValues("kind", key.gvk.String()),
		Clock:  c.clock,
	})
}

// Hold sets the partitions whose objects the sharded kinds hold: the ring's
// target, claimed, active and draining partitions (ring.PartitionCache),
// and always those of Sharding.SharedNamespaces. Kinds created later start
// holding them. Without Sharding it does nothing. A set of another size
// than the ring's partition count panics (the zero PartitionSet is taken
// as empty): a programming error that would otherwise leave kinds holding
// nothing of the partitions they report synced.
func (c *Cache) Hold(set shard.PartitionSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sharding == nil {
		return
	}
	c.held = c.ringSized("Hold", set).Union(c.shared)
	for _, e := range c.informers {
		if e.part != nil {
			e.part.Hold(c.held)
		}
	}
}

// ringSized returns set, or an empty set of the ring's partition count for
// the zero PartitionSet; a set of another size panics, naming op.
func (c *Cache) ringSized(op string, set shard.PartitionSet) shard.PartitionSet {
	switch set.Size() {
	case c.partitions:
		return set
	case 0:
		return shard.NewPartitionSet(c.partitions)
	}
	panic(fmt.Sprintf("cache: %s of a set of %d partitions, but the ring has %d: a programming error; build the set with the ring's partition count", op, set.Size(), c.partitions))
}

// SetActive tells the labelled kinds which partitions are active on this
// replica: their owner labels their unlabelled objects. The coordinator
// calls it whenever the active set changes. Sizes as in Hold.
func (c *Cache) SetActive(set shard.PartitionSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sharding == nil {
		return
	}
	c.active = c.ringSized("SetActive", set).Clone()
	for _, e := range c.informers {
		if lab, ok := e.part.(*labelled.Labelled); ok {
			lab.SetActive(c.active)
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
		if e.part != nil {
			out = out.Intersect(e.part.SyncedPartitions())
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

// forward turns a partitioned informer's changes into the Cache's until
// ctx ends.
func (c *Cache) forward(ctx context.Context, part partitionedInformer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-part.Changed():
			c.mu.Lock()
			c.signalLocked()
			c.mu.Unlock()
		}
	}
}

// partitionOfKey returns the partition of the object namespace/name of e's
// kind as a key tells it; ok is false when the key does not (the uid
// scheme, or a kind labelled by its controller owner).
func (c *Cache) partitionOfKey(e *entry, namespace, name string) (int, bool) {
	if e.mode.Mode == ModeLabels {
		ls := c.sharding.Labels
		if _, ranged := ls.Partitioner.(shard.RangePartitioner); ranged || e.route == shard.RouteSelf {
			return ls.Partitioner.Partition(shard.KeyOf(namespace, name)), true
		}
		return 0, false
	}
	if c.sharding.Partitioner.Scheme() != shard.SchemeNamespace {
		return 0, false
	}
	return c.sharding.Partitioner.PartitionOfObject(namespace, "")
}

// awaitPartition waits until partition p of part's kind is synced, or
// fails at once with ErrPartitionNotHeld if it is not held.
func (c *Cache) awaitPartition(ctx context.Context, part partitionedInformer, gr schema.GroupResource, what string, p int) error {
	for {
		changed := c.Changed()
		if !part.Held().Has(p) {
			return fmt.Errorf("%w: %s %s is in partition %d; this replica reads only the partitions it holds: read it from the API server, list its kind in the manager's FullCacheKinds, or its namespace in SharedNamespaces",
				ErrPartitionNotHeld, gr, what, p)
		}
		if part.SyncedPartitions().Has(p) {
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
	gr := e.mapping.Resource.GroupResource()
	p, known := c.partitionOfKey(e, namespace, name)
	if !known {
		obj, found, err := e.part.GetByKey(key)
		if err == nil && !found && e.mode.Mode != ModeLabels {
			// Under SchemeUID the key does not tell the partition: look
			// in every held partition; absence cannot be told from
			// elsewhere.
			err = fmt.Errorf("%w: %s %s is not in the partitions held here, and under the uid scheme its partition cannot be told from its name",
				ErrPartitionNotHeld, gr, key)
		}
		return obj, found, err
	}
	if err := c.awaitPartition(ctx, e.part, gr, key, p); err != nil {
		return nil, false, err
	}
	return e.part.GetByKey(key)
}

// listSharded is List for a sharded kind: the objects of namespace if it is
// in a held partition, or of every held partition when namespace is "".
func (c *Cache) listSharded(ctx context.Context, e *entry, namespace string) ([]any, error) {
	if namespace == "" {
		return e.part.List(), nil
	}
	if p, known := c.partitionOfKey(e, namespace, ""); known && c.namespacePartitioned(e) {
		if err := c.awaitPartition(ctx, e.part, e.mapping.Resource.GroupResource(), "in namespace "+namespace, p); err != nil {
			return nil, err
		}
	}
	return e.part.ByIndex(toolscache.NamespaceIndex, namespace)
}

// namespacePartitioned reports whether a namespace lies in one partition
// of e's kind (the namespace scheme).
func (c *Cache) namespacePartitioned(e *entry) bool {
	if e.mode.Mode == ModeLabels {
		rp, ranged := c.sharding.Labels.Partitioner.(shard.RangePartitioner)
		return ranged && rp.Scheme() == shard.SchemeNamespace
	}
	return c.sharding.Partitioner.Scheme() == shard.SchemeNamespace
}
