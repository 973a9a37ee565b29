//go:build !mutant_notombstone

package handoff

// blockMain adds the claim in force of a peer's main Lease to b, a
// tombstone's too: a Lease that left the view (deleted or relabelled by
// hand, say) while its claim was in force keeps blocking it until its
// expiry is confirmed, an empty claim is observed or its writer is proven
// dead (absence is not death). tombstone_mutant.go, built only with the
// tag mutant_notombstone, ignores tombstones, to show that the simulation
// catches it.
func blockMain(p *peer, b *blockers) {
	b.add(p)
}
