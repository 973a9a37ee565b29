// Package lease describes the coordination.k8s.io/v1 Leases a kshard ring
// is kept in, for the operators and tools that read them: the format of a
// member Lease (below), its name and ring label, the defaults and the
// validation of the ring, identity and namespace a replica's Lease is made
// of, and the leader-election Lease a converted operator keeps holding
// (LeaderLease). The replica's own membership machinery, which writes and
// watches these Leases and names their other labels and annotations, is
// internal to kshard; kshard's manager and the controller-runtime adapter
// run it, and package ringstatus reads a ring for tools.
//
// # Lease format
//
// Each replica owns one Lease, which `kubectl get leases -l kshard.io/ring=R
// -L kshard.io/state,kshard.io/partitions` lists:
//
//	metadata.name                 <ring>-<identity>, in the ring's namespace
//	spec.holderIdentity           <identity>
//	spec.leaseDurationSeconds     LeaseDuration, rounded up to whole seconds
//	spec.renewTime                writer's clock at the last write (informational)
//	spec.acquireTime              writer's clock when this process took the Lease
//	label kshard.io/ring          <ring>
//	label kshard.io/state         joining | active | leaving
//	label kshard.io/partitions    number of claimed partitions
//	annotation kshard.io/claim        claimed partitions: v1:<count>:<bitmap, base64url> (docs/operations.md)
//	annotation kshard.io/incarnation  random id of the writing process
//	annotation kshard.io/epoch        the Record's generation, unsigned decimal (the key keeps its first name)
//	annotation kshard.io/params       fingerprint of the writer's ring parameters
//	annotation kshard.io/pod-uid      UID of the writer's pod (optional: only when
//	                                  its death can be proven, see handoff.TerminationMarker)
//	annotation kshard.io/warm         partitions of the writer's target its sharded
//	                                  cache holds (optional: sharded caches only)
//	annotation kshard.io/weights      its partitions' object counts (optional:
//	                                  balanced rings only)
//	annotation kshard.io/returning    "true" while the writer keeps its place in the
//	                                  ring for its identity's next incarnation
//	                                  (optional: handoff.Config.KeepPlaceOnLeave)
//	annotation kshard.io/cache-mode   the writer's cache mode and how many objects
//	annotation kshard.io/cached-objects  its cache holds (optional;
//	                                  written with the renewals, never on its own)
//	finalizer kshard.io/member        on every Lease this version writes
//
// A Lease carrying the ring label that does not follow this format is
// reported by `kshard status` and counted in kshard_lease_invalid_total; it
// is never trusted as a member. A member Lease deleted by hand stays,
// terminating, until its holder has stopped everything under it and removed
// the finalizer; `kshard release` removes the finalizer of Leases nobody
// renews.
package lease
