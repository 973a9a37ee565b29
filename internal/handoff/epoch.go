//go:build !mutant_reuseepoch

package handoff

// rearm makes every claimed partition need the next generation read back
// (claimLedger.readBack): at a fence, Records written before it may have
// been voided by peers, which may have activated their partitions since.
// epoch_mutant.go, built only with the tag mutant_reuseepoch, keeps the
// earlier epoch's Records valid, to show that the simulation catches it.
func (l *claimLedger) rearm() {
	for p := range l.claim.All() {
		l.claimedAt[p] = l.generation + 1
	}
}
