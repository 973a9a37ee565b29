//go:build !mutant_noreadback

package handoff

// readBackOf reports whether own, the own Lease as observed, claims p in a
// Record of generation at or after at, the first generation whose Records
// all claim p (0: p is not claimed): claim before act. An older Record
// that claims p proves nothing: a later one may have dropped p, or a fence
// may have voided it. readback_mutant.go, built only with the tag
// mutant_noreadback, activates without reading the claim back, to show
// that the simulation catches it.
func readBackOf(at uint64, own *Observed, p int) bool {
	return at != 0 && own.Generation >= at && own.Claim.Has(p)
}
