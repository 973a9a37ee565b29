package recorder

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

var (
	r0a = Process{Replica: "r-0", Incarnation: "a"}
	r0b = Process{Replica: "r-0", Incarnation: "b"}
	r1a = Process{Replica: "r-1", Incarnation: "a"}
)

// trace writes synthetic records into a fresh directory, one file per
// process as the real writers do.
type trace struct {
	t       *testing.T
	dir     string
	writers map[string]*Writer
	seq     uint64
}

func newTrace(t *testing.T) *trace {
	return &trace{t: t, dir: t.TempDir(), writers: map[string]*Writer{}}
}

func (tr *trace) writer(p Process, name string) *Writer {
	tr.t.Helper()
	id := p.String() + name
	if w, ok := tr.writers[id]; ok {
		return w
	}
	var w *Writer
	var err error
	if name != "" {
		w, err = OpenNamed(tr.dir, name)
	} else {
		w, err = Open(tr.dir, p)
	}
	if err != nil {
		tr.t.Fatal(err)
	}
	tr.t.Cleanup(func() { w.Close() })
	tr.writers[id] = w
	return w
}

func (tr *trace) append(w *Writer, r Record) {
	tr.t.Helper()
	if err := w.Append(r); err != nil {
		tr.t.Fatal(err)
	}
}

// reconcile records a finished reconcile of key by p over [start, end).
func (tr *trace) reconcile(p Process, key string, gen, start, end int64) {
	tr.seq++
	w := tr.writer(p, "")
	tr.append(w, Record{Kind: KindStart, Process: p, Seq: tr.seq, Key: key, Gen: gen, Start: start})
	tr.append(w, Record{Kind: KindEnd, Process: p, Seq: tr.seq, Key: key, Gen: gen, Start: start, End: end})
}

// cutShort records a reconcile that never wrote its end line.
func (tr *trace) cutShort(p Process, key string, gen, start int64) {
	tr.seq++
	tr.append(tr.writer(p, ""), Record{Kind: KindStart, Process: p, Seq: tr.seq, Key: key, Gen: gen, Start: start})
}

func (tr *trace) signal(kind string, p Process, at int64) {
	tr.append(tr.writer(Process{}, "harness"), Record{Kind: kind, Process: p, At: at})
}

func (tr *trace) write(key string, gen, sent, acked int64) {
	tr.append(tr.writer(Process{}, "writer"), Record{Kind: KindWrite, Key: key, Gen: gen, Start: sent, At: acked})
}

func (tr *trace) ring(p Process, kind string, at int64, parts ...int) {
	tr.append(tr.writer(p, ""), Record{Kind: kind, Process: p, Partitions: parts, At: at})
}

func (tr *trace) check() Report {
	tr.t.Helper()
	r, err := Check(tr.dir)
	if err != nil {
		tr.t.Fatal(err)
	}
	return r
}

func TestCheckFindsOverlapAcrossProcesses(t *testing.T) {
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/a", 1, 100, 200)
	tr.reconcile(r1a, "ns/a", 1, 150, 250)
	tr.reconcile(r1a, "ns/b", 1, 150, 250) // another key: no conflict
	r := tr.check()
	if len(r.Overlaps) != 1 {
		t.Fatalf("want 1 overlap, got %d:\n%s", len(r.Overlaps), r)
	}
	o := r.Overlaps[0]
	if o.A.Key != "ns/a" || o.A.Process != r0a || o.B.Process != r1a {
		t.Fatalf("wrong overlap reported: %s", o)
	}
	if r.OK() {
		t.Fatal("report with an overlap is OK")
	}
	if !strings.Contains(r.String(), "OVERLAP key ns/a") {
		t.Fatalf("report does not print the overlap:\n%s", r)
	}
}

func TestCheckAcceptsAdjacentIntervals(t *testing.T) {
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/a", 1, 100, 200)
	tr.reconcile(r1a, "ns/a", 2, 200, 300) // starts the instant the first ended
	tr.reconcile(r0b, "ns/a", 2, 300, 400)
	if r := tr.check(); !r.OK() || r.Completed != 3 {
		t.Fatalf("adjacent reconciles reported as a problem:\n%s", r)
	}
}

func TestCheckFindsOverlapWithinOneProcess(t *testing.T) {
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/a", 1, 100, 200)
	tr.reconcile(r0a, "ns/a", 1, 199, 300)
	r := tr.check()
	if len(r.SelfOverlaps) != 1 || len(r.Overlaps) != 0 {
		t.Fatalf("want one self-overlap:\n%s", r)
	}
}

func TestCheckTellsIncarnationsApart(t *testing.T) {
	// The same replica name before and after a restart is two processes.
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/a", 1, 100, 200)
	tr.reconcile(r0b, "ns/a", 1, 150, 250)
	if r := tr.check(); len(r.Overlaps) != 1 {
		t.Fatalf("overlap across incarnations of r-0 not found:\n%s", r)
	}
}

func TestCheckFindsLostUpdate(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 1, 10, 20)
	tr.write("ns/a", 2, 30, 40)
	tr.write("ns/b", 1, 10, 20)
	tr.write("ns/c", 5, 10, 20)
	tr.reconcile(r0a, "ns/a", 1, 25, 35) // saw gen 1 only
	tr.reconcile(r0a, "ns/b", 1, 25, 35) // final gen: fine
	tr.reconcile(r0a, "ns/c", 6, 25, 35) // a later gen (an unacknowledged write) covers it
	r := tr.check()
	if len(r.Lost) != 1 {
		t.Fatalf("want exactly ns/a lost:\n%s", r)
	}
	if l := r.Lost[0]; l.Key != "ns/a" || l.FinalGen != 2 || l.Reconciled != 1 || l.WrittenAt != 40 {
		t.Fatalf("wrong lost update: %s", l)
	}
	if r.Keys != 3 || r.Writes != 4 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestCheckFindsExistingObjectReadAsNotFound(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 1, 10, 20) // created, acknowledged at 20
	tr.write("ns/a", 2, 40, 50)
	tr.write("ns/b", 1, 10, 60) // acknowledged only at 60
	tr.reconcile(r0a, "ns/a", 2, 55, 65)
	tr.reconcile(r0a, "ns/b", 1, 70, 80)
	w := tr.writer(r0a, "")
	tr.append(w, Record{Kind: KindNotFound, Process: r0a, Key: "ns/a", Start: 30, At: 31}) // after its creation: vanished
	tr.append(w, Record{Kind: KindNotFound, Process: r0a, Key: "ns/b", Start: 55, At: 56}) // before the create was acknowledged
	tr.append(w, Record{Kind: KindNotFound, Process: r0a, Key: "ns/x", Start: 90, At: 91}) // never written
	r := tr.check()
	if r.NotFounds != 3 || len(r.Vanished) != 1 || r.OK() {
		t.Fatalf("want 3 NotFound reads, exactly one of an existing object, and the report not OK:\n%s", r)
	}
	if v := r.Vanished[0]; v.Read.Key != "ns/a" || v.Read.Process != r0a || v.Read.Start != 30 || v.Created != 20 {
		t.Fatalf("wrong vanished read: %s", v)
	}
	if !strings.Contains(r.String(), "VANISHED key ns/a") {
		t.Fatalf("the report does not list the vanished read:\n%s", r)
	}
}

func TestCheckCancelledReconcileDoesNotCount(t *testing.T) {
	tr := newTrace(t)
	tr.write("ns/a", 2, 10, 20)
	tr.seq++
	w := tr.writer(r0a, "")
	tr.append(w, Record{Kind: KindStart, Process: r0a, Seq: tr.seq, Key: "ns/a", Gen: 2, Start: 30})
	tr.append(w, Record{Kind: KindEnd, Process: r0a, Seq: tr.seq, Key: "ns/a", Gen: 2, Start: 30, End: 40, Error: "context canceled"})
	r := tr.check()
	if len(r.Lost) != 1 || r.Failed != 1 || r.Completed != 0 {
		t.Fatalf("a cancelled reconcile counted as done:\n%s", r)
	}
}

func TestCheckNeverWrittenKeyIsNotLost(t *testing.T) {
	tr := newTrace(t)
	tr.reconcile(r0a, "ns/x", 0, 1, 2)
	if r := tr.check(); !r.OK() {
		t.Fatalf("a key the writer never wrote is reported:\n%s", r)
	}
}

func TestCheckKilledIncarnation(t *testing.T) {
	// r-0/a starts ns/a at 100 and is SIGKILLed at 150, seen dead at 160.
	setup := func(t *testing.T) *trace {
		tr := newTrace(t)
		tr.write("ns/a", 3, 10, 20)
		tr.cutShort(r0a, "ns/a", 3, 100)
		tr.signal(KindKill, r0a, 150)
		tr.signal(KindExit, r0a, 160)
		return tr
	}
	t.Run("cut reconcile ends at death", func(t *testing.T) {
		tr := setup(t)
		tr.reconcile(r1a, "ns/a", 3, 160, 200)
		r := tr.check()
		if !r.OK() || r.Killed != 1 {
			t.Fatalf("reconcile after death reported, or kill not counted:\n%s", r)
		}
	})
	t.Run("overlap before death is found", func(t *testing.T) {
		tr := setup(t)
		tr.reconcile(r1a, "ns/a", 3, 155, 200)
		r := tr.check()
		if len(r.Overlaps) != 1 || r.Overlaps[0].A.Ending != EndKilled || r.Overlaps[0].A.End != 160 {
			t.Fatalf("overlap with a killed reconcile not found:\n%s", r)
		}
	})
	t.Run("cut reconcile does not reconcile the update", func(t *testing.T) {
		tr := setup(t)
		if r := tr.check(); len(r.Lost) != 1 {
			t.Fatalf("a reconcile cut by a kill counted as done:\n%s", r)
		}
	})
}

func TestCheckUnterminatedWithoutDeathLastsForever(t *testing.T) {
	tr := newTrace(t)
	tr.cutShort(r0a, "ns/a", 1, 100)
	tr.reconcile(r1a, "ns/a", 1, 1_000_000_000, 1_000_000_001)
	r := tr.check()
	if len(r.Overlaps) != 1 || r.Open != 1 {
		t.Fatalf("open reconcile must overlap all later ones:\n%s", r)
	}
}

func TestCheckAbandonedAtExitEndsAtExit(t *testing.T) {
	tr := newTrace(t)
	tr.cutShort(r0a, "ns/a", 1, 100)
	tr.signal(KindTerm, r0a, 120)
	tr.signal(KindExit, r0a, 130)
	tr.reconcile(r1a, "ns/a", 1, 130, 140)
	if r := tr.check(); !r.OK() || r.Exited != 1 {
		t.Fatalf("reconcile abandoned at exit mishandled:\n%s", r)
	}
}

func TestLoadToleratesTornLastLineOnly(t *testing.T) {
	dir := t.TempDir()
	good := `{"kind":"start","replica":"r-0","incarnation":"a","seq":1,"key":"ns/a","start":5}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "r-0-a.jsonl"), []byte(good+`{"kind":"end","repl`), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := Load(dir)
	if err != nil {
		t.Fatalf("torn last line rejected: %v", err)
	}
	if log.Torn != 1 || len(log.Intervals) != 1 {
		t.Fatalf("torn=%d intervals=%d, want 1 and 1", log.Torn, len(log.Intervals))
	}
	if err := os.WriteFile(filepath.Join(dir, "r-1-a.jsonl"), []byte("garbage\n"+good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("malformed line in the middle of a file accepted")
	}
}

func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, r0a)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Ring(KindActivate, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	rc, err := w.Started("ns/a", 7, before)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Ended(rc, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.NotFound("ns/b", before); err != nil {
		t.Fatal(err)
	}
	log, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Intervals) != 1 || len(log.Ring) != 1 || len(log.NotFounds) != 1 {
		t.Fatalf("got %d intervals, %d ring events, %d NotFound reads", len(log.Intervals), len(log.Ring), len(log.NotFounds))
	}
	if nf := log.NotFounds[0]; nf.Process != r0a || nf.Key != "ns/b" || nf.Start != before.UnixNano() || nf.At < nf.Start {
		t.Fatalf("NotFound read did not round-trip: %+v", nf)
	}
	iv := log.Intervals[0]
	if iv.Process != r0a || iv.Key != "ns/a" || iv.Gen != 7 || iv.Start != before.UnixNano() || iv.End < iv.Start || !iv.Completed() {
		t.Fatalf("interval did not round-trip: %s", iv)
	}
	if _, err := Open(dir, Process{Replica: "r-0"}); err == nil {
		t.Fatal("process without incarnation accepted")
	}
}

func TestTakeoverAndOwners(t *testing.T) {
	tr := newTrace(t)
	tr.ring(r0a, KindActivate, 10, 0, 1, 2)
	tr.ring(r1a, KindActivate, 10, 3, 4)
	tr.ring(r0a, KindRevoke, 20, 2) // handed to r-1 before the leave
	tr.ring(r0a, KindRevoked, 21, 2)
	tr.ring(r1a, KindActivate, 22, 2)
	// r-0/a is told to leave at 100; r-1 takes 0 at 130 and 1 at 170.
	tr.ring(r0a, KindRevoke, 105, 0, 1)
	tr.ring(r0a, KindRevoked, 120, 0, 1)
	tr.ring(r1a, KindActivate, 130, 0)
	tr.ring(r1a, KindActivate, 170, 1)
	tr.signal(KindExit, r0a, 125)
	log, err := Load(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	gap, held, err := log.Takeover(r0a, time.Unix(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if gap != 70 || len(held) != 2 {
		t.Fatalf("gap=%d held=%v, want 70ns over [0 1]", gap, held)
	}
	owners := log.Owners(200)
	for p := 0; p < 5; p++ {
		if len(owners[p]) != 1 || owners[p][0] != r1a {
			t.Fatalf("partition %d owned by %v at the end, want r-1/a alone", p, owners[p])
		}
	}
	if owners := log.Owners(50); len(owners[2]) != 1 || owners[2][0] != r1a || owners[0][0] != r0a {
		t.Fatalf("owners at 50: %v", owners)
	}

	handoffs := log.Handoffs()
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	if want := []time.Duration{1, 10, 50}; !slices.Equal(handoffs, want) {
		t.Fatalf("handoffs %v, want %v (2: 21→22, 0: 120→130, 1: 120→170)", handoffs, want)
	}

	// A crash nobody takes over from is an error naming the partitions.
	tr.ring(r0b, KindActivate, 300, 7)
	log, err = Load(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := log.Takeover(r0b, time.Unix(0, 400)); err == nil || !strings.Contains(err.Error(), ": 7") {
		t.Fatalf("want an error naming partition 7, got %v", err)
	}
}

// Moves tells a partition handed to another replica from one handed to
// the same replica's next process.
func TestMoves(t *testing.T) {
	tr := newTrace(t)
	tr.ring(r0a, KindActivate, 10, 0, 1)
	tr.ring(r1a, KindActivate, 10, 2)
	// r-0/a leaves at 100: 0 waits for r-0/b, 1 goes to r-1/a.
	tr.ring(r0a, KindRevoke, 100, 0, 1)
	tr.ring(r0a, KindRevoked, 110, 0, 1)
	tr.signal(KindExit, r0a, 115)
	tr.ring(r1a, KindActivate, 120, 1)
	tr.ring(r0b, KindActivate, 150, 0)
	log, err := Load(tr.dir)
	if err != nil {
		t.Fatal(err)
	}
	moves := log.Moves(50)
	if len(moves) != 1 || moves[0].Partition != 1 || moves[0].Process != r1a || moves[0].Start != 120 {
		t.Fatalf("moves since 50: %v; want partition 1 to r-1/a at 120", moves)
	}
	if moves := log.Moves(130); len(moves) != 0 {
		t.Fatalf("moves since 130: %v; want none", moves)
	}
}

func TestCheckFindsPartitionOverlap(t *testing.T) {
	tr := newTrace(t)
	tr.ring(r0a, KindActivate, 10, 1, 2)
	tr.ring(r0a, KindRevoke, 20, 2)
	tr.ring(r1a, KindActivate, 25, 2) // before r-0 finished draining 2
	tr.ring(r0a, KindRevoked, 30, 2)
	tr.ring(r0b, KindActivate, 30, 2) // after: a clean handoff from r-0/a
	r := tr.check()
	if len(r.PartitionOverlaps) != 2 {
		t.Fatalf("want r-1/a to overlap both r-0/a and r-0/b on partition 2:\n%s", r)
	}
	if o := r.PartitionOverlaps[0]; o.A.Process != r0a || o.B.Process != r1a || o.A.Partition != 2 {
		t.Fatalf("wrong partition overlap: %s", o)
	}
}

func TestCheckPartitionWindowsOfTheDead(t *testing.T) {
	// r-0/a never drains partition 1 but is killed: its window ends at
	// death, and a takeover after it is clean; a failed drain of a live
	// process keeps the window open forever.
	tr := newTrace(t)
	tr.ring(r0a, KindActivate, 10, 1)
	tr.signal(KindKill, r0a, 40)
	tr.signal(KindExit, r0a, 50)
	tr.ring(r1a, KindActivate, 60, 1)
	tr.ring(r1a, KindRevoke, 70, 1) // never revoked
	if r := tr.check(); len(r.PartitionOverlaps) != 0 {
		t.Fatalf("takeover after death reported:\n%s", r)
	}
	tr.ring(r0b, KindActivate, 1000, 1)
	if r := tr.check(); len(r.PartitionOverlaps) != 1 {
		t.Fatalf("activation after a failed drain not reported:\n%s", r)
	}
}
