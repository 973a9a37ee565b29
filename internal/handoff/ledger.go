package handoff

import "github.com/kshard/kshard/shard"

// blockers is what keeps this replica from activating partitions (claim
// before act): the union of every claim in force of another Lease, a
// peer's, a tombstone's, a ghost's or a previous incarnation's of the own
// identity.
type blockers struct {
	fingerprint string
	claimed     shard.PartitionSet
	// all: a Lease of another ring configuration, or with a claim over
	// another partition count, claims something: its partition numbers
	// may name other keys, so it blocks every partition.
	all bool
}

func newBlockers(partitions int, fingerprint string) blockers {
	return blockers{fingerprint: fingerprint, claimed: shard.NewPartitionSet(partitions)}
}

// add counts p's claim unless it was voided.
func (b *blockers) add(p *peer) {
	if !inForce(p) {
		return
	}
	if p.obs.Fingerprint != b.fingerprint || p.obs.Claim.Size() != b.claimed.Size() {
		b.all = true
		return
	}
	b.claimed = b.claimed.Union(p.obs.Claim)
}

// blocks reports whether partition p is claimed by another Lease.
func (b *blockers) blocks(p int) bool { return b.all || b.claimed.Has(p) }

// The claim ledger: what this replica publishes it claims, and which
// Record must be read back before a claimed partition may activate.

// claimLedger is the own Record's claim and its generations.
type claimLedger struct {
	generation uint64
	bump       bool // the Record changed in this step: commit increases generation
	claim      shard.PartitionSet
	// claimedAt[p]: the first generation whose Records all claim p, so
	// that a Record of it or later read back proves p claimed (0 when p
	// is not claimed).
	claimedAt  []uint64
	published  bool   // a Record has been handed to the shell
	ackedGen   uint64 // generation of the last Record the shell acknowledged (Advance)
	releasedAt uint64 // generation of the empty Record of a graceful leave
}

func newClaimLedger(partitions int) claimLedger {
	return claimLedger{generation: 1, claim: shard.NewPartitionSet(partitions), claimedAt: make([]uint64, partitions)}
}

// changed records that the Record changed in this step (its state, pod,
// warm partitions or weights): commit closes it under a new generation.
func (l *claimLedger) changed() { l.bump = true }

// set makes claim the Record's claim. A partition it adds needs the next
// generation read back; one it drops needs nothing any more.
func (l *claimLedger) set(claim shard.PartitionSet) {
	if claim.Equal(l.claim) {
		return
	}
	for p := range claim.Difference(l.claim).All() {
		l.claimedAt[p] = l.generation + 1
	}
	for p := range l.claim.Difference(claim).All() {
		l.claimedAt[p] = 0
	}
	l.claim, l.bump = claim, true
}

// newEpoch starts a new epoch at a fence: Records written before it may
// have been voided by peers, so none of them may serve as read-your-write
// again (rearm, epoch.go).
func (l *claimLedger) newEpoch() {
	l.bump = true
	l.rearm()
}

// readBack reports whether own, the own Lease as observed, claims p in a
// Record at least as new as the one that last added p (readBackOf,
// readback.go).
func (l *claimLedger) readBack(p int, own *Observed) bool {
	return readBackOf(l.claimedAt[p], own, p)
}

// commit closes the step's changes to the Record under a new generation;
// a leaving replica's first empty claim is the one to read back before it
// deletes its Lease.
func (l *claimLedger) commit(leaving bool) {
	if l.bump {
		l.generation++
		l.bump = false
	}
	if leaving && l.claim.IsEmpty() && l.releasedAt == 0 {
		l.releasedAt = l.generation
	}
}

// released reports whether own shows the leave's empty claim.
func (l *claimLedger) released(own *Observed) bool {
	return own != nil && own.State == StateLeaving && own.Claim.IsEmpty() && own.Generation >= l.releasedAt
}

// acked records that the shell carried out the Publish of generation gen.
func (l *claimLedger) acked(gen uint64) {
	if gen > l.ackedGen {
		l.ackedGen = gen
	}
}

// unpublished reports whether the current Record has not been acknowledged
// yet: Ready publishes it.
func (l *claimLedger) unpublished() bool { return l.ackedGen != l.generation }
