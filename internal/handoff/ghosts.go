package handoff

import (
	"slices"
	"time"
)

// ghostList holds the claims of Lease objects that are gone for good while
// their claim was in force: an earlier object (UID) of an identity, or the
// state an incarnation left in an object that another one wrote over (see
// peer.ghosts and ownLease.ghosts). Absence is not death: the process
// that wrote such a claim may still run it until it notices, so each ghost
// counts for LeaseDuration of observed time from when this core learnt of
// it (lastChange), and by then its holder has fenced and stopped: it can
// no longer renew an object that is gone, or a version written over.
type ghostList []*peer

// add returns gs with obs's claim added, learnt at now: merged into the
// ghost of the same object (UID, or version when the UID is unknown) if
// there is one and it is still in force, else as a new ghost. seen is the
// Observe that reported obs as departed, 0 for a claim this core saw.
// covered: a later Lease of the same incarnation is in the view, and its
// claim covers obs's; the ghost is recorded void, so that later reports of
// the departure do not arm it.
func (gs ghostList) add(now time.Time, lease time.Duration, obs Observed, seen uint64, covered bool) ghostList {
	for _, g := range gs {
		if !sameObject(g.obs, obs) {
			continue
		}
		g.seen = max(g.seen, seen)
		switch {
		case g.void && !covered && seen == 0:
			// A claim this core saw in force, of an object whose
			// departure it had found covered: it counts after all.
			g.obs, g.lastChange, g.void = obs, now, false
		case g.liveAt(now, lease) && !g.void && g.obs.Claim.Size() == obs.Claim.Size():
			g.obs.Claim = g.obs.Claim.Union(obs.Claim)
		}
		return gs
	}
	return append(gs, &peer{obs: obs, lastChange: now, gone: true, collected: true, seen: seen, void: covered})
}

// prune returns gs without the ghosts that count nothing any more (expired
// or void) and that the latest Observe (observation) did not report: an
// expired ghost stays while the shell still reports its departure, so
// that the report does not arm it again.
func (gs ghostList) prune(now time.Time, lease time.Duration, observation uint64) ghostList {
	return slices.DeleteFunc(gs, func(g *peer) bool {
		return (g.void || !g.liveAt(now, lease)) && g.seen != observation
	})
}

// block adds the ghosts' claims still in force to b: those learnt within
// LeaseDuration whose writer is not proven dead.
func (gs ghostList) block(now time.Time, lease time.Duration, deaths proofs, b *blockers) {
	for _, g := range gs {
		if g.liveAt(now, lease) && !deaths.provenDead(g.obs) {
			b.add(g)
		}
	}
}

// nextDeadline considers when each ghost expires.
func (gs ghostList) nextDeadline(lease time.Duration, consider func(time.Time)) {
	for _, g := range gs {
		consider(g.lastChange.Add(lease))
	}
}

// sameObject reports whether a and b are states of one Lease object.
func sameObject(a, b Observed) bool {
	if a.UID != "" || b.UID != "" {
		return a.UID == b.UID
	}
	return a.Version == b.Version
}
