//go:build !mutant_leavingreleased

package handoff

// inForce reports whether p's claim still counts against this replica's
// activations: until it is voided (confirmed expiry, a proof of death) or
// an empty claim is observed, whatever state the Lease is in; a leaving
// replica still drains what it claims. release_mutant.go, built only with
// the tag mutant_leavingreleased, takes a leaving Lease's claim for
// released, to show that the simulation catches it.
func inForce(p *peer) bool {
	return !p.void && !p.obs.Claim.IsEmpty()
}
