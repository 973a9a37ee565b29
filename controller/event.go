package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is a Kubernetes object: metadata plus a runtime type. It aliases an
// interface literal (as shard/cache.Object does), so the two packages'
// Object types are identical and the cache satisfies Informers.
type Object = interface {
	metav1.Object
	runtime.Object
}

// CreateEvent reports an object seen for the first time (or, during
// Activate, an object replayed from a source's cache).
type CreateEvent struct {
	Object Object
}

// UpdateEvent reports a change of an object.
type UpdateEvent struct {
	ObjectOld Object
	ObjectNew Object
}

// DeleteEvent reports a deleted object. DeleteStateUnknown is true when the
// watch missed the deletion and Object is the last state the cache held
// (client-go's DeletedFinalStateUnknown tombstone).
type DeleteEvent struct {
	Object             Object
	DeleteStateUnknown bool
}

// GenericEvent reports an event from outside the cluster (see Channel).
type GenericEvent struct {
	Object Object
}

// Queue receives the requests that event handlers map events to. The
// controller's Queue is the shard gate: it admits a request only if its
// partition is active here.
type Queue interface {
	Add(req Request)
}
