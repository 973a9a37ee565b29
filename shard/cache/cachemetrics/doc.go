// Package cachemetrics exports a sharded cache's modes per kind, the
// objects it holds, what labelling costs and what the self-check of a
// kind cached by labels found (kshard_cache_*), for kshard's manager and
// the controller-runtime adapter alike.
package cachemetrics
