package handoffsim

import (
	"github.com/kshard/kshard/shard"

	"slices"
	"time"
)

// Faults against two of the core's assumptions (internal/handoff's package
// documentation): clocks that run at different rates, and a watch that
// shows an older state of a peer's Lease after a newer one. The fault loop
// calls assumptionFault; Options turn them on and off.

// DefaultClockSkewPPM is the clock-rate fault of every run unless
// Options.ClockSkewPPM says otherwise: a process's clock runs at 1 ± up to
// 8 %, within the bound the default timing tolerates (ClockRateBound).
const DefaultClockSkewPPM = 80_000

// ClockRateBound is the largest symmetric clock-rate deviation d (each
// clock runs at a rate in [1−d, 1+d]) that the timing tolerates: a holder
// whose clock runs at 1−d stops everything by StopDeadline of its time, a
// voider whose clock runs at 1+d voids it LeaseDuration of its time after
// the holder's last renew was sent, so safety needs
// StopDeadline/(1−d) < LeaseDuration/(1+d), i.e. d < (LD−SD)/(LD+SD):
// 1/11 ≈ 9.1 % with the defaults (SD = 5/6 LD).
func ClockRateBound(t shard.Timing) float64 {
	t = t.WithDefaults()
	ld, sd := float64(t.LeaseDuration), float64(t.StopDeadline())
	return (ld - sd) / (ld + sd)
}

// slowest is d of the slowest clock in the world: how long a process whose
// clock runs slowest takes to see d pass.
func (p simParams) slowest(d time.Duration) time.Duration {
	ppm := max(p.clockSkewPPM, p.maxDriftPPM)
	return time.Duration(float64(d) * 1e6 / float64(1_000_000-ppm))
}

// assumptionFault injects, now and then, one of the faults of this file;
// it reports whether it did. With both faults off it draws nothing from
// the PRNG, so the other faults of a seed stay what they were.
func (w *world) assumptionFault(pick func() *proc) bool {
	if w.p.clockSkewPPM == 0 && !w.p.staleView {
		return false
	}
	switch k := w.rng.IntN(100); {
	case k < 5 && w.p.clockSkewPPM > 0:
		if p := pick(); p != nil {
			w.skewClock(p)
		}
		return true
	case k >= 5 && k < 13 && w.p.staleView:
		if p := pick(); p != nil {
			w.staleView(p)
		}
		return true
	}
	return false
}

// skewClock makes p's clock run at a new rate from now on (skewedRate).
func (w *world) skewClock(p *proc) {
	ppm := w.skewedRate()
	w.clockFaults++
	w.tracef("%s clock rate %+dppm → %+dppm", p, p.driftPPM, ppm)
	p.setClockRate(ppm)
}

// initialClockRate gives a process that starts a clock rate of the
// clock-rate fault (skewedRate) instead of the ordinary drift: a machine's
// clock rate is a property of it, which the fault may change later.
func (w *world) initialClockRate(p *proc) {
	if w.p.clockSkewPPM > 0 {
		p.driftPPM = w.skewedRate()
	}
}

// skewedRate draws a clock rate, in ppm off 1, within ±clockSkewPPM: the
// extremes a third of the time each, so that pairs at the widest ratio are
// common.
func (w *world) skewedRate() int64 {
	d := w.p.clockSkewPPM
	ppm := w.rng.Int64N(2*d+1) - d
	switch w.rng.IntN(3) {
	case 0:
		ppm = -d
	case 1:
		ppm = d
	}
	return ppm
}

// setClockRate changes the rate of p's clock from now on without a jump.
func (p *proc) setClockRate(ppm int64) {
	p.clockL0 = p.local().Sub(simEpoch) - p.offset
	p.clockT0, p.driftPPM = p.w.now, ppm
	if p.alive && p.wakeAt != 0 {
		// The pending wake-up was converted at the old rate.
		p.wakeAt = 0
		p.scheduleWake()
	}
}

// staleView makes p's informer show an older state of one peer's Lease
// object than it has shown already, written by the same incarnation
// (unless staleAcross), as a watch that delivered an old event
// after a newer one would (or a relist served by a lagging API server, for
// that object). The stale state stays until the next write of that Lease
// reaches p or the watch catches up.
func (w *world) staleView(p *proc) {
	if p.cutOff || p.paused() || w.now < p.stallUntil {
		return
	}
	var ids []string
	for id, l := range p.cache {
		if id != p.id && !l.deleted && !l.relabelled {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	id := ids[w.rng.IntN(len(ids))]
	cur := p.cache[id]
	var older []*storedLease // earlier states of the object, one per Record
	for _, e := range w.server.log[:p.cursor] {
		l := e.lease
		if e.identity != id || l == nil || l.uid != cur.uid || l.rv >= cur.rv || l.relabelled || l.rec.Equal(cur.rec) ||
			l.rec.Incarnation != cur.rec.Incarnation && !w.p.staleAcross {
			continue
		}
		if n := len(older); n > 0 && older[n-1].rec.Equal(l.rec) {
			continue
		}
		older = append(older, l)
	}
	if len(older) == 0 {
		return
	}
	if w.p.staleAcross {
		// Measuring the undefended case: prefer earlier incarnations.
		if across := slices.DeleteFunc(slices.Clone(older), func(l *storedLease) bool { return l.rec.Incarnation == cur.rec.Incarnation }); len(across) > 0 {
			older = across
		}
	}
	old := older[w.rng.IntN(len(older))]
	w.staleViews++
	w.tracef("%s STALE VIEW of %s: rv %d %s gen=%d %s claim=%v after rv %d %s gen=%d %s claim=%v", p, id,
		old.rv, old.rec.Incarnation, old.rec.Generation, old.rec.State, old.rec.Claim,
		cur.rv, cur.rec.Incarnation, cur.rec.Generation, cur.rec.State, cur.rec.Claim)
	p.cache[id] = old
	p.observeCache()
	// The watch catches up (it replays what followed the old state): the
	// newer state is back within a few seconds, unless a later write of
	// the Lease has reached p first.
	var catchUp func()
	catchUp = func() {
		if !p.alive || p.cache[id] != old {
			return
		}
		if p.paused() || p.cutOff || w.now < p.stallUntil {
			w.after(w.between(100*time.Millisecond, time.Second), catchUp)
			return
		}
		// The latest state delivered (an earlier stale view's catch-up
		// may be pending for an older one).
		for i := p.cursor - 1; i >= 0; i-- {
			if e := w.server.log[i]; e.identity == id {
				cur = e.lease
				if cur == nil {
					cur = e.gone
				}
				break
			}
		}
		w.tracef("%s view of %s back at rv %d", p, id, cur.rv)
		p.cache[id] = cur
		p.observeCache()
	}
	w.after(w.between(10*time.Millisecond, 3*time.Second), catchUp)
}
