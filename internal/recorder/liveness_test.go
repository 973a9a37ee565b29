package recorder

import (
	"strings"
	"testing"
	"time"
)

// The traces below use nanosecond times; ms makes them readable.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

func (tr *trace) checkWithin(bound time.Duration) Report {
	tr.t.Helper()
	r, err := CheckWithin(tr.dir, bound)
	if err != nil {
		tr.t.Fatal(err)
	}
	return r
}

func (tr *trace) fault(what string, start, end int64) {
	tr.t.Helper()
	w := tr.writer(Process{}, "harness")
	if err := w.Fault(what, time.Unix(0, start), time.Unix(0, end)); err != nil {
		tr.t.Fatal(err)
	}
}

func TestLivenessMeasuresTheFirstReconcileThatSawTheWrite(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 1, ms(0), ms(10))
	tr.write("ns/a", 2, ms(100), ms(110))
	tr.write("ns/a", 3, ms(200), ms(210))
	tr.reconcile(r0a, "ns/a", 1, ms(20), ms(30))    // gen 1: waited 20ms
	tr.reconcile(r0a, "ns/a", 3, ms(900), ms(1000)) // gens 2 and 3 at once: 890 and 790ms
	tr.reconcile(r1a, "ns/a", 3, ms(950), ms(960))  // ends first among those that saw gen 3
	tr.write("ns/b", 1, ms(0), ms(10))
	tr.write("ns/b", 2, ms(100), ms(110)) // never reconciled: lost, not overdue
	tr.reconcile(r0a, "ns/b", 1, ms(15), ms(50))
	r := tr.checkWithin(500 * time.Millisecond)
	l := r.Liveness
	if l.Reconciled != 4 {
		t.Fatalf("want 4 writes reconciled (ns/a gens 1-3, ns/b gen 1):\n%s", r)
	}
	if l.Worst != 850*time.Millisecond || l.WorstWrite.Key != "ns/a" || l.WorstWrite.Gen != 2 || l.WorstNet != l.Worst {
		t.Fatalf("want the worst wait 850ms, of ns/a gen 2 (acknowledged at 110, first seen by a reconcile ending at 960):\n%s", r)
	}
	if len(l.Overdue) != 2 || l.Overdue[0].Write.Gen != 2 || l.Overdue[1].Write.Gen != 3 || l.Overdue[1].Wait != 750*time.Millisecond {
		t.Fatalf("want gens 2 and 3 of ns/a overdue against 500ms:\n%s", r)
	}
	if len(r.Lost) != 1 || r.OK() {
		t.Fatalf("want ns/b lost and the report not OK:\n%s", r)
	}
	if !strings.Contains(r.String(), "OVERDUE key ns/a: gen 2") {
		t.Fatalf("the report does not list the overdue write:\n%s", r)
	}
	if r := tr.check(); len(r.Liveness.Overdue) != 0 || r.Liveness.Worst != 850*time.Millisecond {
		t.Fatalf("Check (no bound) must measure but find nothing overdue:\n%s", r)
	}
}

func TestLivenessIgnoresUnfinishedAndEarlierGenerations(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 5, ms(0), ms(10))
	tr.reconcile(r0a, "ns/a", 4, ms(20), ms(30)) // saw an older generation
	tr.seq++
	w := tr.writer(r0a, "")
	tr.append(w, Record{Kind: KindStart, Process: r0a, Seq: tr.seq, Key: "ns/a", Gen: 5, Start: ms(40)})
	tr.append(w, Record{Kind: KindEnd, Process: r0a, Seq: tr.seq, Key: "ns/a", Gen: 5, Start: ms(40), End: ms(50), Error: "context canceled"})
	tr.reconcile(r1a, "ns/a", 5, ms(3000), ms(3010))
	r := tr.checkWithin(time.Second)
	if len(r.Liveness.Overdue) != 1 || r.Liveness.Overdue[0].ReconciledAt != ms(3010) {
		t.Fatalf("only the finished reconcile that saw gen 5 counts:\n%s", r)
	}
}

func TestLivenessAReconcileEndingBeforeTheAcknowledgementWaitedNothing(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 1, ms(0), ms(100)) // a slow acknowledgement
	tr.reconcile(r0a, "ns/a", 1, ms(20), ms(40))
	if r := tr.checkWithin(time.Millisecond); r.Liveness.Worst != 0 || !r.OK() {
		t.Fatalf("want a wait of 0:\n%s", r)
	}
}

func TestLivenessFaultsExtendTheAllowance(t *testing.T) {
	tr := newTrace(t)
	// Bound 1s. A 2s outage from 500ms reaches the first write's
	// allowance (0-1s): allowed 3s, so it reaches a second fault at 2.5s
	// (1s long): allowed 4s.
	tr.fault("outage", ms(500), ms(2500))
	tr.fault("pause r-1", ms(2600), ms(3600))
	tr.fault("later", ms(9000), ms(9500)) // beyond every allowance
	tr.write("ns/a", 1, ms(0), ms(0))
	tr.reconcile(r0a, "ns/a", 1, ms(3900), ms(3950)) // 3.95s: within 4s
	tr.write("ns/b", 1, ms(0), ms(0))
	tr.reconcile(r0a, "ns/b", 1, ms(4000), ms(4100)) // 4.1s: overdue
	tr.write("ns/c", 1, ms(5000), ms(5000))
	tr.reconcile(r0a, "ns/c", 1, ms(5100), ms(6200)) // 1.2s, no fault overlaps: overdue
	r := tr.checkWithin(time.Second)
	l := r.Liveness
	if len(l.Overdue) != 2 || l.Overdue[0].Write.Key != "ns/b" || l.Overdue[0].Allowed != 4*time.Second ||
		l.Overdue[1].Write.Key != "ns/c" || l.Overdue[1].Allowed != time.Second {
		t.Fatalf("want ns/b overdue against 4s and ns/c against 1s:\n%s", r)
	}
	if l.WorstNet != 1200*time.Millisecond || l.WorstNetWrite.Key != "ns/c" || l.Worst != 4100*time.Millisecond {
		t.Fatalf("want the worst net wait 1.2s (ns/c; ns/b's is 100ms) and the worst wait 4.1s (ns/b):\n%s", r)
	}
	// Without a bound, a wait is charged the faults it overlapped.
	if r := tr.check(); r.Liveness.WorstNet != 1200*time.Millisecond {
		t.Fatalf("want the worst net wait 1.2s without a bound too:\n%s", r)
	}
}

// A fault longer than the wait it extends leaves a net wait of 0, not a
// negative one (an outage's extension exceeds the wait it caused).
func TestLivenessNetWaitIsNeverNegative(t *testing.T) {
	tr := newTrace(t)
	tr.fault("outage", ms(0), ms(5000))
	tr.write("ns/a", 1, ms(100), ms(100))
	tr.reconcile(r0a, "ns/a", 1, ms(1100), ms(1200)) // waited 1.1s inside a 5s outage
	r := tr.checkWithin(time.Second)
	if l := r.Liveness; l.WorstNet != 0 || l.Worst != 1100*time.Millisecond || len(l.Overdue) != 0 {
		t.Fatalf("want the worst wait 1.1s, its net 0 and nothing overdue:\n%s", r)
	}
}

func TestFaultRefusesAnEndBeforeItsStart(t *testing.T) {
	w, err := OpenNamed(t.TempDir(), "harness")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Now()
	if err := w.Fault("outage", now, now.Add(-time.Second)); err == nil || !strings.Contains(err.Error(), "before it starts") {
		t.Fatalf("want an error naming the order, got %v", err)
	}
}

func TestLivenessWaitsStartAtTheRingsFirstActivation(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 1, ms(0), ms(10)) // created before any replica ran
	tr.ring(r0a, KindActivate, ms(5000), 1, 2)
	tr.ring(r1a, KindActivate, ms(6000), 3)
	tr.reconcile(r0a, "ns/a", 1, ms(5100), ms(5200))
	tr.write("ns/a", 2, ms(7000), ms(7010))
	tr.reconcile(r0a, "ns/a", 2, ms(7500), ms(8010))
	r := tr.checkWithin(time.Second)
	if l := r.Liveness; l.Worst != time.Second || l.WorstWrite.Gen != 2 || !r.OK() {
		t.Fatalf("want gen 1's wait counted from the first activation (200ms) and gen 2's 1s the longest:\n%s", r)
	}
}
