package handoffsim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/kshard/kshard/internal/handoff"
)

// The member finalizer (membership.FinalizerMember), in a world whose fleet
// writes it (simParams.finalizers): a Lease deleted by hand stays,
// terminating, until its holder has stopped everything and removes the
// finalizer (Ready.Finalize) or a peer collects it once expired; a peer
// collects with a write that removes the finalizer, sets state leaving and
// empties the claim (membership.Released), then a delete; a graceful leave
// removes the finalizer, then deletes. And the join scan: after its first
// Observe the shell lists every Lease of the namespace; with no finalized
// Lease outside the ring, it reports the scan clean (Core.JoinScanClean)
// once its informer holds every ring Lease the scan listed, and the core
// may skip its join wait. A fleet without the finalizer is an older kshard:
// it has no join scan, so its processes always wait.

// Join scan states of a process.
const (
	scanNone    = iota // not listed yet
	scanListed         // clean, waiting for the informer to hold what it listed
	scanClean          // reported
	scanUnclean        // a finalized Lease outside the ring: never reported
	scanStarted        // in flight
)

// collect is a peer's GarbageCollect of identity's Lease at rv as
// membership.Member.DeletePeer does it, its first request landing now. A Lease
// with the member finalizer is first released over rv (membership.Released: the
// finalizer removed, state leaving, the claim emptied), which deletes a
// terminating one; then the version that wrote, or rv for a Lease without
// the finalizer, is deleted. Peers may observe the released version between.
func (p *proc) collect(identity string, rv uint64) {
	w := p.w
	cur := w.server.leases[identity]
	if cur == nil || cur.rv != rv {
		return // changed since it was judged: the peer came back
	}
	if !cur.finalized {
		p.collectDelete(identity, rv)
		return
	}
	nv, deleted, ok := w.server.release(identity, rv, len(w.runningBy))
	if !ok {
		return
	}
	// The holder's claims were void: like a deletion, this write drops
	// them (thirdParty), and the confirming read checked that it had
	// stopped.
	if deleted {
		w.collections++
		w.collectedTerminating++
		if cur.damaged {
			// Released empties the claim but does not mend the rest:
			// the deleted state still reads as a claim of everything.
			w.tombstoneLeft()
		}
		w.tracef("%s garbage-collected %s@%d: terminating, released", p, identity, rv)
		w.afterMutation(identity, true)
		return
	}
	w.tracef("%s garbage-collects %s@%d: released (leaving, claim emptied, no finalizer) rv=%d", p, identity, rv, nv)
	w.afterMutation(identity, true)
	var next func()
	next = func() {
		if !p.alive || p.cutOff || p.frozen(next) {
			return
		}
		w.after(w.latency(), func() { p.collectDelete(identity, nv) })
	}
	w.after(w.latency(), next)
}

// collectDelete is the collection's conditional delete of identity's Lease
// at rv, landing now.
func (p *proc) collectDelete(identity string, rv uint64) {
	w := p.w
	cur := w.server.leases[identity]
	if !w.server.del(identity, rv) {
		return
	}
	if w.server.leases[identity] == nil {
		w.collections++
		if cur.damaged || !cur.rec.Claim.IsEmpty() {
			// No finalizer, so not released first; or malformed, which
			// Released does not mend.
			w.tombstoneLeft()
		}
	}
	w.tracef("%s garbage-collected %s@%d", p, identity, rv)
	w.afterMutation(identity, true)
}

// tombstoneLeft accounts for a collection whose deleted state still counts
// as a claim: a peer that had not judged the Lease expired keeps a
// tombstone, a delay of up to LeaseDuration and a confirming read, as after
// a deletion by hand (internal/handoff's package documentation, Liveness).
// After the faults, liveness counts from here.
func (w *world) tombstoneLeft() {
	if !w.quiet {
		return
	}
	w.settledAt = max(w.settledAt, w.now)
	w.end = max(w.end, w.now+w.p.livenessBound()+time.Second)
}

var errConflict = errors.New("handoffsim: conflict (the Lease is not at that version)")

// finalizeOwn removes the member finalizer from the own Lease at version
// (Ready.Finalize), which completes its deletion, as a write that fails,
// times out (landing or not) or is cut off like a renew; done gets the
// outcome on the process's side.
func (p *proc) finalizeOwn(version string, done func(err error)) {
	w := p.w
	rv, _ := strconv.ParseUint(version, 10, 64)
	respondAfter := func(d time.Duration, err error) {
		var respond func()
		respond = func() {
			if !p.alive || p.frozen(respond) {
				return
			}
			done(err)
		}
		w.after(d, respond)
	}
	land := func() bool {
		_, deleted, ok := w.server.unfinalize(p.id, rv)
		if !ok {
			return false
		}
		w.tracef("%s removes the finalizer of its Lease at rv %d: deleted %v", p, rv, deleted)
		if deleted {
			w.finalizes++
			if p.alive && !p.paused() && !p.running().IsEmpty() {
				w.fail("%s finalizes its Lease while running %v", p, p.running())
			}
		}
		w.afterMutation(p.id)
		return true
	}
	roll := w.rng.IntN(100)
	if w.quiet {
		roll = 100
	}
	w.tracef("%s send finalize rv=%d roll=%d", p, rv, roll)
	timedOut := errors.New("handoffsim: finalize timed out")
	switch {
	case p.cutOff || roll < w.p.writeFailPct:
		respondAfter(w.latency(), errors.New("handoffsim: finalize failed"))
	case roll < w.p.writeFailPct+w.p.writeLostPct:
		if w.rng.IntN(2) == 0 {
			w.after(w.between(0, w.p.clientTimeout), func() { land() })
		}
		respondAfter(w.p.clientTimeout, timedOut)
	default:
		w.after(w.latency(), func() {
			var err error
			if !land() {
				err = errConflict
			}
			respondAfter(w.latency(), err)
		})
	}
}

// finalize carries out Ready.Finalize for the built-in shell, one at a
// time; the core asks again while it holds.
func (p *proc) finalize(ref handoff.LeaseRef) {
	if p.finalizing || p.released {
		return
	}
	p.finalizing = true
	p.finalizeOwn(ref.Version, func(err error) {
		p.finalizing = false
		if err == nil {
			p.recreate()
		}
		p.step()
	})
}

// recreate creates the own Lease afresh after Finalize deleted it; a write
// in flight finds it gone (writeConflict) and does the same.
func (p *proc) recreate() {
	if !p.writing {
		p.baseRV = 0
	}
	p.sendWrite()
}

// Finalize removes the member finalizer from the own Lease if it still has
// version (membership.Member.Finalize): its deletion completes, and the Lease is
// created afresh. It blocks on the world: call it from a task.
func (p *proc) Finalize(ctx context.Context, version string) error {
	var err error
	ok := p.block(ctx, func(wake func()) {
		p.finalizeOwn(version, func(e error) { err = e; wake() })
	})
	if !ok {
		return errStopped
	}
	if err == nil && p.alive && !p.released {
		p.recreate()
	}
	return err
}

// JoinScanClean reports that the join scan came out clean and the
// informer holds every ring Lease it listed (membership.Member.JoinScanClean).
func (p *proc) JoinScanClean() bool { return p.scan == scanClean }

// joinScan lists every Lease of the namespace, relabelled ones included,
// once after the first Observe; a read cut off from the API server times
// out and is retried.
func (p *proc) joinScan() {
	w := p.w
	if !p.alive || p.frozen(p.joinScan) {
		return
	}
	p.scan = scanStarted
	if p.cutOff {
		w.after(w.p.clientTimeout+w.between(100*time.Millisecond, time.Second), p.joinScan)
		return
	}
	w.after(w.latency(), func() {
		// The rule membership.Member's scan follows (handoff.JudgeJoinScan),
		// over the Leases in name order.
		names := slices.Sorted(maps.Keys(w.server.leases))
		scanned := make([]handoff.ScannedLease, len(names))
		for i, name := range names {
			l := w.server.leases[name]
			scanned[i] = handoff.ScannedLease{Name: simRing + "-" + name, Ring: simRing, Finalized: l.finalized}
			if l.relabelled {
				scanned[i].Ring = ""
			}
		}
		scan := handoff.JudgeJoinScan(simRing, scanned)
		clean := scan.Outside < 0
		var uids []uint64
		for _, j := range scan.Members {
			uids = append(uids, w.server.leases[names[j]].uid)
		}
		slices.Sort(uids)
		var respond func()
		respond = func() {
			if !p.alive || p.frozen(respond) {
				return
			}
			if !clean {
				w.uncleanScans++
				p.scan = scanUnclean
				w.tracef("%s join scan: a finalized Lease outside the ring", p)
				return
			}
			w.tracef("%s join scan: clean, ring Lease uids %v", p, uids)
			p.scan, p.scanUIDs = scanListed, uids
			if p.checkScan() {
				p.step()
			}
		}
		w.after(w.latency(), respond)
	})
}

// checkScan reports the scan clean once the informer holds every ring
// Lease it listed (by UID); it reports whether it just did.
func (p *proc) checkScan() bool {
	if p.scan != scanListed {
		return false
	}
	held := make(map[uint64]bool, len(p.cache))
	for _, l := range p.cache {
		if !l.deleted && !l.relabelled {
			held[l.uid] = true
		}
	}
	for _, uid := range p.scanUIDs {
		if !held[uid] {
			return false
		}
	}
	p.scan = scanClean
	p.w.tracef("%s join scan clean: the informer holds every Lease it listed", p)
	if p.shell == nil {
		p.core.JoinScanClean()
	}
	return true
}

// countJoin counts a process that became a member well within a
// LeaseDuration of its first Observe (the join wait skipped), measured on
// its own clock, as the core waits, so that clock rates do not blur it.
func (p *proc) countJoin() {
	w := p.w
	if p.joined || !p.listed || p.core.State() != handoff.StateActive {
		return
	}
	p.joined = true
	if d := p.local().Sub(p.firstObserved); d < w.p.leaseDuration*9/10 {
		switch {
		case !w.p.finalizers:
			w.fail("%s joined %v after its first Observe in a fleet without finalizers (no join scan)", p, d)
		case p.firstUnfinalized:
			w.fail("%s joined %v after a first view with a Lease without the finalizer", p, d)
		}
		w.fastJoins++
		w.tracef("%s joined %v after its first Observe (fast join; finalizers %v)", p, d, w.p.finalizers)
	}
}
