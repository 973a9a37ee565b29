// Package membership is a replica's Lease membership, internal to kshard:
// it keeps this replica's own coordination.k8s.io/v1 Lease renewed, watches
// every Lease of the ring with locally observed change times, and performs
// the confirming reads and deletes the handoff core asks for. It makes no
// decision about partitions; the only thing it decides is whether it may
// write its own Lease. Package lease's doc describes the Lease format it
// writes and reads and names the Lease and its ring label; the other
// labels, annotations and the finalizer are named here (keys.go).
//
// A Lease carrying the ring label that does not follow the format is
// reported with Observed.Problem and counted in kshard_lease_invalid_total;
// it is never trusted as a member, but a member-shaped Lease whose claim
// cannot be read is reported with ClaimUnknown so that the caller treats it
// as claiming everything while it is live. Each malformed version is
// logged and counted once. A Lease whose params annotation differs from
// Options.Params was written by a replica of another ring configuration: it
// is logged as a foreign configuration, naming the parameters that differ,
// and counted with reason foreign_config, once per configuration rather than
// once per renewal (its claim, over another partition count, still reads as
// ClaimUnknown here).
//
// # Time
//
// Liveness is the caller's judgement and rests on Observed.LastChange: the
// time on this process's clock when it observed a Lease's resourceVersion
// change (first sight counts as a change). Remote timestamps (renewTime) are
// never used, so skew between clocks cannot expire a healthy peer; only a
// bounded difference in clock rates is assumed. LastRenew is the time a
// successful write of the own Lease was sent, and a write counts only if its
// response arrived within RenewTimeout ≤ LeaseDuration − RenewDeadline, so a
// replica that fences RenewDeadline after LastRenew has stopped before any
// peer can have observed its last write LeaseDuration ago.
//
// # Owning the own Lease
//
// Each process writes a random incarnation into its Lease and takes the
// Lease like a lock, but the decisions are the handoff core's: Run creates
// the Lease when it is absent, adopts it when it carries this incarnation,
// and overwrites a version written by anyone else only when the caller
// allowed that version with TakeOver (the core does after confirming an
// earlier incarnation's Lease expired, or to repair a damaged own Lease).
// Every write is conditioned on the last resourceVersion. When the own Lease
// is deleted by someone else, the next renew creates it again; when its ring
// label is removed, the next renew (or, at start, Run) puts it back. When
// another incarnation writes the Lease, Run stops writing and waits: the
// core decides that this is a duplicate identity. Only a name used by
// something that is not this identity's Lease (ErrNameTaken) stops Run.
//
// # The member finalizer
//
// A Lease deleted by hand (kubectl delete lease, a namespace deletion) stays,
// terminating, until the finalizer goes: the holder removes it (Finalize)
// once the core has fenced and nothing of it runs, and then creates the
// Lease afresh; a graceful leave removes it in an update of the Lease with
// the empty claim, then deletes; a peer collecting a long-expired Lease
// removes it together with the claim (DeletePeer). So a Lease's absence
// tells a starting replica that nobody still works under it, and after a
// scan of the namespace for member Leases relabelled out of the ring
// (JoinScanClean) the replica joins without watching the ring for
// LeaseDuration first. A ring whose replicas are all gone leaves its
// Leases, and a namespace being deleted, waiting: `kshard release`
// removes the finalizer of Leases nobody renews.
package membership
