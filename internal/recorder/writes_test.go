package recorder

import (
	"testing"
)

// sent records a write of key by p's reconcile seq (which saw gen) at at.
func (tr *trace) sent(p Process, seq uint64, key string, gen, at int64, late bool) string {
	tr.t.Helper()
	v := WriteValue(gen, p, seq)
	tr.append(tr.writer(p, ""), Record{Kind: KindSend, Process: p, Seq: seq, Key: key, Gen: gen, Value: v, At: at, Late: late})
	return v
}

// writing records a reconcile of key by p over [start, end) that sent a
// write at sentAt, and returns the value written.
func (tr *trace) writing(p Process, key string, gen, start, sentAt, end int64) string {
	tr.reconcile(p, key, gen, start, end)
	return tr.sent(p, tr.seq, key, gen, sentAt, false)
}

func (tr *trace) writes(final map[string]string) WriteReport {
	tr.t.Helper()
	log, err := Load(tr.dir)
	if err != nil {
		tr.t.Fatal(err)
	}
	return log.CheckWrites(final)
}

func TestCheckWritesAcceptsAHandoff(t *testing.T) {
	tr := newTrace(t)
	tr.writing(r0a, "ns/a", 1, 100, 190, 200)
	last := tr.writing(r1a, "ns/a", 2, 200, 290, 300)
	r := tr.writes(map[string]string{"ns/a": last})
	if !r.OK() || r.Sends != 2 || r.Writing != 2 {
		t.Fatalf("a clean handoff reported as %s", r)
	}
}

func TestCheckWritesIgnoresAFrozenReconcileThatSentNothingAfter(t *testing.T) {
	// r0a's reconcile spans r1a's (it was paused) but sent its write
	// before r1a started: only the part up to its last send counts.
	tr := newTrace(t)
	tr.writing(r0a, "ns/a", 1, 100, 150, 500)
	last := tr.writing(r1a, "ns/a", 2, 200, 290, 300)
	// And a reconcile that sent nothing may overlap anything.
	tr.reconcile(r0a, "ns/a", 1, 210, 600)
	if r := tr.writes(map[string]string{"ns/a": last}); !r.OK() {
		t.Fatalf("want no violation, got %s", r)
	}
}

func TestCheckWritesFindsOverlapRegressionAndStaleState(t *testing.T) {
	tr := newTrace(t)
	tr.writing(r1a, "ns/a", 2, 200, 250, 300)
	stale := tr.writing(r0a, "ns/a", 1, 100, 400, 410) // resumed after a pause and wrote
	r := tr.writes(map[string]string{"ns/a": stale})
	if len(r.Overlaps) != 1 || r.Overlaps[0].A.Process != r0a || r.Overlaps[0].B.Process != r1a {
		t.Fatalf("want one overlap of r-0/a and r-1/a, got %s", r)
	}
	if len(r.Regressions) != 1 || r.Regressions[0].Late.Process != r0a || r.Regressions[0].Newer.Gen != 2 {
		t.Fatalf("want r-0/a's gen 1 write after r-1/a's gen 2 as a regression, got %s", r)
	}
	// The final state is the last write sent, so not stale by itself…
	if len(r.Stale) != 0 {
		t.Fatalf("final state equal to the last write reported stale: %s", r)
	}
	// …but an object that kept an older value than its last write is.
	older := tr.writes(map[string]string{"ns/a": WriteValue(2, r1a, 1)})
	if len(older.Stale) != 1 || older.Stale[0].Key != "ns/a" {
		t.Fatalf("want ns/a stale, got %s", older)
	}
	if r.OK() || older.OK() {
		t.Fatal("reports with violations are OK")
	}
}

func TestCheckWritesFindsLateWrites(t *testing.T) {
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/a", 1, 100, 200)
	v := tr.sent(r0a, tr.seq, "ns/a", 1, 150, true)
	r := tr.writes(map[string]string{"ns/a": v})
	if len(r.Late) != 1 || r.OK() {
		t.Fatalf("want one late write, got %s", r)
	}
}
