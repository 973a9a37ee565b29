// Package cache is the shared informer cache a kshard manager owns: one
// SharedIndexInformer per GroupVersionKind (typed, or metadata-only for
// *metav1.PartialObjectMetadata), started together, read through Get and List.
//
// ProbeShardSelector and ShardMatcher are the foundations of sharded caches
// (Kubernetes 1.36 sharded list/watch, KEP-5866): the probe asks the API
// server whether it applies a shard selector to a resource, trusting only an
// exact ShardInfo echo; the matcher checks each object on the client. The
// sharded informers themselves are the next step (shard/README.md).
//
// Typed informers list and watch through a REST client built from the
// caller's scheme, so custom resource types registered in that scheme work
// exactly like the built-in ones. Only the standard library, client-go and
// apimachinery are imported, so any layer of kshard may use it.
package cache
