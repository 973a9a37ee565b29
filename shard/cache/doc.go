// Package cache is the informer cache both kshard runtimes build on: the
// Cache kshard's manager owns (one SharedIndexInformer per GroupVersionKind,
// typed or metadata-only for *metav1.PartialObjectMetadata, read through Get
// and List), and the sharded informers the controller-runtime adapter uses.
//
// ProbeShardFiltering and ShardMatcher are the foundations of sharded caches
// (Kubernetes 1.36 sharded list/watch, KEP-5866): the probe asks the API
// server whether it applies a shard selector to a resource, trusting an
// exact ShardInfo echo and, where the server echoes none (custom resources),
// only a proof from what it returns about an existing object; the matcher
// checks each object on the client.
//
// Segmented is the sharded informer of one resource (ring.PartitionCache):
// it holds the partitions it is told to, one informer (segment) per gain, so
// a gain lists only the gained ranges and nothing cached is listed again; a
// release hides the partitions at once and stops a segment none of whose
// partitions is held; more than MaxSegments (default 4) are compacted into
// one informer of everything held, which replaces them once synced. So a
// replica holds one to MaxSegments+1 watches per resource. Segments LIST
// (watch-list off) so every response is checked as a whole (an object
// outside the selector shows the server ignored it), and every item and
// event passes a client-side partition check before the store.
// Options.Sharding puts every namespaced typed kind of a Cache on Segmented
// (probed per kind: sharded, or fallback where the server does not filter;
// a kind with no object to probe with is probed again at its first, and
// moves to sharded without a gap); the manager turns it on with
// Options.PartitionBy namespace.
//
// Labelled is the sharded informer of one resource by the ring's partition
// label (LabelSharding), on any API server. It checks itself every
// CheckInterval (5 minutes by default): a paged metadata LIST of what it
// should hold against its stores, reporting objects missing for at least
// an interval (CheckReport, KindMode.SelfCheck) and listing the views that
// missed them again, once.
//
// Typed informers list and watch through a REST client built from the
// caller's scheme, so custom resource types registered in that scheme work
// exactly like the built-in ones. It imports the standard library,
// client-go, apimachinery, logr and kshard's shard package (partitions and
// their sets) only: never the manager, the ring or the controllers, so any
// layer of kshard above shard may use it.
package cache
