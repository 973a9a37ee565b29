// Package cachemetrics exports a sharded cache's modes per kind, the
// objects it holds and what labelling costs (kshard_cache_*), for kshard's
// manager and the controller-runtime adapter alike.
package cachemetrics
