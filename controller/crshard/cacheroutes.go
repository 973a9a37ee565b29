package crshard

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/shard"
)

// route is how one source of a controller maps its kind to requests: what
// the sharded cache labels that kind's objects by (kcache.Cache.DeclareRoute).
type route struct {
	obj          client.Object
	metadataOnly bool
	route        shard.Route
}

// forRoute: For maps an object to its own key.
func forRoute(obj client.Object, opts []builder.ForOption) route {
	r := route{obj: obj, route: shard.RouteSelf}
	for _, o := range opts {
		if o == builder.OnlyMetadata {
			r.metadataOnly = true
		}
	}
	return r
}

// ownsRoute: Owns maps an object to its controller owner's key; with
// MatchEveryOwner to every owner's, which no one label can name.
func ownsRoute(obj client.Object, opts []builder.OwnsOption) route {
	r := route{obj: obj, route: shard.RouteOwner}
	for _, o := range opts {
		switch o {
		case builder.OnlyMetadata:
			r.metadataOnly = true
		case builder.MatchEveryOwner:
			r.route = shard.RouteMapped
		}
	}
	return r
}

// watchesRoute: Watches maps by its handler: EnqueueRequestForObject to
// the object's own key, any other handler (a map function, an owner
// handler whose options cannot be read) as a function.
func watchesRoute(obj client.Object, h handler.TypedEventHandler[client.Object, reconcile.Request], metadataOnly bool, opts []builder.WatchesOption) route {
	r := route{obj: obj, metadataOnly: metadataOnly, route: shard.RouteMapped}
	if _, ok := h.(*handler.EnqueueRequestForObject); ok {
		r.route = shard.RouteSelf
	}
	for _, o := range opts {
		if o == builder.OnlyMetadata {
			r.metadataOnly = true
		}
	}
	return r
}

// declareRoutes tells the ring's sharded cache, if it is the manager's
// cache, how a controller's sources map their kinds, before any of them
// starts: a kind mapped by a function, or both ways, is cached whole.
func declareRoutes(c any, scheme *runtime.Scheme, routes []route) error {
	sc, ok := c.(*shardedCache)
	if !ok {
		return nil
	}
	var errs []error
	for _, r := range routes {
		var obj client.Object = r.obj
		if r.metadataOnly {
			gvk, err := apiutil.GVKForObject(r.obj, scheme)
			if err != nil {
				errs = append(errs, fmt.Errorf("crshard: %T: %w", r.obj, err))
				continue
			}
			pm := &metav1.PartialObjectMetadata{}
			pm.SetGroupVersionKind(gvk)
			obj = pm
		}
		if err := sc.kc.DeclareRoute(obj, r.route); err != nil {
			errs = append(errs, fmt.Errorf("crshard: %w", err))
		}
	}
	return errors.Join(errs...)
}
