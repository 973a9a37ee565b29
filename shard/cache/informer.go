package cache

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	toolscache "k8s.io/client-go/tools/cache"
)

// newTypedInformer builds an informer whose list and watch go through a REST
// client for gvk's GroupVersion, decoding with the cache's scheme. That is
// what lets custom resource types in a user's scheme be cached.
func (c *Cache) newTypedInformer(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, indexers toolscache.Indexers) (toolscache.SharedIndexInformer, error) {
	lw, example, err := c.typedListWatch(gvk, mapping)
	if err != nil {
		return nil, err
	}
	// The REST client supports watch-list (streamed initial list with
	// bookmarks); the reflector uses it when client-go's WatchListClient
	// feature is on, and falls back to list+watch otherwise.
	return toolscache.NewSharedIndexInformerWithOptions(
		toolscache.ToListWatcherWithWatchListSemantics(lw.ListWatch, lw.rc),
		example,
		c.informerOptions(gvk, indexers),
	), nil
}

// typedListWatch is the list and watch of gvk's resource through a REST
// client of the cache's scheme, patient through outages of the API server.
type typedListWatch struct {
	*toolscache.ListWatch
	rc *rest.RESTClient
}

func (c *Cache) typedListWatch(gvk schema.GroupVersionKind, mapping *meta.RESTMapping) (typedListWatch, runtime.Object, error) {
	example, err := c.scheme.New(gvk)
	if err != nil {
		return typedListWatch{}, nil, fmt.Errorf("cache: creating an object of kind %s from the scheme: %w", gvk, err)
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if !c.scheme.Recognizes(listGVK) {
		return typedListWatch{}, nil, fmt.Errorf("cache: the scheme knows %s but not its list type %s; register the List type together with the kind", gvk, listGVK.Kind)
	}
	rc, err := c.restClientFor(gvk.GroupVersion(), speaksProtobuf(example))
	if err != nil {
		return typedListWatch{}, nil, err
	}
	resource := mapping.Resource.Resource
	ns, scoped := c.namespaceFor(mapping)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := c.scheme.New(listGVK)
			if err != nil {
				return nil, err
			}
			err = rc.Get().
				NamespaceIfScoped(ns, scoped).
				Resource(resource).
				SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
				Do(ctx).
				Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return rc.Get().
				NamespaceIfScoped(ns, scoped).
				Resource(resource).
				SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
				Watch(ctx)
		},
	}
	return typedListWatch{patient(c.clock, lw), rc}, example, nil
}

// newMetadataInformer builds an informer holding only object metadata
// (*metav1.PartialObjectMetadata) for gvk's resource.
func (c *Cache) newMetadataInformer(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, indexers toolscache.Indexers) (toolscache.SharedIndexInformer, error) {
	lw, err := c.metadataListWatch(gvk, mapping)
	if err != nil {
		return nil, err
	}
	mc, err := c.metadataClient()
	if err != nil {
		return nil, err
	}
	return toolscache.NewSharedIndexInformerWithOptions(
		toolscache.ToListWatcherWithWatchListSemantics(lw, mc),
		&metav1.PartialObjectMetadata{},
		c.informerOptions(gvk, indexers),
	), nil
}

// metadataResource is mapping's resource as metadata only, in the cache's
// namespace (every namespace when it has none, or the kind is not
// namespaced).
func (c *Cache) metadataResource(mapping *meta.RESTMapping) (metadata.ResourceInterface, error) {
	mc, err := c.metadataClient()
	if err != nil {
		return nil, err
	}
	ns, scoped := c.namespaceFor(mapping)
	if !scoped {
		ns = metav1.NamespaceAll
	}
	return mc.Resource(mapping.Resource).Namespace(ns), nil
}

// metadataListWatch lists and watches gvk's resource as metadata only,
// stamping the kind on every object, patient through outages.
func (c *Cache) metadataListWatch(gvk schema.GroupVersionKind, mapping *meta.RESTMapping) (*toolscache.ListWatch, error) {
	client, err := c.metadataResource(mapping)
	if err != nil {
		return nil, err
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := client.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				list.Items[i].SetGroupVersionKind(gvk)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := client.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			// Stamp the kind on every object so readers (owner handlers,
			// Get) see which kind a metadata-only object is.
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				if pom, ok := ev.Object.(*metav1.PartialObjectMetadata); ok {
					pom.SetGroupVersionKind(gvk)
				}
				return ev, true
			}), nil
		},
	}
	return patient(c.clock, lw), nil
}

// speaksProtobuf reports whether obj's Go type has a protobuf encoding, as
// the built-in API types do and custom resources do not.
func speaksProtobuf(obj runtime.Object) bool {
	_, ok := obj.(interface {
		runtime.ProtobufMarshaller
		Unmarshal([]byte) error
	})
	return ok
}

// restClientKey names a shared REST client: one per GroupVersion and wire
// format.
type restClientKey struct {
	gv       schema.GroupVersion
	protobuf bool
}

// restClientFor returns the (shared) REST client for gv, decoding with the
// cache's scheme and sharing the cache's HTTP client. Built-in kinds are
// listed and watched as protobuf: decoding it costs a fraction of JSON's
// CPU, which every replica pays for every event of its full cache.
func (c *Cache) restClientFor(gv schema.GroupVersion, protobuf bool) (*rest.RESTClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := restClientKey{gv, protobuf}
	if rc, ok := c.restClients[key]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(c.config)
	if protobuf {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = c.codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, c.httpClient)
	if err != nil {
		return nil, fmt.Errorf("cache: building a REST client for %s: %w", gv, err)
	}
	c.restClients[key] = rc
	return rc, nil
}

func (c *Cache) metadataClient() (metadata.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.metadata != nil {
		return c.metadata, nil
	}
	mc, err := metadata.NewForConfigAndClient(c.config, c.httpClient)
	if err != nil {
		return nil, fmt.Errorf("cache: building a metadata client: %w", err)
	}
	c.metadata = mc
	return mc, nil
}

// refreshingMapper is a discovery-backed RESTMapper that re-reads discovery
// when a kind is not found, so kinds served after start are found. The
// client-go deferred mapper alone retries only while its cache is stale.
type refreshingMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper
}

func newRefreshingMapper(dc discovery.DiscoveryInterface) *refreshingMapper {
	return &refreshingMapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (m *refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if err == nil || !meta.IsNoMatchError(err) {
		return mapping, err
	}
	m.Reset()
	return m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
}

func (m *refreshingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mappings, err := m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	if len(mappings) > 0 || (err != nil && !meta.IsNoMatchError(err)) {
		return mappings, err
	}
	m.Reset()
	return m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
}

// checkList is the self-check's LIST of a labelled kind: metadata only,
// whatever the kind's cached type, in the cache's namespace. It is not
// patient (patient): a check that cannot list is skipped, not held up.
func (c *Cache) checkList(mapping *meta.RESTMapping) (func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error), error) {
	client, err := c.metadataResource(mapping)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.List(ctx, o)
	}, nil
}
