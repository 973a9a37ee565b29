package handoff

import "time"

// The own Lease: what this incarnation knows of its identity's Lease. It
// holds the Lease once it has seen its own write there. Before that, a
// Lease written by another incarnation is the previous incarnation's
// (prior): waited out like a peer's, confirmed expired (or its writer
// proven dead), then taken over. Once held, another incarnation's write is
// a duplicate identity, and a Lease gone, terminating or damaged is lost:
// the replica fences until it is whole again ("Own Lease lost" in the
// package documentation).

// ownLease is the own identity's Lease as this incarnation judges it.
type ownLease struct {
	identity, incarnation string
	fingerprint           string
	partitions            int
	lease                 time.Duration // LeaseDuration

	// current is the own Lease as last observed, when this incarnation
	// wrote it; nil otherwise.
	current *Observed
	held    bool  // this incarnation's Lease has been observed at least once
	prior   *peer // the Lease written by another incarnation, not taken over yet
	// duplicate is the incarnation that overwrote this one's Lease after
	// it held it, if any: the core stops.
	duplicate string
	// lost: this incarnation held its Lease and it is now gone from the
	// view (deleted or relabelled by someone else), terminating or
	// damaged. The replica fences at once and stays fenced until a renew
	// sent after lostAt has succeeded and the Lease is observed whole
	// again.
	lost   bool
	lostAt time.Time
	repair string // version of the damaged own Lease the shell may overwrite
	// takeOver: the shell may overwrite the own Lease at this version
	// (Ready.TakeOver), until the own incarnation is observed in it.
	takeOver *LeaseRef
	// terminating is the version of the own Lease, held by this
	// incarnation, that someone else is deleting (Terminating), if any.
	terminating string
	// ghosts: claims of another incarnation of this identity (prior)
	// whose Lease left the view (deleted or relabelled by hand, say), or
	// gave way to another object or another incarnation's write, while
	// they were in force, not voided by a confirmed expiry (priorLeft), and
	// claims of another incarnation that a reported departure of the own
	// Lease carried (observe). Absence is not death for them either: that
	// process may still run them (two processes of one identity, or a
	// replacement whose predecessor still runs) until it sees its Lease
	// gone and fences, so each counts for LeaseDuration of observed time
	// from when this core learnt of it, like a peer's ghost.
	ghosts ghostList
	// returnedAt: when this incarnation found its Lease left for it by
	// the previous one (leftForReturn) and took it over at once; zero
	// otherwise. It keeps that place in the ring while it joins
	// (Core.updateReturning).
	returnedAt time.Time
}

func newOwnLease(cfg Config, fingerprint string) ownLease {
	return ownLease{identity: cfg.Identity, incarnation: cfg.Incarnation, fingerprint: fingerprint,
		partitions: cfg.Ring.Partitions, lease: cfg.LeaseDuration}
}

// observe takes in the own identity's Leases of an Observe (the
// observation-th): the first one in the view, and the departed ones, last
// departure first.
func (o *ownLease) observe(now time.Time, observation uint64, leases []Observed) {
	seen, priorDeparted := false, false
	for _, l := range leases {
		if l.Identity == o.identity && !l.Gone {
			seen = true
			o.observeOne(now, l)
			break
		}
	}
	for i := len(leases) - 1; i >= 0; i-- {
		l := leases[i]
		if l.Identity != o.identity || !l.Gone || l.Incarnation == o.incarnation {
			continue
		}
		// The own Lease as it left the view is absent; another
		// incarnation's claim in it stays in force (ghosts), even if this
		// core never saw it in the view.
		if m := meaning(l, o.fingerprint, o.partitions); !m.Claim.IsEmpty() {
			o.ghosts = o.ghosts.add(now, o.lease, m, observation, false)
		}
		// The previous incarnation's Lease left in this state, newer than
		// any seen of it (its claim emptied when a peer collected it,
		// say): that claim, not an older one, is what stays in force.
		priorDeparted = priorDeparted || o.prior != nil && l.Incarnation == o.prior.obs.Incarnation && sameObject(o.prior.obs, l)
	}
	if !seen {
		o.terminating = ""
		o.current = nil
		if !priorDeparted {
			o.priorLeft(now, nil)
		}
		o.prior = nil
		if o.held {
			o.lose(now) // deleted or relabelled by someone else
		}
	}
}

// observeOne takes in the own identity's Lease as the view shows it.
func (o *ownLease) observeOne(now time.Time, l Observed) {
	// A Lease without an incarnation is damaged whatever the shell says: no
	// kshard process writes one.
	if l.Problem != "" || l.ClaimUnknown || l.Incarnation == "" {
		o.current = nil
		if o.held {
			// Damaged by someone else: this process holds the identity
			// and the incarnation, so it fences and rewrites the Lease
			// over that version.
			o.lose(now)
			o.repair = l.Version
			return
		}
		// A damaged Lease of an earlier incarnation is waited out and
		// taken over like an intact one.
		if o.prior == nil || o.prior.obs.Version != l.Version {
			next := &peer{obs: meaning(l, o.fingerprint, o.partitions), lastChange: now}
			o.priorLeft(now, next)
			o.prior = next
			o.takeOver = nil
		}
		return
	}
	if l.Incarnation == o.incarnation {
		own := Observed{Record: l.Record.Clone(), Version: l.Version}
		o.current, o.held, o.prior = &own, true, nil
		o.repair, o.takeOver, o.terminating = "", nil, ""
		if l.Terminating {
			// Deleted by someone else; the finalizer keeps it in every
			// view. Lost until it is gone and created afresh: fence, and
			// remove the finalizer once nothing runs (Ready.Finalize).
			o.lose(now)
			o.terminating = l.Version
			return
		}
		o.lost = false
		return
	}
	o.current = nil
	if o.held {
		// The watch delivers in etcd order and this incarnation's own write
		// was seen before: a later write by someone else is a live duplicate,
		// not a stale event.
		o.duplicate = l.Incarnation
		return
	}
	if o.prior != nil && l.Version != "" && o.prior.obs.Version == l.Version {
		return
	}
	next := &peer{obs: Observed{Record: l.Record.Clone(), Version: l.Version, UID: l.UID}, lastChange: now}
	o.priorLeft(now, next)
	o.prior = next
	o.takeOver = nil
}

// priorLeft keeps the claim of the previous incarnation's Lease (prior)
// in force as a ghost when that Lease gives way to next (nil: it left the
// view) without its expiry having been confirmed (void): that process may
// still run what it claimed. Only a newer state of the same incarnation on
// the same object (or, without UIDs to tell objects apart, of the same
// incarnation) leaves none: its claim there covers what it runs. Another
// incarnation's write over that object, or the object deleted or created
// afresh, leaves the old claim in force.
func (o *ownLease) priorLeft(now time.Time, next *peer) {
	old := o.prior
	if old == nil || old.void || old.obs.Claim.IsEmpty() {
		return
	}
	if next != nil && next.obs.Incarnation == old.obs.Incarnation &&
		(sameObject(old.obs, next.obs) || old.obs.UID == "" && next.obs.UID == "") {
		return
	}
	o.ghosts = o.ghosts.add(now, o.lease, old.obs, 0, false)
}

// lose records that the own Lease, once held, is gone or damaged: the
// replica fences in the next step, whatever its renews say, because peers
// may count its claims from a tombstone only for LeaseDuration.
func (o *ownLease) lose(now time.Time) {
	if !o.lost {
		o.lost, o.lostAt = true, now
	}
}

// confirmed takes in the direct read of the own Lease asked for to judge
// the previous incarnation's: found is false when it does not exist,
// current is its resourceVersion.
func (o *ownLease) confirmed(now time.Time, current string, found bool) {
	p := o.prior
	if p == nil || !p.confirming {
		return
	}
	p.confirming = false
	if JudgeConfirm("", p.obs.Version, LeaseRead{Found: found, Version: current}) != ConfirmAlive {
		p.void = true
		return
	}
	// The Lease moved on and the watch has not shown it yet: its writer is
	// alive. Wait another LeaseDuration before judging again.
	p.lastChange = now
}

// confirmFailed: the direct read failed; judge asks again.
func (o *ownLease) confirmFailed() {
	if o.prior != nil {
		o.prior.confirming = false
	}
}

// judge forgets expired ghosts (observation is the latest Observe's
// count), and asks to confirm the previous incarnation's Lease once it
// looks expired and to take it over once it is void. A previous
// incarnation's Lease is taken over like a dead peer's claims are voided:
// after a confirmed expiry, the shell overwrites it with a write
// conditioned on the very version judged. If that write fails because the
// Lease changed, the watch shows the new version, which is waited out
// afresh. A proven death (judgeProof) voids it at once. A damaged own
// Lease is rewritten over the version seen (repair). A Lease the previous
// incarnation left for this one (leftForReturn) is taken over at once.
func (o *ownLease) judge(now time.Time, observation uint64, r *Ready) {
	o.ghosts = o.ghosts.prune(now, o.lease, observation)
	if p := o.prior; p != nil && !p.void && !p.takingOver && leftForReturn(p.obs) {
		// Left for this incarnation: nothing to wait out.
		p.void = true
		o.returnedAt = now
	}
	if p := o.prior; p != nil && (o.waitedOut(now, p) || p.void) && !p.takingOver {
		if !p.void && !p.confirming {
			p.confirming = true
			r.Confirm = append(r.Confirm, LeaseRef{Identity: o.identity, Version: p.obs.Version})
		}
		if p.void {
			p.takingOver = true
			o.takeOver = &LeaseRef{Identity: o.identity, Version: p.obs.Version}
		}
	}
	if o.repair != "" {
		o.takeOver = &LeaseRef{Identity: o.identity, Version: o.repair}
		o.repair = ""
	}
	if o.takeOver != nil {
		ref := *o.takeOver
		r.TakeOver = &ref
	}
}

// inUse reports whether another incarnation holds the Lease and this one
// may not write it yet: it waits for that Lease to expire.
func (o *ownLease) inUse() bool { return o.prior != nil && !o.prior.takingOver }

// nextDeadline considers when the previous incarnation's Lease and the
// ghosts expire.
func (o *ownLease) nextDeadline(consider func(time.Time)) {
	if o.prior != nil {
		consider(o.prior.lastChange.Add(o.lease))
	}
	o.ghosts.nextDeadline(o.lease, consider)
}
