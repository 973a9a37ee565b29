package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/cache/labelled"
	"github.com/kshard/kshard/shard"
)

// Object is a Kubernetes object: metadata plus a runtime type. It is an alias
// of an interface literal so that packages declaring the same alias (package
// controller does) share one identical type, and their interfaces match.
type Object = interface {
	metav1.Object
	runtime.Object
}

// Options configure a Cache. The zero value is usable.
type Options struct {
	// Scheme maps Go types to GroupVersionKinds and decodes API responses
	// into them. Register custom resource types here to cache them.
	// Defaults to client-go's kubernetes scheme (built-in types only).
	Scheme *runtime.Scheme

	// Mapper maps kinds to resources and tells namespaced from
	// cluster-scoped ones. Defaults to a discovery-based mapper that
	// refreshes discovery when a kind is not found, so resources installed
	// after start (a new CRD) are found on their first use.
	Mapper meta.RESTMapper

	// Namespace restricts namespaced informers to one namespace.
	// Defaults to "" (all namespaces). Cluster-scoped kinds ignore it.
	Namespace string

	// ResyncPeriod is the informers' resync period.
	// Defaults to 0 (no resync).
	ResyncPeriod time.Duration

	// Sharding, when set, caches each namespaced typed kind by partition:
	// only the objects of the partitions given to Hold, listed and
	// watched with the API server's shard selector where it filters
	// (ModeSharded) and filtered on the client where it does not
	// (ModeFallback). Default nil: every kind cached whole.
	Sharding *Sharding

	// Clock times the retries while the API server is unreachable and the
	// sharded kinds' backoffs, self-checks and confirmations. Defaults to
	// the real clock; tests pass a fake one (k8s.io/utils/clock/testing).
	Clock clock.WithTicker
}

// Cache holds one shared informer per GroupVersionKind (and one per
// metadata-only kind). Create it with New, run it with Start.
type Cache struct {
	config     *rest.Config
	httpClient *http.Client
	// labelHTTP carries label patches and the reviews of the permission
	// to write them (LabelSharding.WriteConfig): one transport for every
	// kind, built once.
	labelHTTP *http.Client
	scheme    *runtime.Scheme
	codecs    serializer.CodecFactory
	mapper    meta.RESTMapper
	namespace string
	resync    time.Duration
	clock     clock.WithTicker
	sharding  *Sharding
	fullKinds []schema.GroupVersionKind // Sharding.Full, resolved
	shared    shard.PartitionSet        // partitions of Sharding.SharedNamespaces, always held
	// partitions is the ring's partition count (0 without Sharding): the
	// size of every set the cache holds, from New on.
	partitions int

	// mu guards the fields below. It is never held across network I/O:
	// mappings and clients are resolved before it is taken.
	mu          sync.Mutex
	informers   map[informerKey]*entry
	restClients map[restClientKey]*rest.RESTClient
	metadata    metadata.Interface
	runCtx      context.Context    // set by Start; informers created later run on it
	stopped     bool               // set when Start's context ends; no informer may start after
	running     sync.WaitGroup     // one per running informer; Start waits for all
	held        shard.PartitionSet // Hold's last set, for sharded kinds created later
	active      shard.PartitionSet // SetActive's last set, for labelled kinds created later
	routes      map[informerKey][]shard.Route
	indexers    map[informerKey]toolscache.Indexers // AddIndexers', given to informers as they are created
	changed     chan struct{}                       // closed and replaced when SyncedPartitions may change
}

type informerKey struct {
	gvk          schema.GroupVersionKind
	metadataOnly bool
	unstructured bool // *unstructured.Unstructured objects
}

// entry is one kind's informer: a SharedIndexInformer when the kind is
// cached whole, a partitioned informer (Segmented, Labelled) when it is
// sharded.
type entry struct {
	informer toolscache.SharedIndexInformer // nil when part is set
	part     partitionedInformer
	mapping  *meta.RESTMapping
	mode     KindMode
	route    shard.Route // the route its partitions are told by (labels mode)
	// reprobed is the mode a probe at the kind's first object chose
	// (reprobeFor); nil until then. mode stays the first decision.
	reprobed atomic.Pointer[KindMode]
}

// partitionedInformer is the informer of a sharded kind: it holds the
// objects of the partitions it is told to hold.
type partitionedInformer interface {
	Informer
	Run(ctx context.Context)
	Hold(set shard.PartitionSet)
	Held() shard.PartitionSet
	SyncedPartitions() shard.PartitionSet
	Changed() <-chan struct{}
	List() []any
	ByIndex(name, value string) ([]any, error)
	GetByKey(key string) (any, bool, error)
	ObjectsListed() int64
	CountPartitions(counts []int)
	// Describe says what informers it runs, for KindMode.Informers.
	Describe() string
}

// asInformer is e's informer as sources use it.
func (e *entry) asInformer() Informer {
	if e.part != nil {
		return e.part
	}
	return e.informer
}

// New returns a Cache reading through cfg. It contacts nothing until an
// informer is requested, except to build the default RESTMapper lazily.
func New(cfg *rest.Config, opts Options) (*Cache, error) {
	if cfg == nil {
		return nil, errors.New("cache: rest.Config is nil; pass the cluster's client configuration")
	}
	opts = opts.withDefaults()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: building an HTTP client from the rest.Config: %w", err)
	}
	mapper := opts.Mapper
	if mapper == nil {
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("cache: building a discovery client for the default RESTMapper: %w", err)
		}
		mapper = newRefreshingMapper(dc)
	}
	labelHTTP := httpClient
	if sh := opts.Sharding; sh != nil && sh.Labels != nil && sh.Labels.WriteConfig != nil {
		if labelHTTP, err = rest.HTTPClientFor(sh.Labels.WriteConfig); err != nil {
			return nil, fmt.Errorf("cache: building an HTTP client from Options.Sharding.Labels.WriteConfig: %w", err)
		}
	}
	var fullKinds []schema.GroupVersionKind
	// Without Sharding no kind is partitioned and the sets stay empty.
	held := shard.NewPartitionSet(0)
	shared := held
	if sh := opts.Sharding; sh != nil {
		if ls := sh.Labels; ls != nil {
			if ls.Key == "" || ls.Partitioner == nil || ls.Partitioner.Count() < 1 {
				return nil, errors.New("cache: Options.Sharding.Labels needs Key (shard.PartitionLabelKey) and Partitioner (the ring's)")
			}
			if sh.Partitioner.Count() > 0 && sh.Partitioner.Count() != ls.Partitioner.Count() {
				return nil, fmt.Errorf("cache: Options.Sharding.Partitioner has %d partitions and Labels.Partitioner %d; both are the ring's", sh.Partitioner.Count(), ls.Partitioner.Count())
			}
		} else if sh.Partitioner.Count() == 0 || !sh.Partitioner.Scheme().Ranged() {
			return nil, errors.New("cache: Options.Sharding.Partitioner is not set; use the ring's RangePartitioner (shard.SchemeNamespace or shard.SchemeUID), or set Sharding.Labels")
		}
		for _, obj := range sh.Full {
			gvk, err := kindFromScheme(opts.Scheme, obj)
			if err != nil {
				return nil, fmt.Errorf("cache: Options.Sharding.Full: %w", err)
			}
			fullKinds = append(fullKinds, gvk)
		}
		if sh.Logger.GetSink() == nil {
			cp := *sh
			cp.Logger = logr.Discard()
			opts.Sharding = &cp
		}
		// Every set is built at the ring's partition count from here on: a
		// kind created before the ring's first Hold gets an empty set of
		// that count, so what its first LIST drops is recorded against the
		// partitions a later Hold gains, and they are listed again. A set
		// of another count here once left such a kind synced and empty.
		if shared, err = sh.sharedPartitions(); err != nil {
			return nil, err
		}
		held = shared.Clone()
	}
	return &Cache{
		sharding:    opts.Sharding,
		partitions:  held.Size(),
		fullKinds:   fullKinds,
		shared:      shared,
		held:        held,
		active:      shard.NewPartitionSet(held.Size()),
		routes:      map[informerKey][]shard.Route{},
		indexers:    map[informerKey]toolscache.Indexers{},
		changed:     make(chan struct{}),
		config:      rest.CopyConfig(cfg),
		httpClient:  httpClient,
		labelHTTP:   labelHTTP,
		scheme:      opts.Scheme,
		codecs:      serializer.NewCodecFactory(opts.Scheme),
		mapper:      mapper,
		namespace:   opts.Namespace,
		resync:      opts.ResyncPeriod,
		clock:       opts.Clock,
		informers:   map[informerKey]*entry{},
		restClients: map[restClientKey]*rest.RESTClient{},
	}, nil
}

// withDefaults is the one place Options defaults are applied.
func (o Options) withDefaults() Options {
	if o.Scheme == nil {
		o.Scheme = clientgoscheme.Scheme
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Informer returns the shared informer for obj's kind, creating it on first
// use. obj's kind comes from the scheme; a *metav1.PartialObjectMetadata with
// TypeMeta set asks for a metadata-only informer of that kind. Informers
// created after Start are started at once. ctx bounds discovery calls.
func (c *Cache) Informer(ctx context.Context, obj Object) (Informer, error) {
	key, err := c.keyOf(obj)
	if err != nil {
		return nil, err
	}
	e, err := c.informerFor(ctx, key)
	if err != nil {
		return nil, err
	}
	return e.asInformer(), nil
}

// Start runs every informer, present and future, until ctx ends, then stops
// them and waits for them to return. It may be called once.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.runCtx != nil {
		c.mu.Unlock()
		return errors.New("cache: Start called twice; a Cache is started once by its owner")
	}
	c.runCtx = ctx
	for _, e := range c.informers {
		c.runLocked(e)
	}
	c.mu.Unlock()

	<-ctx.Done()

	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.running.Wait()
	return nil
}

// runLocked starts e's informer on the Start context. Callers hold c.mu and
// have checked c.stopped, so no Add races Start's final Wait.
func (c *Cache) runLocked(e *entry) {
	ctx := c.runCtx
	if e.part != nil {
		c.running.Go(func() { e.part.Run(ctx) })
		c.running.Go(func() { c.forward(ctx, e.part) })
		return
	}
	c.running.Go(func() { e.informer.RunWithContext(ctx) })
}

// WaitForCacheSync waits until every informer created so far has synced,
// returning false if ctx ends first. Sharded kinds sync per partition
// (SyncedPartitions) and are not waited for here.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	c.mu.Lock()
	infs := make([]toolscache.SharedIndexInformer, 0, len(c.informers))
	for _, e := range c.informers {
		if e.informer != nil {
			infs = append(infs, e.informer)
		}
	}
	c.mu.Unlock()
	for _, inf := range infs {
		if !waitSynced(ctx, inf) {
			return false
		}
	}
	return true
}

func waitSynced(ctx context.Context, inf toolscache.SharedIndexInformer) bool {
	select {
	case <-inf.HasSyncedChecker().Done():
		return true
	case <-ctx.Done():
		return inf.HasSynced()
	}
}

// keyOf resolves obj to the kind and flavour (typed or metadata-only) of
// informer that serves it.
func (c *Cache) keyOf(obj runtime.Object) (informerKey, error) {
	if obj == nil {
		return informerKey{}, errors.New("cache: object is nil; pass a pointer to a typed object such as &corev1.ConfigMap{}")
	}
	if key, ok, err := unstructuredKey(obj); ok {
		return key, err
	}
	if pom, ok := obj.(*metav1.PartialObjectMetadata); ok {
		gvk := pom.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return informerKey{}, errors.New("cache: *metav1.PartialObjectMetadata has no TypeMeta; set APIVersion and Kind to say which kind to cache metadata of")
		}
		return informerKey{gvk: gvk, metadataOnly: true}, nil
	}
	gvk, err := kindFromScheme(c.scheme, obj)
	if err != nil {
		return informerKey{}, err
	}
	return informerKey{gvk: gvk}, nil
}

func kindFromScheme(scheme *runtime.Scheme, obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, unversioned, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("cache: type %T is not registered in the scheme; add it to the scheme given in cache.Options.Scheme (e.g. with its API package's AddToScheme): %w", obj, err)
	}
	if unversioned || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("cache: type %T is registered as unversioned; only versioned API kinds can be cached", obj)
	}
	return gvks[0], nil
}

// informerFor returns the entry for key, creating (and, after Start,
// starting) its informer on first use.
func (c *Cache) informerFor(ctx context.Context, key informerKey) (*entry, error) {
	c.mu.Lock()
	e, ok := c.informers[key]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cache: creating the informer for %s: %w", key.gvk, err)
	}

	mapping, err := c.mapper.RESTMapping(key.gvk.GroupKind(), key.gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("cache: the API server does not serve %s; install its CustomResourceDefinition or fix the object's group/version: %w", key.gvk, err)
		}
		return nil, fmt.Errorf("cache: mapping %s to an API resource: %w", key.gvk, err)
	}
	e = &entry{mapping: mapping}
	e.mode, e.route = c.shardingFor(ctx, key, mapping)
	indexers := c.indexersFor(key)
	switch {
	case e.mode.Mode == ModeLabels:
		e.part, err = c.newLabelled(key, mapping, e.route, indexers)
	case e.mode.Mode != ModeFull:
		e.part, err = c.newSegmented(key.gvk, mapping, e.mode, indexers)
	case key.metadataOnly:
		e.informer, err = c.newMetadataInformer(key.gvk, mapping, indexers)
	case key.unstructured:
		e.informer, err = c.newUnstructuredInformer(key.gvk, mapping, indexers)
	default:
		e.informer, err = c.newTypedInformer(key.gvk, mapping, indexers)
	}
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, fmt.Errorf("cache: cannot create the informer for %s: the cache has stopped", key.gvk)
	}
	if existing, ok := c.informers[key]; ok {
		// Another caller created it meanwhile; ours was never started.
		return existing, nil
	}
	if err := c.addMissingIndexersLocked(key, e, indexers); err != nil {
		return nil, err
	}
	c.informers[key] = e
	if c.sharding != nil {
		c.sharding.Logger.Info("caching a kind", "kind", key.gvk.String(), "mode", e.mode.Mode, "reason", e.mode.Reason)
	}
	if e.part != nil {
		e.part.Hold(c.held)
		if lab, ok := e.part.(*labelled.Labelled); ok {
			lab.SetActive(c.active)
		}
		c.signalLocked() // a kind that has synced nothing yet narrows SyncedPartitions
	}
	if c.runCtx != nil {
		c.runLocked(e)
	}
	return e, nil
}

func (c *Cache) informerOptions(gvk schema.GroupVersionKind, indexers toolscache.Indexers) toolscache.SharedIndexInformerOptions {
	all := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	maps.Copy(all, indexers)
	return toolscache.SharedIndexInformerOptions{
		ResyncPeriod:      c.resync,
		Indexers:          all,
		ObjectDescription: gvk.String(),
	}
}

// namespaceFor is the namespace list/watch calls are scoped to.
func (c *Cache) namespaceFor(mapping *meta.RESTMapping) (string, bool) {
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	return c.namespace, namespaced && c.namespace != ""
}

// Scheme returns the scheme the cache decodes with.
func (c *Cache) Scheme() *runtime.Scheme { return c.scheme }

// RESTMapper returns the mapper the cache resolves kinds with (the
// discovery-based default unless Options.Mapper was set).
func (c *Cache) RESTMapper() meta.RESTMapper { return c.mapper }
