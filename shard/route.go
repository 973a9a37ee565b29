package shard

// Route says how a source maps the objects of a kind to reconcile requests,
// and so which partition an object belongs to: the partition of the request
// it is mapped to. A cache sharded by partition labels needs it to label and
// place each object (shard/cache, CacheMode labels).
type Route int

const (
	// RouteSelf: an object maps to its own key ("namespace/name"), as a
	// controller's For kind does.
	RouteSelf Route = iota + 1
	// RouteOwner: an object maps to the key of its controller owner (the
	// ownerReference with controller=true; its own key when it has none),
	// as a controller's Owns kind does. One level only: an object owned by
	// an object owned by the reconciled kind maps to its direct owner.
	RouteOwner
	// RouteMapped: an object maps to requests a function computes (a
	// map-function handler), which nothing about the object itself tells.
	RouteMapped
)

// String names the route as errors and metrics do.
func (r Route) String() string {
	switch r {
	case RouteSelf:
		return "self"
	case RouteOwner:
		return "owner"
	case RouteMapped:
		return "mapped"
	}
	return "unknown"
}
