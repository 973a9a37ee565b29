package handoff

import (
	"flag"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Faults against two of the core's assumptions (doc.go), and the tests that
// measure them: clocks that run at different rates, and a watch that shows
// an older state of a peer's Lease after a newer one. The simulated world
// (simworld_test.go) calls assumptionFault from its fault loop.

// simClockSkewPPM is the clock-rate fault of every simulation run unless
// -handoff.clockskew says otherwise: a replica's clock runs at 1 ± up to
// 8 %, within the bound the default timing tolerates (clockRateBound).
const simClockSkewPPM = 80_000

var (
	simClockSkew  = flag.Int64("handoff.clockskew", simClockSkewPPM, "clock-rate fault: a replica's clock runs at 1 ± up to this many ppm (0: no such fault)")
	simAcross     = flag.Bool("handoff.staleacross", false, "stale views may show an earlier incarnation's state (a case the core does not defend against), to measure it")
	simTrustOrder = flag.Bool("handoff.trustorder", false, "turn off the core's defence against stale views of a peer's Lease")
	simClockLong  = flag.Bool("handoff.clocklong", false, "replay (-handoff.seed) as the clock-rate tests run: 30–70 s of faults, no stale views")
	simSweep      = flag.String("handoff.sweep", "", "TestSimulationClockRateSweep: comma-separated clock skews in percent (e.g. 5,8,9,10,12,15,20)")
)

// clockRateBound is the largest symmetric clock-rate deviation d (each
// clock runs at a rate in [1−d, 1+d]) that the timing tolerates: a holder
// whose clock runs at 1−d stops everything by StopDeadline of its time, a
// voider whose clock runs at 1+d voids it LeaseDuration of its time after
// the holder's last renew was sent, so safety needs
// StopDeadline/(1−d) < LeaseDuration/(1+d), i.e. d < (LD−SD)/(LD+SD):
// 1/11 ≈ 9.1 % with the defaults (SD = 5/6 LD).
func clockRateBound(t Timing) float64 {
	ld, sd := float64(t.LeaseDuration), float64(t.StopDeadline())
	return (ld - sd) / (ld + sd)
}

// slowest is d of the slowest clock in the world: how long a replica whose
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

// simResult sums a run of many seeds.
type simResult struct {
	seeds, steps, violations, safety int64
	clockFaults, staleViews          int64
	first                            uint64 // a failing seed, if any
	firstViolation                   string
	elapsed                          time.Duration
}

// simRun runs seeds first… first+n−1 with tweak on GOMAXPROCS goroutines;
// with stopAtSafety it stops at the first safety violation (liveness
// failures are counted but do not stop it).
func simRun(n int64, first uint64, tweak func(*simParams), stopAtSafety bool) simResult {
	start := time.Now()
	var (
		next, steps, violations, safety, seeds atomic.Int64
		clockFaults, staleViews                atomic.Int64
		stop                                   atomic.Bool
		mu                                     sync.Mutex
		res                                    simResult
		wg                                     sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				seed := first + uint64(i)
				w := newWorldWith(seed, false, tweak)
				w.run()
				seeds.Add(1)
				steps.Add(int64(w.steps))
				clockFaults.Add(int64(w.clockFaults))
				staleViews.Add(int64(w.staleViews))
				if w.violation == "" {
					continue
				}
				violations.Add(1)
				isSafety := !strings.Contains(w.violation, "liveness:")
				if isSafety {
					safety.Add(1)
				}
				mu.Lock()
				if res.firstViolation == "" || isSafety && strings.Contains(res.firstViolation, "liveness:") {
					res.first, res.firstViolation = seed, w.violation
				}
				mu.Unlock()
				if isSafety && stopAtSafety {
					stop.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	res.seeds, res.steps, res.violations, res.safety = seeds.Load(), steps.Load(), violations.Load(), safety.Load()
	res.clockFaults, res.staleViews = clockFaults.Load(), staleViews.Load()
	res.elapsed = time.Since(start)
	return res
}

func TestClockRateBound(t *testing.T) {
	got := clockRateBound(Timing{}.WithDefaults())
	if want := 1.0 / 11; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("clockRateBound(defaults) = %v, want 1/11", got)
	}
	if simClockSkewPPM >= int64(got*1e6) {
		t.Fatalf("the CI simulation's clock skew (%d ppm) is not within the bound (%.0f ppm)", simClockSkewPPM, got*1e6)
	}
}

// clockWorld sets up a seed for the clock-rate measurements: clocks within
// ±ppm and faults for 30–70 s instead of 1–21 s, since a wrong expiry needs
// a member that is active while faults go on (a slow-clocked holder cut off
// from the API server, a fast-clocked peer voiding it), and the join wait
// leaves little active time in a short run.
func clockWorld(ppm int64) func(*simParams) {
	return func(p *simParams) {
		p.clockSkewPPM, p.staleView = ppm, false
		p.faultsEnd = 30*time.Second + 2*p.faultsEnd
	}
}

// clockSeeds is how many seeds TestSimulationClockRate runs in CI.
const clockSeeds = 500

// TestSimulationClockRate runs the simulation with clocks within ±8 %
// (simClockSkewPPM, inside clockRateBound) and long fault windows: no
// violation. Replay a failing seed with -handoff.seed=S
// -handoff.clockskew=80000 -handoff.clocklong.
func TestSimulationClockRate(t *testing.T) {
	r := simRun(clockSeeds, *simFirst, clockWorld(simClockSkewPPM), false)
	t.Logf("clock skew ±%d ppm, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d), %d clock-rate changes, in %v",
		simClockSkewPPM, r.seeds, r.steps, r.violations, r.safety, r.clockFaults, r.elapsed.Round(time.Millisecond))
	if r.violations > 0 {
		w := newWorldWith(r.first, true, clockWorld(simClockSkewPPM))
		w.run()
		t.Fatalf("seed %d: %s\ntrace:\n%s", r.first, w.violation, w.trace.String())
	}
}

// TestSimulationFindsClockRateBeyondBound shows the clock-rate fault is
// real: with clocks running at 0.5×–1.5× (far beyond clockRateBound) the
// simulation finds a Lease voided while its holder still runs something,
// or two replicas active at once.
func TestSimulationFindsClockRateBeyondBound(t *testing.T) {
	r := simRun(2000, 0, clockWorld(500_000), true)
	t.Logf("clock skew ±50%%, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d) in %v; first: seed %d: %s",
		r.seeds, r.steps, r.violations, r.safety, r.elapsed.Round(time.Millisecond), r.first, r.firstViolation)
	if r.safety == 0 {
		t.Fatal("no safety violation with clocks at 0.5×–1.5×: the clock-rate fault does not reach the core")
	}
}

// TestSimulationFindsStaleViewsWithoutDefence shows the stale-view fault is
// real: with the core's defence off it finds a violation.
func TestSimulationFindsStaleViewsWithoutDefence(t *testing.T) {
	r := simRun(4000, 0, func(p *simParams) { p.clockSkewPPM, p.staleView, p.trustWatchOrder = 0, true, true }, true)
	t.Logf("stale views, defence off: seeds=%d steps=%d violations=%d (safety %d), %d stale views, in %v; first: seed %d: %s",
		r.seeds, r.steps, r.violations, r.safety, r.staleViews, r.elapsed.Round(time.Millisecond), r.first, r.firstViolation)
	if r.safety == 0 {
		t.Fatal("no safety violation with stale views and the defence off: the stale-view fault does not reach the core")
	}
}

// TestSimulationClockRateSweep measures, for each clock skew given with
// -handoff.sweep (percent), how many seeds of -handoff.seeds (from
// -handoff.first) break the invariant, set up as TestSimulationClockRate:
// 0 below clockRateBound, some beyond it. Not part of CI (make
// sim-assumptions).
func TestSimulationClockRateSweep(t *testing.T) {
	if *simSweep == "" {
		t.Skip("a long measurement: run with -handoff.sweep=5,8,9,10,12,15,20 (make sim-assumptions)")
	}
	t.Logf("clockRateBound with the default timing: ±%.2f%%", 100*clockRateBound(Timing{}.WithDefaults()))
	for _, f := range strings.Split(*simSweep, ",") {
		pct, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || pct < 0 || pct >= 100 {
			t.Fatalf("-handoff.sweep: %q is not a percentage in [0, 100)", f)
		}
		ppm := int64(pct * 1e4)
		r := simRun(int64(*simSeeds), *simFirst, clockWorld(ppm), false)
		t.Logf("clock skew ±%g%%, 30–70 s of faults: seeds=%d steps=%d violations=%d (safety %d) clock faults=%d in %v; e.g. seed %d: %s",
			pct, r.seeds, r.steps, r.violations, r.safety, r.clockFaults, r.elapsed.Round(time.Millisecond), r.first, r.firstViolation)
	}
}
