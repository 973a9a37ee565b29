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
	if p.void || p.obs.Claim.IsEmpty() {
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
