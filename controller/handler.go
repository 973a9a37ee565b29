package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// EventHandler maps events to Requests and adds them to q. Handlers must
// not modify event objects: they are shared with the cache.
type EventHandler interface {
	Create(ctx context.Context, e CreateEvent, q Queue)
	Update(ctx context.Context, e UpdateEvent, q Queue)
	Delete(ctx context.Context, e DeleteEvent, q Queue)
	Generic(ctx context.Context, e GenericEvent, q Queue)
}

// EnqueueRequestForObject enqueues the Request of the event's own object
// (the new object of an update). It is what For uses.
type EnqueueRequestForObject struct{}

func (EnqueueRequestForObject) Create(_ context.Context, e CreateEvent, q Queue) {
	enqueueObject(e.Object, q)
}

func (EnqueueRequestForObject) Update(_ context.Context, e UpdateEvent, q Queue) {
	if e.ObjectNew != nil {
		enqueueObject(e.ObjectNew, q)
		return
	}
	enqueueObject(e.ObjectOld, q)
}

func (EnqueueRequestForObject) Delete(_ context.Context, e DeleteEvent, q Queue) {
	enqueueObject(e.Object, q)
}

func (EnqueueRequestForObject) Generic(_ context.Context, e GenericEvent, q Queue) {
	enqueueObject(e.Object, q)
}

func enqueueObject(o Object, q Queue) {
	if o == nil {
		return
	}
	q.Add(Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
}

// MapFunc maps an object to the Requests it should trigger.
type MapFunc func(ctx context.Context, obj Object) []Request

// EnqueueRequestsFromMapFunc enqueues the Requests fn returns for the
// event's object; for an update, for both the old and the new object, each
// distinct Request once. A nil fn enqueues nothing.
func EnqueueRequestsFromMapFunc(fn MapFunc) EventHandler { return mapHandler{fn: fn} }

type mapHandler struct{ fn MapFunc }

func (h mapHandler) Create(ctx context.Context, e CreateEvent, q Queue) {
	h.enqueue(ctx, q, e.Object, nil)
}

func (h mapHandler) Update(ctx context.Context, e UpdateEvent, q Queue) {
	h.enqueue(ctx, q, e.ObjectNew, e.ObjectOld)
}

func (h mapHandler) Delete(ctx context.Context, e DeleteEvent, q Queue) {
	h.enqueue(ctx, q, e.Object, nil)
}

func (h mapHandler) Generic(ctx context.Context, e GenericEvent, q Queue) {
	h.enqueue(ctx, q, e.Object, nil)
}

func (h mapHandler) enqueue(ctx context.Context, q Queue, a, b Object) {
	if h.fn == nil {
		return
	}
	var seen []Request
	for _, o := range [2]Object{a, b} {
		if o == nil {
			continue
		}
		for _, req := range h.fn(ctx, o) {
			if !containsRequest(seen, req) {
				seen = append(seen, req)
				q.Add(req)
			}
		}
	}
}

func containsRequest(reqs []Request, r Request) bool {
	for _, x := range reqs {
		if x == r {
			return true
		}
	}
	return false
}

// OwnerOption configures EnqueueRequestForOwner.
type OwnerOption func(*ownerHandler)

// OnlyControllerOwner restricts EnqueueRequestForOwner to the owner
// reference marked controller: true. Owns uses it.
func OnlyControllerOwner() OwnerOption {
	return func(h *ownerHandler) { h.onlyController = true }
}

// EnqueueRequestForOwner enqueues, for the event's object, the Requests of
// its owners of ownerType's kind (by owner reference; group and kind must
// match, the version may differ). Owners may be namespaced (same namespace as
// the object) or cluster-scoped (empty namespace); mapper tells which.
// ownerType's kind comes from scheme, or from its TypeMeta if it is a
// *metav1.PartialObjectMetadata. It fails if the kind is unknown to the
// scheme or not served by the API server.
func EnqueueRequestForOwner(scheme *runtime.Scheme, mapper meta.RESTMapper, ownerType Object, opts ...OwnerOption) (EventHandler, error) {
	if mapper == nil {
		return nil, errors.New("EnqueueRequestForOwner: RESTMapper is nil; pass the manager's mapper (it tells namespaced owners from cluster-scoped ones)")
	}
	gvk, err := kindOf(scheme, ownerType)
	if err != nil {
		return nil, fmt.Errorf("EnqueueRequestForOwner: %w", err)
	}
	mapping, err := restMapping(mapper, gvk)
	if err != nil {
		return nil, fmt.Errorf("EnqueueRequestForOwner: %w", err)
	}
	h := &ownerHandler{
		group:      gvk.Group,
		kind:       gvk.Kind,
		namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}
	for _, o := range opts {
		if o != nil {
			o(h)
		}
	}
	return h, nil
}

type ownerHandler struct {
	group, kind    string
	namespaced     bool
	onlyController bool
}

func (h *ownerHandler) Create(_ context.Context, e CreateEvent, q Queue) {
	h.enqueue(q, e.Object, nil)
}

func (h *ownerHandler) Update(_ context.Context, e UpdateEvent, q Queue) {
	h.enqueue(q, e.ObjectNew, e.ObjectOld)
}

func (h *ownerHandler) Delete(_ context.Context, e DeleteEvent, q Queue) {
	h.enqueue(q, e.Object, nil)
}

func (h *ownerHandler) Generic(_ context.Context, e GenericEvent, q Queue) {
	h.enqueue(q, e.Object, nil)
}

func (h *ownerHandler) enqueue(q Queue, a, b Object) {
	var buf [2]Request
	seen := buf[:0]
	for _, o := range [2]Object{a, b} {
		if o == nil {
			continue
		}
		for _, ref := range o.GetOwnerReferences() {
			req, ok := h.requestFor(o, ref)
			if ok && !containsRequest(seen, req) {
				seen = append(seen, req)
				q.Add(req)
			}
		}
	}
}

func (h *ownerHandler) requestFor(o Object, ref metav1.OwnerReference) (Request, bool) {
	if ref.Kind != h.kind || ref.Name == "" {
		return Request{}, false
	}
	if h.onlyController && (ref.Controller == nil || !*ref.Controller) {
		return Request{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != h.group {
		return Request{}, false
	}
	req := Request{NamespacedName: types.NamespacedName{Name: ref.Name}}
	if h.namespaced {
		// Kubernetes forbids a cluster-scoped object from having a
		// namespaced owner; such a reference names nothing.
		if o.GetNamespace() == "" {
			return Request{}, false
		}
		req.Namespace = o.GetNamespace()
	}
	return req, true
}

// kindOf returns obj's kind: from its TypeMeta for *metav1.PartialObjectMetadata
// (metadata-only watches), otherwise from the scheme.
func kindOf(scheme *runtime.Scheme, obj Object) (schema.GroupVersionKind, error) {
	if obj == nil {
		return schema.GroupVersionKind{}, errors.New("object is nil; pass a pointer to a typed object such as &corev1.ConfigMap{}")
	}
	if pom, ok := obj.(*metav1.PartialObjectMetadata); ok {
		gvk := pom.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return gvk, errors.New("*metav1.PartialObjectMetadata has no TypeMeta; set APIVersion and Kind to say which kind it stands for")
		}
		return gvk, nil
	}
	if scheme == nil {
		return schema.GroupVersionKind{}, fmt.Errorf("no scheme to look up the kind of %T; pass the manager's scheme", obj)
	}
	gvks, unversioned, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("type %T is not registered in the scheme; add it to the manager's scheme (e.g. with its API package's AddToScheme): %w", obj, err)
	}
	if unversioned || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("type %T is unversioned; only versioned API kinds can be watched", obj)
	}
	return gvks[0], nil
}

func restMapping(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("the API server does not serve %s; install its CustomResourceDefinition or fix the object's group/version: %w", gvk, err)
		}
		return nil, fmt.Errorf("mapping %s to an API resource: %w", gvk, err)
	}
	return m, nil
}
