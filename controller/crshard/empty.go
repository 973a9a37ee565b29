package crshard

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// objectFunc returns a function building an empty object of obj's kind, in
// the Go type the cache serves it in, to read one from the cache; or an
// error naming what is missing from the scheme.
func objectFunc(obj client.Object, scheme *runtime.Scheme, metadataOnly bool) (func() client.Object, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	return emptyOf(scheme, gvk, cacheShapeOf(obj, metadataOnly),
		func() client.Object { return &metav1.PartialObjectMetadata{} },
		func() client.Object { return &unstructured.Unstructured{} })
}

// listFunc is objectFunc for a list of obj's kind, to list the cache.
func listFunc(obj client.Object, scheme *runtime.Scheme, metadataOnly bool) (func() client.ObjectList, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fmt.Errorf("crshard: the For type %T: %w", obj, err)
	}
	return emptyOf(scheme, gvk.GroupVersion().WithKind(gvk.Kind+"List"), cacheShapeOf(obj, metadataOnly),
		func() client.ObjectList { return &metav1.PartialObjectMetadataList{} },
		func() client.ObjectList { return &unstructured.UnstructuredList{} })
}

// cacheShape is the Go type a kind is cached in.
type cacheShape int

const (
	typedShape        cacheShape = iota // the scheme's type
	metadataShape                       // metav1.PartialObjectMetadata
	unstructuredShape                   // unstructured.Unstructured
)

// cacheShapeOf is the shape the cache serves obj's kind in: metadata only
// when asked (as controller-runtime's builder projects an unstructured
// object too), else obj's own.
func cacheShapeOf(obj client.Object, metadataOnly bool) cacheShape {
	switch obj.(type) {
	case *metav1.PartialObjectMetadata:
		return metadataShape
	case *unstructured.Unstructured:
		if !metadataOnly {
			return unstructuredShape
		}
	}
	if metadataOnly {
		return metadataShape
	}
	return typedShape
}

// emptyOf returns a function building an empty T of gvk in shape.
func emptyOf[T runtime.Object](scheme *runtime.Scheme, gvk schema.GroupVersionKind, shape cacheShape, metadata, unstructured func() T) (func() T, error) {
	stamped := func(empty func() T) func() T {
		return func() T {
			o := empty()
			o.GetObjectKind().SetGroupVersionKind(gvk)
			return o
		}
	}
	switch shape {
	case metadataShape:
		return stamped(metadata), nil
	case unstructuredShape:
		return stamped(unstructured), nil
	}
	o, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("crshard: %s is not in the scheme, needed to replay its cache: %w", gvk, err)
	}
	if _, ok := o.(T); !ok {
		return nil, fmt.Errorf("crshard: the scheme's %s is a %T, which the cache cannot serve", gvk, o)
	}
	return func() T {
		o, _ := scheme.New(gvk)
		t, _ := o.(T)
		return t
	}, nil
}
