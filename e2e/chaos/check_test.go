package chaos

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

// finish ends a round: it stops the writer, waits for every final update to
// be reconciled, stops the replicas gracefully and checks the whole run's
// records, adding them to the suite's summary.
func (r *round) finish(h *harness.Harness, w *harness.Writer) *recorder.Log {
	t := r.t
	t.Helper()
	writes, failures, lastErr := w.Stop()
	t.Logf("writer: %d updates acknowledged, %d failed (last error: %v)", writes, failures, lastErr)
	if writes == 0 {
		t.Error("the writer wrote nothing; the round exercised no updates")
	}
	// Not h.Await: a timeout must still reach the check below, so the lost
	// keys are listed and counted in the summary.
	stopped := time.Now()
	_ = testwait.Poll(200*time.Millisecond, reconcileTimeout, func() error {
		if n := len(h.Log().Check().Lost); n > 0 {
			r.revive(h)
			return fmt.Errorf("%d updates not reconciled", n)
		}
		return nil
	})
	if lost := len(h.Log().Check().Lost); lost > 0 {
		h.Diagnose(fmt.Sprintf("%d keys' final updates not reconciled within %s of the writer's stop", lost, reconcileTimeout))
	}
	r.revive(h)
	for _, id := range h.Live() {
		if r.crashLooping(id) {
			// It would not leave gracefully; end it as a kill so the
			// records are still checked (the round fails on its exits).
			if _, done := h.Replica(id).Exited(); !done {
				h.Kill(id)
			}
			continue
		}
		h.WaitReady(id) // a revived replica must be up to leave gracefully
	}
	reconciled := time.Now()
	misplaced, mislabelled := r.checkCaches(h)
	h.StopAll()
	t.Logf("final updates reconciled %s after the writer stopped; replicas stopped in %s",
		reconciled.Sub(stopped).Round(time.Millisecond), time.Since(reconciled).Round(time.Millisecond))

	log := h.Log()
	bound := livenessBound(h)
	rep := log.CheckWithin(bound)
	if len(r.paused) > 0 {
		// A paused process's reconciles and windows span its peers' while
		// it does not run; the writes it sent are what must not overlap.
		frozen := len(rep.Overlaps) + len(rep.PartitionOverlaps)
		rep.Overlaps = slices.DeleteFunc(rep.Overlaps, func(o recorder.Overlap) bool { return r.paused[o.A.Process] || r.paused[o.B.Process] })
		rep.PartitionOverlaps = slices.DeleteFunc(rep.PartitionOverlaps, func(o recorder.PartitionOverlap) bool {
			return r.paused[o.A.Process] || r.paused[o.B.Process]
		})
		t.Logf("%d reconcile and window overlaps involve a paused process and are judged by its writes instead", frozen-len(rep.Overlaps)-len(rep.PartitionOverlaps))
	}
	outside := outsideWindows(r.t, log, h.Options())
	handoffs := log.Handoffs()
	var worst time.Duration
	for _, g := range handoffs {
		worst = max(worst, g)
	}
	overlaps := len(rep.Overlaps) + len(rep.SelfOverlaps) + len(rep.PartitionOverlaps) + len(outside)
	if h.Options().BlindWrite {
		wr := log.CheckWrites(h.FinalValues())
		overlaps += len(wr.Overlaps)
		suite.addWrites(wr.Sends, len(wr.Late), len(wr.Regressions), len(wr.Stale))
		t.Logf("writes: %s", wr)
		if wr.Sends == 0 {
			t.Error("the operator sent no write; the round checked no write")
		}
		if !wr.OK() {
			t.Errorf("the writes show a violation:\n%s", wr)
		}
	}
	suite.add(rep, len(handoffs), r.faults, overlaps, worst)
	suite.addCaches(misplaced, mislabelled)
	t.Logf("records: %s", rep)
	t.Logf("round %s: %d reconciles, %d handoffs (worst gap %s), %d faults (%d recorded as extending the liveness bound), %d overlaps, %d lost, %d NotFound reads (%d of existing objects), longest wait for a reconcile %s (net of faults %s, bound %s, %d overdue), %d objects misplaced in the caches, %d without their partition label, %d fence exits",
		r.name, rep.Intervals, len(handoffs), worst.Round(time.Millisecond), r.faults, len(log.Faults), overlaps, len(rep.Lost), rep.NotFounds, len(rep.Vanished),
		rep.Liveness.Worst.Round(time.Millisecond), rep.Liveness.WorstNet.Round(time.Millisecond), bound, len(rep.Liveness.Overdue), misplaced, mislabelled, len(r.fenceExits))
	if !rep.OK() {
		t.Errorf("the records show a violation:\n%s", rep)
	}
	for p, code := range r.selfExits {
		t.Errorf("%s exited by itself with code %d instead of recovering; a StatefulSet would restart it in a loop", p, code)
	}
	for i, o := range outside {
		if i == 10 {
			t.Errorf("… and %d more reconciles outside their windows", len(outside)-i)
			break
		}
		t.Errorf("reconcile outside its process's active window (a drain released early or an activation came late): %s", o)
	}
	abandoned := 0
	for _, iv := range log.Intervals {
		_, selfExit := r.selfExits[iv.Process]
		if iv.Ending == recorder.EndExited && !r.fenceExits[iv.Process] && !selfExit {
			abandoned++
		}
	}
	if abandoned > 0 || rep.Open > 0 {
		t.Errorf("%d reconciles were abandoned by an exit that was neither a kill nor a fence exit, and %d never ended; every leave must drain them", abandoned, rep.Open)
	}
	if len(r.fenceExits) > 0 {
		t.Logf("%d processes exited after a fence and were restarted; %d of their reconciles ended with the process", len(r.fenceExits), rep.Exited)
	}
	return log
}

// outsideWindows lists the reconciles that did not run wholly inside an
// active window of their key's partition on their own process: from before
// its activation until after its drain returned (or its death). One outside
// is a drain that returned while the reconcile still ran — released early,
// whether or not a peer happened to reconcile the key meanwhile.
func outsideWindows(t *testing.T, log *recorder.Log, opts harness.Options) []string {
	t.Helper()
	// The ring's own partition function: by key, or by the namespace's
	// hash range when the round runs the sharded cache.
	partitioner, err := shard.PartitionerFor(shard.Config{Partitions: opts.Partitions, Scheme: shard.Scheme(opts.PartitionBy)})
	if err != nil {
		t.Fatal(err)
	}
	type procPart struct {
		recorder.Process
		part int
	}
	windows := map[procPart][]recorder.Window{}
	for part, ws := range log.Windows() {
		for _, w := range ws {
			id := procPart{w.Process, part}
			windows[id] = append(windows[id], w)
		}
	}
	var out []string
	for _, iv := range log.Intervals {
		id := procPart{iv.Process, partitioner.Partition(iv.Key)}
		inside := false
		for _, w := range windows[id] {
			if w.Start <= iv.Start && iv.End <= w.End {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, fmt.Sprintf("%s in partition %d, whose windows on that process were %v", iv, id.part, windows[id]))
		}
	}
	return out
}

// fence is how a process gave up the partitions it held at some moment.
type fence struct {
	held []int
	// began is the latest of its first revoke records of those partitions
	// after the moment; drained the latest of its first revoked records.
	began, drained time.Time
	// revoked maps each held partition to its revoked record's time.
	revoked map[int]time.Time
}

// fenceOf returns how p gave up what it held at at, or an error while some
// of it is not yet revoked and drained.
func fenceOf(log *recorder.Log, p recorder.Process, at time.Time) (fence, error) {
	t := at.UnixNano()
	f := fence{held: log.ActiveAt(p, t), revoked: map[int]time.Time{}}
	if len(f.held) == 0 {
		return f, fmt.Errorf("%s held no partitions at %s; the fence would prove nothing", p, at.Format(time.RFC3339Nano))
	}
	firstRevoke := map[int]int64{}
	firstRevoked := map[int]int64{}
	for _, rec := range log.Ring {
		if rec.Process != p || rec.At < t {
			continue
		}
		first := map[string]map[int]int64{recorder.KindRevoke: firstRevoke, recorder.KindRevoked: firstRevoked}[rec.Kind]
		if first == nil {
			continue
		}
		for _, part := range rec.Partitions {
			if _, seen := first[part]; !seen {
				first[part] = rec.At
			}
		}
	}
	var began, drained int64
	var undrained []int
	for _, part := range f.held {
		rv, ok1 := firstRevoke[part]
		rd, ok2 := firstRevoked[part]
		if !ok1 || !ok2 {
			undrained = append(undrained, part)
			continue
		}
		began, drained = max(began, rv), max(drained, rd)
		f.revoked[part] = time.Unix(0, rd)
	}
	if len(undrained) > 0 {
		sort.Ints(undrained)
		return f, fmt.Errorf("%s has not yet revoked and drained %d of the %d partitions it held: %v", p, len(undrained), len(f.held), undrained)
	}
	f.began, f.drained = time.Unix(0, began), time.Unix(0, drained)
	return f, nil
}

// activatedElsewhere maps each partition to the first time a process other
// than p activated it at or after at.
func activatedElsewhere(log *recorder.Log, p recorder.Process, at time.Time) map[int]time.Time {
	t := at.UnixNano()
	out := map[int]time.Time{}
	for _, rec := range log.Ring {
		if rec.Kind != recorder.KindActivate || rec.Process == p || rec.At < t {
			continue
		}
		for _, part := range rec.Partitions {
			if first, seen := out[part]; !seen || rec.At < first.UnixNano() {
				out[part] = time.Unix(0, rec.At)
			}
		}
	}
	return out
}

// awaitTakeover waits until every partition exit's process held when
// signalled is active elsewhere and returns how long that took.
func awaitTakeover(r *round, h *harness.Harness, exit harness.Exit, timeout time.Duration) time.Duration {
	r.t.Helper()
	var gap time.Duration
	var held []int
	h.Await(timeout, "takeover from "+exit.Process.String(), func() error {
		var err error
		gap, held, err = h.Log().Takeover(exit.Process, exit.Signalled)
		return err
	})
	if len(held) == 0 {
		r.t.Errorf("%s held no partitions when signalled; the takeover measures nothing", exit.Process)
	}
	return gap
}
