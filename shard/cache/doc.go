// Package cache is the informer cache both kshard runtimes build on: the
// Cache kshard's manager owns (one SharedIndexInformer per GroupVersionKind,
// typed or metadata-only for *metav1.PartialObjectMetadata, read through Get
// and List), and the sharded informers the controller-runtime adapter uses.
//
// Options.Sharding shards every namespaced typed kind of a Cache by the
// ring's partitions: on Kubernetes 1.36 sharded list/watch (KEP-5866) where
// the API server filters the kind (ModeSharded: probed per kind; a kind
// with no object to probe with is probed again at its first, and moves to
// sharded without a gap), else one informer of the whole kind filtered on
// the client (ModeFallback); the manager turns it on with
// Options.PartitionBy namespace. Sharding.Labels (LabelSharding) instead
// shards kinds by the ring's partition label on any API server
// (ModeLabels): the cache writes missing labels and checks itself every
// CheckInterval (DefaultCheckInterval; KindMode.SelfCheck, CheckReport).
// ModeReport says how each kind is cached and why.
//
// The sharded informers themselves live under internal/cache: segmented
// (by shard selector or label, one informer per gain), labelled (by label,
// with its write path), shardprobe (does the server filter?). Typed
// informers list and watch through a REST client built from the caller's
// scheme, so custom resource types registered in that scheme work exactly
// like the built-in ones. It imports the standard library, client-go,
// apimachinery, logr, kshard's shard package and its internal/cache
// packages only: never the manager, the ring or the controllers, so any
// layer of kshard above shard may use it.
package cache
