package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Get reads the object named key from the informer of obj's kind (creating
// and waiting for it if needed) and deep-copies it into obj. A missing
// object yields an apierrors NotFound error.
func (c *Cache) Get(ctx context.Context, key types.NamespacedName, obj Object) error {
	ikey, err := c.keyOf(obj)
	if err != nil {
		return err
	}
	e, err := c.syncedInformer(ctx, ikey)
	if err != nil {
		return err
	}
	storeKey := key.Name
	if key.Namespace != "" && e.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		storeKey = key.Namespace + "/" + key.Name
	}
	var item any
	var exists bool
	if e.part != nil {
		item, exists, err = c.getSharded(ctx, e, storeKey, key.Namespace, key.Name)
		if errors.Is(err, ErrPartitionNotHeld) {
			return err
		}
	} else {
		item, exists, err = e.informer.GetStore().GetByKey(storeKey)
	}
	if err != nil {
		return fmt.Errorf("cache: reading %s %s: %w", ikey.gvk.Kind, storeKey, err)
	}
	if !exists {
		return apierrors.NewNotFound(e.mapping.Resource.GroupResource(), key.Name)
	}
	stored, ok := item.(runtime.Object)
	if !ok {
		return fmt.Errorf("cache: the %s informer holds a %T, not a runtime.Object", ikey.gvk.Kind, item)
	}
	if err := copyInto(obj, stored.DeepCopyObject()); err != nil {
		return err
	}
	if ikey.metadataOnly {
		obj.GetObjectKind().SetGroupVersionKind(ikey.gvk)
	}
	return nil
}

// List fills list (e.g. *corev1.ConfigMapList, or a
// *metav1.PartialObjectMetadataList whose TypeMeta names the list kind) with
// deep copies of the cached objects, restricted to namespace unless it is "".
func (c *Cache) List(ctx context.Context, list runtime.Object, namespace string) error {
	return c.list(ctx, list, func(ikey informerKey, e *entry) ([]any, error) {
		if e.part != nil {
			return c.listSharded(ctx, e, namespace)
		}
		if namespace != "" && e.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			items, err := e.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
			if err != nil {
				return nil, fmt.Errorf("cache: listing %s in namespace %s: %w", ikey.gvk.Kind, namespace, err)
			}
			return items, nil
		}
		return e.informer.GetStore().List(), nil
	})
}

// ListByIndex fills list, as List does, with the cached objects whose index
// (added with AddIndexers) has value: of the held partitions only, for a
// kind cached by partition.
func (c *Cache) ListByIndex(ctx context.Context, list runtime.Object, index, value string) error {
	return c.list(ctx, list, func(ikey informerKey, e *entry) ([]any, error) {
		var items []any
		var err error
		if e.part != nil {
			items, err = e.part.ByIndex(index, value)
		} else {
			items, err = e.informer.GetIndexer().ByIndex(index, value)
		}
		if err != nil {
			return nil, fmt.Errorf("cache: listing %s by index %s: %w", ikey.gvk.Kind, index, err)
		}
		return items, nil
	})
}

// list fills list with deep copies of the objects items returns from the
// informer of its item kind.
func (c *Cache) list(ctx context.Context, list runtime.Object, items func(informerKey, *entry) ([]any, error)) error {
	ikey, err := c.listKeyOf(list)
	if err != nil {
		return err
	}
	e, err := c.syncedInformer(ctx, ikey)
	if err != nil {
		return err
	}
	found, err := items(ikey, e)
	if err != nil {
		return err
	}
	objs := make([]runtime.Object, 0, len(found))
	for _, item := range found {
		stored, ok := item.(runtime.Object)
		if !ok {
			return fmt.Errorf("cache: the %s informer holds a %T, not a runtime.Object", ikey.gvk.Kind, item)
		}
		cp := stored.DeepCopyObject()
		if ikey.metadataOnly {
			cp.GetObjectKind().SetGroupVersionKind(ikey.gvk)
		}
		objs = append(objs, cp)
	}
	if err := meta.SetList(list, objs); err != nil {
		return fmt.Errorf("cache: filling %T: %w", list, err)
	}
	return nil
}

// listKeyOf resolves a list object to the informer of its item kind.
func (c *Cache) listKeyOf(list runtime.Object) (informerKey, error) {
	if list == nil {
		return informerKey{}, errors.New("cache: list is nil; pass a pointer to a list type such as &corev1.ConfigMapList{}")
	}
	if key, ok, err := unstructuredKey(list); ok {
		return key, err
	}
	if pol, ok := list.(*metav1.PartialObjectMetadataList); ok {
		gvk := pol.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return informerKey{}, errors.New("cache: *metav1.PartialObjectMetadataList has no TypeMeta; set APIVersion and Kind (e.g. Kind \"ConfigMapList\")")
		}
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
		return informerKey{gvk: gvk, metadataOnly: true}, nil
	}
	gvk, err := kindFromScheme(c.scheme, list)
	if err != nil {
		return informerKey{}, err
	}
	if !strings.HasSuffix(gvk.Kind, "List") || !meta.IsListType(list) {
		return informerKey{}, fmt.Errorf("cache: %T (kind %s) is not a list type; pass the kind's List type", list, gvk.Kind)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return informerKey{gvk: gvk}, nil
}

// syncedInformer returns the informer for key once it has synced. It refuses
// to wait on a cache that was never started, which would block forever.
func (c *Cache) syncedInformer(ctx context.Context, key informerKey) (*entry, error) {
	c.mu.Lock()
	started := c.runCtx != nil
	c.mu.Unlock()
	if !started {
		return nil, errors.New("cache: not started; call Start before reading from the cache")
	}
	e, err := c.informerFor(ctx, key)
	if err != nil {
		return nil, err
	}
	if e.informer != nil && !waitSynced(ctx, e.informer) {
		return nil, fmt.Errorf("cache: waiting for the %s informer to sync: %w", key.gvk, ctx.Err())
	}
	return e, nil
}

// copyInto sets *dst to *src; both must be pointers to the same struct type.
func copyInto(dst Object, src runtime.Object) error {
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("cache: %T is not a non-nil pointer; pass a pointer to read into", dst)
	}
	if dv.Type() != sv.Type() {
		return fmt.Errorf("cache: cannot read a cached %T into a %T", src, dst)
	}
	dv.Elem().Set(sv.Elem())
	return nil
}
