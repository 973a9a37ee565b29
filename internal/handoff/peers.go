package handoff

import (
	"slices"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// The view of peers: what this core knows of every other identity's Lease,
// those that left the view included. A Lease that left while its claim was
// in force stays as a tombstone, and an earlier object of an identity whose
// claim was in force stays as a ghost (ghosts.go), until confirmed expiry,
// an observed empty claim or a proof of death releases it ("Absence is not
// death" in the package documentation). Expiry is judged on locally
// observed time alone: when a Lease's version was first seen.

// peer is what the core knows about another member's Lease.
type peer struct {
	obs Observed
	// lastChange is the local time at which obs.Version was first observed.
	// Expiry is judged on it alone: never on timestamps written by others.
	lastChange time.Time
	confirming bool // a Confirm of obs.Version is outstanding
	// void: obs.Version looked expired and a direct read showed it still
	// current (or gone). Its claims no longer count until the Lease changes.
	void      bool
	collected bool   // GarbageCollect of obs.Version has been asked for
	seen      uint64 // the Observe call that last included this Lease
	// gone: the Lease has left the view (deleted, relabelled, or filtered
	// out) while its last claim was in force. Absence is not death: the
	// claim keeps counting until it is released by an observed empty claim
	// (which removes the tombstone before it forms), or by confirmed expiry,
	// LeaseDuration of observed time after the Lease left. lastChange is the
	// time it left.
	gone bool
	// takingOver: (prior only) the shell has been asked to take the Lease
	// over from this version.
	takingOver bool
	// placed: the identity was a member of the ring as last placed
	// (members). A returning joiner (Record.Returning) keeps a place only
	// if it still has it.
	placed bool
	// joiningSince is when this core first saw the Lease's incarnation in
	// state joining; zero when it is not joining (see awaitingJoiner).
	joiningSince time.Time
	// history: the newest Records of this identity seen (see
	// staleObservation).
	history leaseHistory
	// ghosts: claims of earlier Lease objects (UIDs) of this identity, or
	// of the incarnation that held this object before another one wrote
	// it, that were in force when they were superseded without an observed
	// empty claim in between (a Lease deleted by hand and created by a
	// second process of the same identity, say; or a watch that lagged
	// across several deletions of the name, whose departed states the shell
	// reports one per UID). See ghostList.
	ghosts ghostList
}

// liveAt reports whether p's Lease has changed within lease (LeaseDuration)
// before now.
func (p *peer) liveAt(now time.Time, lease time.Duration) bool {
	return !Expired(now.Sub(p.lastChange), lease)
}

// leaseHistory is what a peer's Lease has shown of its writers' Records:
// per incarnation, the Record with the highest Generation seen (a writer's
// Generation only grows, across re-creations of its Lease too). It orders
// the Records of one writer; those of different incarnations cannot be
// ordered without comparing resourceVersions (which API conventions
// forbid), and the order in which a stale view shows them proves nothing.
// It is bounded: the incarnation seen longest ago is forgotten first.
type leaseHistory struct {
	newest []Record // one per incarnation, oldest incarnation first
}

// historyDepth is how many incarnations a leaseHistory remembers.
const historyDepth = 8

// wellFormed reports whether l's Record can be ordered against others of
// its writer: damaged Leases, and those without an incarnation, cannot.
func wellFormed(l Observed) bool {
	return !l.Gone && l.Problem == "" && !l.ClaimUnknown && l.Incarnation != ""
}

// record adds l to the history unless it is older than a Record of its
// writer seen already.
func (h *leaseHistory) record(l Observed) {
	if !wellFormed(l) {
		return
	}
	i := slices.IndexFunc(h.newest, func(r Record) bool { return r.Incarnation == l.Incarnation })
	switch {
	case i < 0:
		h.newest = append(h.newest, l.Record.Clone())
		if len(h.newest) > historyDepth {
			h.newest = h.newest[1:]
		}
	case l.Generation > h.newest[i].Generation:
		h.newest[i] = l.Record.Clone()
	}
}

// newer returns the newest Record seen of l's writer if it is newer than
// l: a higher Generation of the same incarnation.
func (h *leaseHistory) newer(l Observed) (Record, bool) {
	for _, r := range h.newest {
		if r.Incarnation == l.Incarnation && l.Generation < r.Generation {
			return r, true
		}
	}
	return Record{}, false
}

// meaning returns what a Lease counts as, on a ring of partitions
// partitions whose configuration has the given fingerprint. A Lease that
// carries the ring's label but does not follow the format is never a
// member: while it is live its claim counts as every partition, because a
// claim that cannot be read may hide a partition someone reconciles. A
// malformed Lease written with another ring configuration keeps its state,
// so that an active member of another configuration is seen and the
// replica refuses to join, saying why, instead of joining a ring whose
// every partition that member blocks; when such a Lease's claim is a
// well-formed empty one (it refuses to join itself), it blocks nothing.
func meaning(l Observed, fingerprint string, partitions int) Observed {
	o := Observed{Record: l.Record.Clone(), Version: l.Version, UID: l.UID, Problem: l.Problem, ClaimUnknown: l.ClaimUnknown, ClaimEmpty: l.ClaimEmpty,
		Finalized: l.Finalized, Terminating: l.Terminating}
	if l.Problem == "" && !l.ClaimUnknown {
		return o
	}
	foreign := l.Fingerprint != "" && l.Fingerprint != fingerprint && knownState(l.State)
	if !foreign {
		o.State = StateJoining
	}
	o.Claim = shard.FullPartitionSet(partitions)
	if foreign && l.ClaimEmpty {
		o.Claim = shard.NewPartitionSet(partitions)
	}
	return o
}

func knownState(s State) bool {
	switch s {
	case StateJoining, StateActive, StateLeaving:
		return true
	}
	return false
}

// peerView holds the peers' Leases: one main Lease per identity (in the
// view, or departed and kept as a tombstone or a void placeholder), each
// with the ghosts of the identity's earlier objects.
type peerView struct {
	self         string // the own identity: its Leases are the ownLease's
	partitions   int
	fingerprint  string
	lease        time.Duration // LeaseDuration
	collectAfter time.Duration // GarbageCollectAfter

	byID        map[string]*peer
	ids         []string // sorted keys of byID
	observation uint64   // count of Observe calls, to find Leases that disappeared
	// decided holds the identities whose main Lease the current Observe
	// has settled (reused between calls).
	decided map[string]bool
	scratch []string // reused to compute the ring's members without allocating
}

func newPeerView(cfg Config, fingerprint string) peerView {
	return peerView{
		self: cfg.Identity, partitions: cfg.Ring.Partitions, fingerprint: fingerprint,
		lease: cfg.LeaseDuration, collectAfter: cfg.GarbageCollectAfter,
		byID: map[string]*peer{},
	}
}

// observe takes in the peers' Leases of one Observe (the own identity's
// are skipped): those in the view first, each its identity's main Lease;
// then the departed ones, last departure first: the last one of an
// identity not in the view is its main Lease (it may still exist,
// relabelled); every other object of that identity is gone for good (a
// later one of the same name exists or existed), and its claim counts as
// a ghost. So does a departure of another object than the one last seen
// in the view (see isGhost). A Lease in force that is absent becomes a
// tombstone.
func (v *peerView) observe(now time.Time, leases []Observed) {
	v.observation++
	if v.decided == nil {
		v.decided = map[string]bool{}
	}
	clear(v.decided)
	changed := false
	for _, l := range leases {
		if l.Identity == "" || l.Gone || l.Identity == v.self {
			continue // not a member's Lease (the shell should not pass it), departed, or the own
		}
		if v.decided[l.Identity] {
			continue // an informer holds one object per name; keep the first
		}
		v.decided[l.Identity] = true
		changed = v.observePeer(now, l) || changed
	}
	for i := len(leases) - 1; i >= 0; i-- {
		l := leases[i]
		if l.Identity == "" || !l.Gone || l.Identity == v.self {
			continue
		}
		if !v.decided[l.Identity] && !v.isGhost(l) {
			v.decided[l.Identity] = true
			changed = v.observePeer(now, l) || changed
			continue
		}
		changed = v.observeGhost(now, l) || changed
	}
	for id, p := range v.byID {
		switch {
		case p.seen == v.observation:
		case p.void || p.obs.Claim.IsEmpty():
			// Nothing in force: a voided Lease (collected, say) or one
			// whose holder published an empty claim; but a ghost still
			// is.
			changed = v.drop(now, id) || changed
		case !p.gone:
			// Absence is not death: a Lease deleted or relabelled by
			// hand while its holder runs must keep blocking its claim
			// until the holder, which fences when it sees its Lease gone,
			// has stopped, or is proven dead (judgeProofs voids it).
			p.gone, p.lastChange, p.collected = true, now, true
		}
	}
	if changed {
		v.ids = v.ids[:0]
		for id := range v.byID {
			v.ids = append(v.ids, id)
		}
		slices.Sort(v.ids)
	}
}

// isGhost reports whether the departed l is not its identity's main Lease
// although no Lease of the identity is in the view: the Lease last seen in
// the view is another object, whose departure is not reported (a relist
// missed it, or its report lapsed; it stays as a tombstone), or l is
// already a ghost. A departure that old may be reported again after a
// newer object was seen: it must not replace it.
func (v *peerView) isGhost(l Observed) bool {
	p := v.byID[l.Identity]
	if p == nil || sameObject(p.obs, l) {
		return false
	}
	if !p.gone {
		return true
	}
	return slices.ContainsFunc(p.ghosts, func(g *peer) bool { return sameObject(g.obs, l) })
}

// observePeer records l as the main Lease of its identity; it reports
// whether the set of peers changed.
func (v *peerView) observePeer(now time.Time, l Observed) (changed bool) {
	old, ok := v.byID[l.Identity]
	switch {
	case ok && l.Gone && old.gone && sameObject(old.obs, l) && (old.obs.Version == l.Version || !old.void):
		// Still gone: the tombstone (or its voiding) stands, and its
		// clock too; a departed state this core never saw adds its
		// claim. (A voided one that departed again in another state
		// came back in between: it starts afresh.)
		old.seen = v.observation
		if m := v.meaning(l); !old.void && m.Claim.Size() == old.obs.Claim.Size() {
			old.obs.Claim = old.obs.Claim.Union(m.Claim)
		}
		return false
	case ok && !l.Gone && l.Version != "" && old.obs.Version == l.Version:
		// Unchanged. (A tombstone may still be in the view: a direct read
		// found it gone before the watch showed it; its clock stands.)
		old.seen = v.observation
		return false
	}
	np := &peer{
		obs:        v.meaning(l),
		lastChange: now,
		seen:       v.observation,
		gone:       l.Gone,
		collected:  l.Gone, // nothing to delete
	}
	if ok {
		np.history, np.placed = old.history, old.placed
		if latest, stale := v.staleObservation(old, l); stale {
			// An older state of the Lease after a newer one: it counts
			// as a change (the Lease is live), but what it says is the
			// newest state seen; an older claim may lack partitions the
			// holder has claimed and activated since.
			np.obs = Observed{Record: latest.Clone(), Version: l.Version, UID: l.UID}
		}
		np.ghosts = v.ghostOf(now, old, np)
	}
	if np.obs.State == StateJoining {
		np.joiningSince = now
		if ok && old.obs.State == StateJoining && old.obs.Incarnation == np.obs.Incarnation && !old.joiningSince.IsZero() {
			np.joiningSince = old.joiningSince
		}
	}
	np.history.record(l)
	if l.Gone && (np.obs.Claim.IsEmpty() || ok && old.void && old.obs.Incarnation == l.Incarnation && sameObject(old.obs, l)) {
		// Left with nothing in force, or after its last claim was
		// voided (a Lease garbage-collected, say; another object of the
		// name may carry a later claim): no tombstone, but an earlier
		// object's claim may still be in force as a ghost. The record
		// stays, void, while the departure is reported (and carries the
		// ghosts); observe drops it once neither is left.
		if !ok {
			return false
		}
		np.void = true
	}
	v.byID[l.Identity] = np
	return !ok
}

// observeGhost records l, the departed state of an object of l.Identity
// other than its main Lease, as a ghost; it reports whether the set of
// peers changed.
func (v *peerView) observeGhost(now time.Time, l Observed) (changed bool) {
	p := v.byID[l.Identity]
	if p != nil && sameObject(p.obs, l) {
		return false // the main Lease's own departure, or a newer state of it
	}
	m := v.meaning(l)
	if m.Claim.IsEmpty() {
		return false
	}
	// The same incarnation wrote the Lease now in the view, a later
	// object: its claim there covers everything it still runs (or, if that
	// Lease was voided, it has stopped).
	covered := p != nil && p.seen == v.observation && !p.gone && p.obs.Incarnation == m.Incarnation
	if p == nil {
		// The main Lease left with nothing in force: a void placeholder
		// carries the ghost.
		p = &peer{obs: m, lastChange: now, seen: v.observation, gone: true, void: true, collected: true}
		p.obs.Claim = shard.NewPartitionSet(m.Claim.Size())
		v.byID[l.Identity] = p
		changed = true
	}
	p.ghosts = p.ghosts.add(now, v.lease, m, v.observation, covered)
	return changed
}

// meaning is what a peer's Lease counts as on this ring (see meaning).
func (v *peerView) meaning(l Observed) Observed { return meaning(l, v.fingerprint, v.partitions) }

// staleObservation reports whether l, a state of old's identity, is older
// than one this core has already seen of the same writer, and returns the
// newest one seen. A watch delivers in etcd order, so this should not
// happen; a watch that reorders events, or a relist served by a lagging
// API server, would otherwise show a claim dropped that was added back
// since, and a holder active on it would look free.
func (v *peerView) staleObservation(old *peer, l Observed) (latest Record, stale bool) {
	if trustWatchOrder || !wellFormed(l) {
		return Record{}, false
	}
	return old.history.newer(l)
}

// ghostOf returns the ghosts that stay in force when next replaces old as
// the Lease of one identity: old's own, plus old's claim when another
// incarnation created next afresh while old's claim counted. A takeover is
// an update of the same object (same UID), which its writer makes only
// after confirming old's version expired: that leaves no ghost.
func (v *peerView) ghostOf(now time.Time, old, next *peer) ghostList {
	ghosts := old.ghosts
	recreated := old.gone || old.obs.UID == "" || old.obs.UID != next.obs.UID
	if !old.void && !old.obs.Claim.IsEmpty() && old.obs.Incarnation != next.obs.Incarnation && recreated {
		ghosts = ghosts.add(now, v.lease, old.obs, 0, false)
	}
	return ghosts
}

// drop forgets the Lease of id. While ghosts of the identity are in force
// (or still reported), its record stays as a void placeholder that carries
// them: a Lease gone with nothing in force must not take an earlier
// object's claim with it. It reports whether the record was deleted.
func (v *peerView) drop(now time.Time, id string) (deleted bool) {
	p := v.byID[id]
	if p == nil {
		return false
	}
	v.pruneGhosts(now, p)
	if len(p.ghosts) == 0 {
		delete(v.byID, id)
		return true
	}
	p.gone, p.void, p.collected, p.confirming = true, true, true, false
	return false
}

// pruneGhosts forgets p's ghosts that count nothing any more and were not
// reported by the latest Observe.
func (v *peerView) pruneGhosts(now time.Time, p *peer) {
	p.ghosts = p.ghosts.prune(now, v.lease, v.observation)
}

// confirmed takes in the direct read of id's Lease asked for by Confirm:
// found is false when it does not exist, current is its resourceVersion.
func (v *peerView) confirmed(now time.Time, id, current string, found bool) {
	p := v.byID[id]
	if p == nil || !p.confirming {
		return
	}
	p.confirming = false
	switch JudgeConfirm("", p.obs.Version, LeaseRead{Found: found, Version: current}) {
	case ConfirmGone:
		if !p.gone {
			// Absence is not death: the Lease looked expired through a
			// watch that lagged, and has been deleted or relabelled since
			// (by hand, say) while its holder may still run and not have
			// noticed yet. It becomes a tombstone from now, voided only
			// by a later read that finds it still gone a LeaseDuration on.
			p.gone, p.lastChange, p.collected = true, now, true
			return
		}
		p.void = true
	case ConfirmSilent:
		p.void = true
	case ConfirmAlive:
		// The Lease moved on and the watch has not shown it yet: the
		// holder is alive. Wait another LeaseDuration before judging
		// again.
		p.lastChange = now
	}
}

// confirmFailed: the direct read of id's Lease failed; judge asks again.
func (v *peerView) confirmFailed(id string) {
	if p := v.byID[id]; p != nil {
		p.confirming = false
	}
}

// judge forgets expired ghosts, asks to confirm the Leases that look
// expired and hold claims, and, once this replica holds its own Lease
// (held), to garbage-collect Leases expired for long.
func (v *peerView) judge(now time.Time, held bool, r *Ready) {
	for _, id := range v.ids {
		p := v.byID[id]
		v.pruneGhosts(now, p) // expired by observed time alone: see ghostList
		if p.liveAt(now, v.lease) {
			continue
		}
		if !p.void && !p.confirming && !p.obs.Claim.IsEmpty() {
			p.suspect(id, r)
		}
		if held && !p.collected && now.Sub(p.lastChange) >= v.collectAfter {
			p.collected = true
			r.GarbageCollect = append(r.GarbageCollect, LeaseRef{Identity: id, Version: p.obs.Version})
		}
	}
}

// member reports whether p is a live active member of this ring, as the
// ring is placed: a void Lease is not live, unless its holder was proven
// dead before it expired.
//
// An incarnation returning to the place its predecessor left (Record.
// Returning, state joining) is a member only while this view still has
// that identity placed: one that comes back after its predecessor's Lease
// expired here, and its partitions moved, joins like any other replica,
// so that its peers keep running them until it is active.
func (v *peerView) member(now time.Time, p *peer) bool {
	if p.gone || p.void || !p.liveAt(now, v.lease) || !RingMember(p.obs, v.fingerprint) {
		return false
	}
	return p.obs.State != StateJoining || p.placed
}

// members returns the ring's members as this view shows them: the live
// active peers of this fingerprint, and self when selfActive, sorted. The
// slice is reused by the next call.
func (v *peerView) members(now time.Time, selfActive bool) []string {
	view := v.scratch[:0]
	for _, id := range v.ids {
		p := v.byID[id]
		p.placed = v.member(now, p)
		if p.placed {
			view = append(view, id)
		}
	}
	if selfActive {
		i, _ := slices.BinarySearch(view, v.self)
		view = slices.Insert(view, i, v.self)
	}
	v.scratch = view
	return view
}

// maxWeights returns merged with the weights published by every live
// Lease of this fingerprint merged in, the largest per partition.
func (v *peerView) maxWeights(now time.Time, merged assign.Weights) assign.Weights {
	for _, id := range v.ids {
		p := v.byID[id]
		if !p.gone && !p.void && p.liveAt(now, v.lease) && p.obs.Fingerprint == v.fingerprint {
			merged = assign.MaxWeights(merged, p.obs.Weights, v.partitions)
		}
	}
	return merged
}

// foreignActive returns a live active peer of another fingerprint, if any:
// this replica does not join while one is active.
func (v *peerView) foreignActive(now time.Time) *peer {
	for _, id := range v.ids {
		p := v.byID[id]
		if !p.gone && !p.void && p.liveAt(now, v.lease) && p.obs.State == StateActive && p.obs.Fingerprint != v.fingerprint {
			return p
		}
	}
	return nil
}

// listing reports whether id is a live active member that reports its
// cache (Record.Warm) without partition p yet: a successor that is still
// listing p's objects.
func (v *peerView) listing(now time.Time, id string, p int) bool {
	q := v.byID[id]
	if q == nil || q.gone || q.void || q.obs.Terminating || !q.liveAt(now, v.lease) || q.obs.State != StateActive ||
		q.obs.Fingerprint != v.fingerprint || q.obs.Warm.Size() != v.partitions {
		return false
	}
	return !q.obs.Warm.Has(p)
}

// awaitingJoiner reports whether a peer is about to join, for a formation
// that leaves every partition unclaimed a moment longer (see
// Core.awaitingJoiners).
func (v *peerView) awaitingJoiner(now time.Time) bool {
	for _, id := range v.ids {
		if v.joinerAwaited(now, v.byID[id]) {
			return true
		}
	}
	return false
}

// joinerAwaited: p is a live peer of this configuration, claiming nothing,
// first seen joining less than joinerPatience ago.
func (v *peerView) joinerAwaited(now time.Time, p *peer) bool {
	return !p.gone && !p.void && !p.obs.Terminating && p.liveAt(now, v.lease) && p.obs.State == StateJoining && p.obs.Claim.IsEmpty() &&
		p.obs.Fingerprint == v.fingerprint && !p.joiningSince.IsZero() && now.Before(v.joinerAwaitedUntil(p))
}

// joinerAwaitedUntil is when awaitingJoiner stops waiting for p:
// joinerPatience (1.5×LeaseDuration) after this core first saw it joining.
// A joiner activates LeaseDuration after its own first look at the ring,
// which may come a little after this core saw its Lease: replicas
// started together see one another in their first lists, so with a window
// of exactly LeaseDuration the first to activate stopped waiting for the
// others a few milliseconds before they activated, claimed a two-member
// share and handed a third of it on at once (measured: 359 of 271
// partitions listed by a 3-replica sharded fleet, the largest replica at
// 1.5× its share's memory). Half a LeaseDuration covers that skew with
// room for a slow first list.
func (v *peerView) joinerAwaitedUntil(p *peer) time.Time {
	return p.joiningSince.Add(v.lease + v.lease/2)
}

// block adds the claims in force of every peer, tombstones included
// (blockMain, tombstone.go), and its ghosts to b. Every Lease counts,
// whatever its state, until it is confirmed expired or its writer proven
// dead.
func (v *peerView) block(now time.Time, deaths proofs, b *blockers) {
	for _, id := range v.ids {
		p := v.byID[id]
		blockMain(p, b)
		p.ghosts.block(now, v.lease, deaths, b)
	}
}

// tombstones returns the Leases that left the view while their claim was
// in force and whose claim still counts, in their last observed state,
// sorted by identity.
func (v *peerView) tombstones() []Observed {
	var out []Observed
	for _, id := range v.ids {
		if p := v.byID[id]; p != nil && p.gone && !p.void {
			out = append(out, p.obs)
		}
	}
	return out
}

// nextDeadline considers when a peer or ghost would look expired, when a
// joiner stops being awaited, and when a Lease is due for collection.
func (v *peerView) nextDeadline(now time.Time, consider func(time.Time)) {
	for _, p := range v.byID {
		consider(p.lastChange.Add(v.lease))
		if v.joinerAwaited(now, p) {
			consider(v.joinerAwaitedUntil(p))
		}
		p.ghosts.nextDeadline(v.lease, consider)
		if !p.collected {
			consider(p.lastChange.Add(v.collectAfter))
		}
	}
}
