//go:build !mutant_voidunconfirmed

package handoff

// suspect asks the shell for a direct read of the peer's Lease (id), which
// looks expired: confirm before void. A lagging or stalled watch shows a
// Lease unchanged that its holder keeps renewing, so only the version
// judged, read back directly, may void its claims (peerView.confirmed).
// confirm_mutant.go, built only with the tag mutant_voidunconfirmed, voids
// it at once, to show that the simulation catches it.
func (p *peer) suspect(id string, r *Ready) {
	p.confirming = true
	r.Confirm = append(r.Confirm, LeaseRef{Identity: id, Version: p.obs.Version})
}
