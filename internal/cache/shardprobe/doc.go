// Package shardprobe asks an API server whether it filters a resource by a
// shard selector (Kubernetes 1.36 sharded list/watch, KEP-5866), and checks
// objects against a shard selector on the client (Matcher).
//
// Filtering trusts an exact ShardInfo echo and, where the server echoes none
// (custom resources), only a proof from what it returns about an existing
// object. It is the foundation of kshard's sharded caches (shard/cache).
package shardprobe
