package crshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kshard/kshard/shard"
	kcache "github.com/kshard/kshard/shard/cache"
	"github.com/kshard/kshard/shard/cache/cachemetrics"
)

// CacheMode is what the manager's cache holds on each replica (see
// Options.CacheMode).
type CacheMode string

const (
	// CacheFull: controller-runtime's own cache, every object of every
	// watched kind on every replica.
	CacheFull CacheMode = "full"
	// CacheLabels: the ring's sharded cache (Ring.NewCache), each replica
	// holding the objects of the partitions it needs, selected by the
	// ring's partition label; no feature gate, any Kubernetes version.
	CacheLabels CacheMode = "labels"
)

// NewCache builds the manager's cache: pass it as controller-runtime's
// manager.Options.NewCache. With Options.CacheMode CacheFull it is
// controller-runtime's own cache (cache.New), so a manager can be built
// the same way in either mode. With CacheLabels it is the ring's sharded
// cache: kshard's label-sharded cache (the native manager's
// CacheMode labels) behind controller-runtime's cache.Cache: every kind a
// controller of the ring maps to its own key (For, Watches with
// EnqueueRequestForObject) or to its controller owner's (Owns) holds the
// objects of the partitions this replica needs; other kinds are cached
// whole (docs/adapter.md). It refuses every cache.Options field it
// cannot honour, by name. Its reads use cfg; its label patches use the
// config New was given, without the fencing transport.
func (r *Ring) NewCache(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	if r.slot == nil {
		return crcache.New(cfg, opts)
	}
	if cfg == nil {
		return nil, errors.New("crshard: Ring.NewCache: rest config is nil")
	}
	if err := refuseCacheOptions(opts); err != nil {
		return nil, err
	}
	ringCfg := shard.Config{Partitions: r.opts.Partitions, Load: r.opts.Load}.WithDefaults()
	key, err := shard.PartitionLabelKey(r.opts.Ring, ringCfg)
	if err != nil {
		return nil, fmt.Errorf("crshard: Ring.NewCache: %w", err)
	}
	kopts := kcache.Options{
		Scheme: opts.Scheme,
		Mapper: opts.Mapper,
		Sharding: &kcache.Sharding{
			Full:   fullKinds(r.opts.FullCacheKinds),
			Logger: r.log.WithName("cache"),
			Labels: &kcache.LabelSharding{Key: key, Partitioner: shard.NewPartitioner(ringCfg.Partitions), WriteConfig: r.labelConfig(), QPS: r.opts.LabelQPS, CheckInterval: r.opts.CacheCheckInterval},
		},
	}
	if opts.SyncPeriod != nil {
		kopts.ResyncPeriod = *opts.SyncPeriod
	}
	for ns := range opts.DefaultNamespaces {
		kopts.Namespace = ns // refuseCacheOptions allows one
	}
	kc, err := kcache.New(cfg, kopts)
	if err != nil {
		return nil, fmt.Errorf("crshard: Ring.NewCache: %w", err)
	}
	sc := &shardedCache{kc: kc, scheme: kc.Scheme(), counts: cachemetrics.New(kc), status: r.slot.status, fields: map[schema.GroupVersionKind]map[string]toolscache.IndexFunc{}}
	if err := r.slot.attach(sc); err != nil {
		return nil, err
	}
	if err := r.opts.Registerer.Register(sc.counts); err != nil {
		return nil, fmt.Errorf("crshard: Ring.NewCache: registering the cache's metrics: %w", err)
	}
	return sc, nil
}

// labelConfig is the rest config of the sharded cache's label patches: the
// ring's own (New's cfg before the fencing transport: a label is a pure
// function of the object's key, so a late one is harmless, and a replica
// whose lease validity passed must still label), without the client-side
// rate limit, since the patches bound their own rate (LabelQPS).
func (r *Ring) labelConfig() *rest.Config {
	cfg := rest.CopyConfig(r.own)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

func fullKinds(objs []client.Object) []kcache.Object {
	out := make([]kcache.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// refuseCacheOptions names every field of opts the sharded cache cannot
// honour. Scheme, Mapper and HTTPClient are what the manager sets (the
// cache builds its own HTTP client from the same config); SyncPeriod is
// the resync of the kinds cached whole (a sharded kind's handlers get
// events only); one namespace in DefaultNamespaces restricts
// every namespaced kind to it.
func refuseCacheOptions(opts crcache.Options) error {
	var errs []error
	refuse := func(field, why string) {
		errs = append(errs, fmt.Errorf("cache.Options.%s is not supported by the ring's sharded cache: %s", field, why))
	}
	if len(opts.DefaultNamespaces) > 1 {
		refuse("DefaultNamespaces", "it watches all namespaces or one; give one namespace, or none")
	}
	for ns, c := range opts.DefaultNamespaces {
		if ns == crcache.AllNamespaces {
			refuse("DefaultNamespaces", "name the namespace, or leave DefaultNamespaces empty for all")
		}
		if c.LabelSelector != nil || c.FieldSelector != nil || c.Transform != nil || c.UnsafeDisableDeepCopy != nil || c.EnableWatchBookmarks != nil {
			refuse("DefaultNamespaces[\""+ns+"\"]", "per-namespace selectors, transforms and copy settings cannot be combined with the partition label's selectors; leave the Config empty")
		}
	}
	if opts.DefaultLabelSelector != nil && !opts.DefaultLabelSelector.Empty() {
		refuse("DefaultLabelSelector", "the sharded cache lists by the ring's partition label; select in List instead (client.MatchingLabels)")
	}
	if opts.DefaultFieldSelector != nil && !opts.DefaultFieldSelector.Empty() {
		refuse("DefaultFieldSelector", "the sharded cache lists by the ring's partition label; filter in List (an IndexField and client.MatchingFields) instead")
	}
	if opts.DefaultTransform != nil {
		refuse("DefaultTransform", "it applies its own transform (managed fields are dropped)")
	}
	if opts.DefaultWatchErrorHandler != nil {
		refuse("DefaultWatchErrorHandler", "its watches retry by themselves and report through the ring's readiness")
	}
	if opts.DefaultUnsafeDisableDeepCopy != nil && *opts.DefaultUnsafeDisableDeepCopy {
		refuse("DefaultUnsafeDisableDeepCopy", "reads merge several views and always return copies")
	}
	if opts.DefaultEnableWatchBookmarks != nil && !*opts.DefaultEnableWatchBookmarks {
		refuse("DefaultEnableWatchBookmarks", "its watches always ask for bookmarks")
	}
	if len(opts.ByObject) > 0 {
		refuse("ByObject", "per-kind settings are not supported; list kinds to cache whole in crshard Options.FullCacheKinds")
	}
	if opts.ReaderFailOnMissingInformer {
		refuse("ReaderFailOnMissingInformer", "reads create the kind's informer on first use")
	}
	if opts.NewInformer != nil {
		refuse("NewInformer", "a kind cached by partition is several informers the cache builds itself")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crshard: Ring.NewCache: %w", err)
	}
	return nil
}

// shardedCache is controller-runtime's cache.Cache over kshard's
// label-sharded cache.
type shardedCache struct {
	kc     *kcache.Cache
	scheme *runtime.Scheme
	// counts exports the kshard_cache_* metrics and counts the objects.
	counts *cachemetrics.Collector
	// status publishes the cache's mode and object count in the
	// replica's Lease, for kshard status (the Lease member's SetCacheStatus).
	status  func(mode string, objects int)
	started atomic.Bool
	stopped atomic.Bool

	mu sync.Mutex // guards fields
	// fields holds the index functions of IndexField by kind and field,
	// for List with several field requirements.
	fields map[schema.GroupVersionKind]map[string]toolscache.IndexFunc
}

var _ crcache.Cache = (*shardedCache)(nil)

// Get reads obj from the cache. An object of a partition this replica does
// not hold fails with an error wrapping kcache.ErrPartitionNotHeld, never
// NotFound.
func (c *shardedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if err := c.kc.Get(ctx, key, obj); err != nil {
		return err
	}
	c.setKind(obj)
	return nil
}

// setKind sets obj's TypeMeta from the scheme, as controller-runtime's
// cache does; metadata-only and unstructured objects carry theirs.
func (c *shardedCache) setKind(obj runtime.Object) {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata, *unstructured.Unstructured:
		return
	}
	if gvk, err := apiutil.GVKForObject(obj, c.scheme); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
}

// List lists the cached objects of the partitions this replica holds (of
// every object for a kind cached whole), in opts' namespace, matching its
// label selector and its field selector (exact matches on fields indexed
// with IndexField, as controller-runtime's cache requires), at most Limit.
func (c *shardedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		return errors.New("crshard: List: the continue option is not supported by the cache; list without Limit, or from the API server")
	}
	var filter []fields.Requirement
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
		reqs := lo.FieldSelector.Requirements()
		for _, r := range reqs {
			if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
				return fmt.Errorf("crshard: List: field selector %q: only exact matches (field=value) on fields indexed with IndexField are supported by the cache", lo.FieldSelector)
			}
		}
		first := reqs[0]
		if err := c.kc.ListByIndex(ctx, list, fieldIndexName(first.Field), namespacedKey(lo.Namespace, first.Value)); err != nil {
			return err
		}
		filter = reqs[1:]
	} else if err := c.kc.List(ctx, list, lo.Namespace); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("crshard: List: %w", err)
	}
	gvk, gvkErr := c.itemKind(list)
	var index map[string]toolscache.IndexFunc
	if len(filter) > 0 {
		if gvkErr != nil {
			return fmt.Errorf("crshard: List: %w", gvkErr)
		}
		c.mu.Lock()
		index = c.fields[gvk]
		c.mu.Unlock()
	}
	kept := items[:0]
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return fmt.Errorf("crshard: List: %w", err)
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		ok, err := matchFields(index, filter, lo.Namespace, item)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if lo.Limit > 0 && int64(len(kept)) >= lo.Limit {
			break
		}
		if gvkErr == nil {
			item.GetObjectKind().SetGroupVersionKind(gvk)
		}
		kept = append(kept, item)
	}
	if err := meta.SetList(list, kept); err != nil {
		return fmt.Errorf("crshard: List: %w", err)
	}
	return nil
}

// itemKind is the kind of list's items (metadata-only lists keep theirs).
func (c *shardedCache) itemKind(list client.ObjectList) (schema.GroupVersionKind, error) {
	if pl, ok := list.(*metav1.PartialObjectMetadataList); ok {
		gvk := pl.GroupVersionKind()
		gvk.Kind = trimList(gvk.Kind)
		return gvk, nil
	}
	gvk, err := apiutil.GVKForObject(list, c.scheme)
	if err != nil {
		return gvk, err
	}
	gvk.Kind = trimList(gvk.Kind)
	return gvk, nil
}

func trimList(kind string) string {
	if len(kind) > 4 && kind[len(kind)-4:] == "List" {
		return kind[:len(kind)-4]
	}
	return kind
}

// matchFields reports whether obj has every required field value, by the
// fields' index functions.
func matchFields(index map[string]toolscache.IndexFunc, reqs []fields.Requirement, namespace string, obj runtime.Object) (bool, error) {
	for _, r := range reqs {
		f := index[r.Field]
		if f == nil {
			return false, fmt.Errorf("crshard: List: no index for field %q: call IndexField for it before listing by it", r.Field)
		}
		vals, err := f(obj)
		if err != nil {
			return false, fmt.Errorf("crshard: List: indexing field %q: %w", r.Field, err)
		}
		if !slices.Contains(vals, namespacedKey(namespace, r.Value)) {
			return false, nil
		}
	}
	return true, nil
}

// IndexField adds a field index to obj's kind, on every view of a kind
// cached by partition. Call it before the kind is first read or watched
// (in main or SetupWithManager, as controller-runtime's documentation
// asks): a partitioned kind gets its indexes when its informer is created.
func (c *shardedCache) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if extract == nil {
		return fmt.Errorf("crshard: IndexField %q: the extract function is nil", field)
	}
	f := fieldIndexFunc(extract)
	if err := c.kc.AddIndexers(obj, toolscache.Indexers{fieldIndexName(field): f}); err != nil {
		return fmt.Errorf("crshard: IndexField %q: %w", field, err)
	}
	gvk, err := c.objectKind(obj)
	if err != nil {
		return fmt.Errorf("crshard: IndexField %q: %w", field, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fields[gvk] == nil {
		c.fields[gvk] = map[string]toolscache.IndexFunc{}
	}
	c.fields[gvk][field] = f
	return nil
}

func (c *shardedCache) objectKind(obj runtime.Object) (schema.GroupVersionKind, error) {
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return pm.GroupVersionKind(), nil
	}
	return apiutil.GVKForObject(obj, c.scheme)
}

// fieldIndexName and namespacedKey name field indexes and their values as
// controller-runtime's cache does: each value is indexed under its
// namespace and under all namespaces, so one index serves both lists.
func fieldIndexName(field string) string { return "field:" + field }

const allNamespacesKey = "__all_namespaces"

func namespacedKey(namespace, value string) string {
	if namespace == "" {
		namespace = allNamespacesKey
	}
	return namespace + "/" + value
}

func fieldIndexFunc(extract client.IndexerFunc) toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		obj, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not a client.Object", raw)
		}
		values := extract(obj)
		ns := obj.GetNamespace()
		out := make([]string, 0, 2*len(values))
		for _, v := range values {
			out = append(out, namespacedKey(ns, v))
			if ns != "" {
				out = append(out, namespacedKey("", v))
			}
		}
		return out, nil
	}
}

// GetInformer returns the informer of obj's kind, creating it on first use.
// The informer of a kind cached by partition hands its handlers the merged
// view of its label segments and its unlabelled view: an object moving
// between them is one object, and one that left them is reported deleted
// only once the API server confirmed it gone.
func (c *shardedCache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	inf, err := c.kc.Informer(ctx, obj)
	if err != nil {
		return nil, err
	}
	var o crcache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	if sii, ok := inf.(toolscache.SharedIndexInformer); ok && c.started.Load() && (o.BlockUntilSynced == nil || *o.BlockUntilSynced) {
		if !toolscache.WaitForCacheSync(ctx.Done(), sii.HasSynced) {
			return nil, fmt.Errorf("crshard: GetInformer(%T): waiting for the informer to sync: %w", obj, ctx.Err())
		}
	}
	return &informer{inf: inf, obj: obj, cache: c}, nil
}

// GetInformerForKind is GetInformer for the scheme's type of gvk, or for
// unstructured objects of a kind the scheme does not know.
func (c *shardedCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	if !c.scheme.Recognizes(gvk) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return c.GetInformer(ctx, u, opts...)
	}
	o, err := c.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("crshard: GetInformerForKind(%s): %w", gvk, err)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("crshard: GetInformerForKind(%s): %T is not a client.Object", gvk, o)
	}
	return c.GetInformer(ctx, obj, opts...)
}

// RemoveInformer is refused: a kind's informer lives as long as the cache.
func (c *shardedCache) RemoveInformer(_ context.Context, obj client.Object) error {
	return fmt.Errorf("crshard: RemoveInformer(%T) is not supported by the ring's sharded cache: its informers live as long as the cache", obj)
}

// Start runs the cache until ctx ends, publishing its object count.
func (c *shardedCache) Start(ctx context.Context) error {
	c.started.Store(true)
	defer c.stopped.Store(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	if c.status != nil {
		wg.Go(func() { c.publishStatus(ctx) })
	}
	return c.kc.Start(ctx)
}

func (c *shardedCache) publishStatus(ctx context.Context) {
	c.counts.PublishTotal(ctx, func(objects int) {
		c.status(string(CacheLabels), objects)
	})
}

// WaitForCacheSync waits for the kinds cached whole; a kind cached by
// partition syncs per partition, and the ring activates a partition only
// once every such kind has listed it.
func (c *shardedCache) WaitForCacheSync(ctx context.Context) bool { return c.kc.WaitForCacheSync(ctx) }

// Modes reports how each kind is cached, and why (kcache.KindMode).
func (c *shardedCache) Modes() []kcache.KindMode { return c.kc.ModeReport() }

// informer is controller-runtime's cache.Informer over one kind of the
// sharded cache: a client-go informer for a kind cached whole, kshard's
// partitioned informer otherwise (no resync: its handlers get events only).
type informer struct {
	inf   kcache.Informer
	obj   client.Object
	cache *shardedCache
}

func (i *informer) shared() (toolscache.SharedIndexInformer, bool) {
	sii, ok := i.inf.(toolscache.SharedIndexInformer)
	return sii, ok
}

func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.inf.AddEventHandler(h)
}

func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	if sii, ok := i.shared(); ok {
		return sii.AddEventHandlerWithResyncPeriod(h, resync)
	}
	return i.inf.AddEventHandler(h)
}

func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if sii, ok := i.shared(); ok {
		return sii.AddEventHandlerWithOptions(h, opts)
	}
	return i.inf.AddEventHandler(h)
}

func (i *informer) RemoveEventHandler(r toolscache.ResourceEventHandlerRegistration) error {
	return i.inf.RemoveEventHandler(r)
}

func (i *informer) AddIndexers(indexers toolscache.Indexers) error {
	return i.cache.kc.AddIndexers(i.obj, indexers)
}

// HasSynced: a kind cached by partition counts as synced; its partitions
// sync one by one, and the ring waits for them before it activates any.
func (i *informer) HasSynced() bool {
	if sii, ok := i.shared(); ok {
		return sii.HasSynced()
	}
	return true
}

func (i *informer) HasSyncedChecker() toolscache.DoneChecker {
	if sii, ok := i.shared(); ok {
		return sii.HasSyncedChecker()
	}
	return syncedPerPartition{}
}

func (i *informer) IsStopped() bool {
	if sii, ok := i.shared(); ok {
		return sii.IsStopped()
	}
	return i.cache.stopped.Load()
}

// syncedPerPartition is the DoneChecker of a partitioned informer: done.
type syncedPerPartition struct{}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (syncedPerPartition) Name() string          { return "kshard sharded cache (synced per partition)" }
func (syncedPerPartition) Done() <-chan struct{} { return closed }

// cacheSlot is the coordinator's PartitionCache: the sharded cache, which
// controller-runtime builds after the ring (manager.Options.NewCache).
type cacheSlot struct {
	partitions int
	status     func(mode string, objects int)
	mu         sync.Mutex
	sc         *shardedCache
}

func (s *cacheSlot) attach(sc *shardedCache) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sc != nil {
		return errors.New("crshard: Ring.NewCache was called twice; one ring serves one manager's cache")
	}
	s.sc = sc
	return nil
}

func (s *cacheSlot) get() *shardedCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc
}

// never is the Changed channel before the cache exists (the ring refuses
// to start without it, so the coordinator never waits on it).
var never = make(chan struct{})

func (s *cacheSlot) Hold(set shard.PartitionSet) {
	if sc := s.get(); sc != nil {
		sc.kc.Hold(set)
	}
}

func (s *cacheSlot) SetActive(set shard.PartitionSet) {
	if sc := s.get(); sc != nil {
		sc.kc.SetActive(set)
	}
}

func (s *cacheSlot) SyncedPartitions() shard.PartitionSet {
	if sc := s.get(); sc != nil {
		return sc.kc.SyncedPartitions()
	}
	return shard.NewPartitionSet(s.partitions)
}

func (s *cacheSlot) Changed() <-chan struct{} {
	if sc := s.get(); sc != nil {
		return sc.kc.Changed()
	}
	return never
}

// checkCache fails when the ring runs CacheMode labels but mgr's cache is
// not the one Ring.NewCache built.
func (r *Ring) checkCache(mgr interface{ GetCache() crcache.Cache }) error {
	if r.slot == nil {
		return nil
	}
	sc := r.slot.get()
	if sc == nil || mgr.GetCache() != crcache.Cache(sc) {
		return fmt.Errorf("crshard: Options.CacheMode is %q but the manager's cache is not the ring's: build the manager with ctrl.Options{NewCache: ring.NewCache}", CacheLabels)
	}
	return nil
}
