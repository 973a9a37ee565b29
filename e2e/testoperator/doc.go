// Command testoperator is the shard-aware operator the e2e tests run as OS
// processes: it reconciles ConfigMaps labelled kshard-e2e=1 by pretending to
// work for --work, and records every reconcile and ring event with the test
// kit's recorder (internal/recorder) so the tests can prove no key
// was reconciled twice at once, and every cache read that found no object,
// so they can prove no existing object was reported gone.
// With --blind-write every reconcile that did its work ends with a merge
// patch of an annotation of its ConfigMap, without a resourceVersion
// precondition, recorded by a transport inside the manager's fencing
// transport just before it is sent.
//
// --background-write (test only) patches a ConfigMap of the replica's own,
// background-<identity>, continuously from a few goroutines with
// context.Background(), as an operator's helper goroutine would: the e2e
// tests check that none of these writes lands while the replica's lease
// validity is lost (after a pause) until it has renewed.
//
// --cache-report-addr (test only) serves the ConfigMaps the replica's cache
// holds (kshardtest.ServeCacheReport): the chaos suite checks at the end of
// every round that each object is in exactly one live replica's sharded
// cache, or in every replica's full cache.
package main
