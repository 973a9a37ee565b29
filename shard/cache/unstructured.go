package cache

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
)

// unstructuredKey is the informer key of an unstructured object or list,
// whose kind its TypeMeta names; ok is false for other objects.
func unstructuredKey(obj runtime.Object) (key informerKey, ok bool, err error) {
	var gvk schema.GroupVersionKind
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		gvk = o.GroupVersionKind()
	case *unstructured.UnstructuredList:
		gvk = o.GroupVersionKind()
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	default:
		return informerKey{}, false, nil
	}
	if gvk.Kind == "" || gvk.Version == "" {
		return informerKey{}, true, fmt.Errorf("cache: %T has no apiVersion and kind; set them to say which kind to read", obj)
	}
	return informerKey{gvk: gvk, unstructured: true}, true, nil
}

// dynamicResource is the dynamic client of mapping's resource.
func (c *Cache) dynamicResource(mapping *meta.RESTMapping) (dynamic.NamespaceableResourceInterface, error) {
	dc, err := dynamic.NewForConfigAndClient(c.config, c.httpClient)
	if err != nil {
		return nil, fmt.Errorf("cache: building a dynamic client: %w", err)
	}
	return dc.Resource(mapping.Resource), nil
}

// unstructuredListWatch lists and watches mapping's resource as
// unstructured objects, patient through outages.
func (c *Cache) unstructuredListWatch(mapping *meta.RESTMapping) (*toolscache.ListWatch, dynamic.NamespaceableResourceInterface, error) {
	res, err := c.dynamicResource(mapping)
	if err != nil {
		return nil, nil, err
	}
	ns, scoped := c.namespaceFor(mapping)
	if !scoped {
		ns = metav1.NamespaceAll
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return res.Namespace(ns).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Namespace(ns).Watch(ctx, opts)
		},
	}
	return patient(c.clock, lw), res, nil
}

// newUnstructuredInformer builds the informer of a kind cached whole as
// unstructured objects.
func (c *Cache) newUnstructuredInformer(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, indexers toolscache.Indexers) (toolscache.SharedIndexInformer, error) {
	lw, _, err := c.unstructuredListWatch(mapping)
	if err != nil {
		return nil, err
	}
	return toolscache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, c.informerOptions(gvk, indexers)), nil
}

// unstructuredLabelled is what newLabelled needs of an unstructured kind:
// its list and watch, an example, and a live read.
func (c *Cache) unstructuredLabelled(mapping *meta.RESTMapping) (toolscache.ListerWatcherWithContext, runtime.Object, func(ctx context.Context, ns, name string) (runtime.Object, error), error) {
	lw, res, err := c.unstructuredListWatch(mapping)
	if err != nil {
		return nil, nil, nil, err
	}
	get := func(ctx context.Context, ns, name string) (runtime.Object, error) {
		if ns == "" {
			return res.Get(ctx, name, metav1.GetOptions{})
		}
		return res.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	return lw, &unstructured.Unstructured{}, get, nil
}
