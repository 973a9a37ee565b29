package lease

// LabelRing is the label every member Lease of a ring carries, valued with
// the ring's name: `kubectl get leases -l kshard.io/ring=R` lists the ring.
// The other labels, annotations and the finalizer of a member Lease are
// described in the package doc; kshard's Lease membership (internal) writes
// and reads them, and package ringstatus reads a ring for tools.
const LabelRing = "kshard.io/ring"

// LeaseName returns the name of the Lease of identity in ring.
//
// With a StatefulSet named like its ring the name repeats it
// (example-operator-example-operator-1). It is kept: a replica finds its
// own Lease, and a peer's, by this name, and the core keeps one Lease per
// identity; a rolling update from a release that names Leases otherwise
// would run, for the same identity, an old-named Lease and a new-named one
// side by side (a kept place, a force-deleted pod's process), hiding one's
// claims from peers and its incarnation from the duplicate-identity lock,
// while old replicas read a new-named Lease as malformed. Renaming needs a
// release that reads both names as one member's before one writes the new.
func LeaseName(ring, identity string) string { return ring + "-" + identity }
