package chaos

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
)

// rounds is how often each scenario runs, each round with new random timing
// (its seed is logged) in a fresh namespace and ring.
var rounds = flag.Int("rounds", envInt(EnvRounds, 1), "rounds of every chaos scenario, each with new random timing (default $"+EnvRounds+" or 1)")

// sharded runs every scenario on the sharded cache: the control plane with
// the ShardedListAndWatch gate, replicas with PartitionBy namespace, and
// the objects spread over namespaces (make chaos-sharded).
var sharded = flag.Bool("sharded", false, "run the scenarios with the sharded cache: API server feature gate ShardedListAndWatch, --partition-by=namespace, objects spread over namespaces")

// labels runs every scenario on the gate-free sharded cache: replicas with
// --cache-mode=labels under key partitioning, on a control plane without
// the ShardedListAndWatch gate, the objects spread over namespaces (make
// chaos-labels).
var labels = flag.Bool("labels", false, "run the scenarios with the gate-free sharded cache: --cache-mode=labels, key partitioning, no feature gate, objects spread over namespaces")

// balance, with -sharded, gives the replicas --balance: a ring placed by
// the partitions' object counts (make chaos-sharded BALANCE=0.02).
var balance = flag.Float64("balance", 0, "with -sharded: every replica's --balance (partitions placed by object counts); 0 places by number")

// Environment variables for runs where test flags cannot be passed, as in
// go test ./...: EnvRounds sets the default of -rounds, and EnvSummary names
// a file the summary line is appended to (go test shows a passing package's
// output only with -v or -json).
const (
	EnvRounds  = "KSHARD_CHAOS_ROUNDS"
	EnvSummary = "KSHARD_CHAOS_SUMMARY"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *sharded && *labels {
		fmt.Fprintln(os.Stderr, "chaos: -sharded and -labels are two cache setups; pass one of them")
		os.Exit(2)
	}
	switch *start {
	case startTogether, startStaggered, startAlternate:
	default:
		fmt.Fprintf(os.Stderr, "chaos: -start=%q: want together, staggered or alternate\n", *start)
		os.Exit(2)
	}
	code := harness.Run(m)
	if line, ok := suite.line(); ok {
		fmt.Println(line)
		if path := os.Getenv(EnvSummary); path != "" {
			if err := appendLine(path, line); err != nil {
				fmt.Fprintf(os.Stderr, "writing the chaos summary to $%s: %v\n", EnvSummary, err)
				code = max(code, 1)
			}
		}
	}
	os.Exit(code)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// suite totals every checked round of every scenario for the summary line.
var suite tally

// tally adds up checked rounds. Overlaps counts every violation of the
// invariant the records can show: two processes reconciling a key at once,
// one process reconciling a key twice at once, two processes' active windows
// of a partition intersecting, and a reconcile running outside its own
// process's active window (a drain that released early).
type tally struct {
	mu         sync.Mutex // guards the fields below
	checked    int        // rounds whose records were checked
	reconciles int
	handoffs   int
	faults     int
	overlaps   int
	lost       int
	// notFound counts the reconciles' cache reads that found no object,
	// and vanished those of them that read an existing object so (see
	// recorder.Report.Vanished).
	notFound, vanished int
	// tampered counts the partition labels a third party stripped,
	// edited or replaced (TestLabelTampering).
	tampered int
	worstGap time.Duration
	// overdue counts the updates reconciled later than the liveness bound
	// (see livenessBound), worstWait and worstNet the longest wait of an
	// update for its reconcile, raw and net of the faults that extended
	// its bound.
	overdue             int
	worstWait, worstNet time.Duration
	// misplaced counts the objects not cached as the setup says at a
	// round's end (see checkCaches), mislabelled those without their
	// partition's label.
	misplaced, mislabelled int
	// Of blind-write rounds (harness.Options.BlindWrite): writes sent,
	// writes sent after their lease validity passed, stale writes sent over
	// a newer one, and objects whose final state is not their last write.
	sends, late, regressions, stale int
}

// addWrites adds a blind-write round's write figures (its other figures
// go through add).
func (s *tally) addWrites(sends, late, regressions, stale int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends += sends
	s.late += late
	s.regressions += regressions
	s.stale += stale
}

// add adds a checked round: its records' report, and what the round
// measured beside it.
func (s *tally) add(rep recorder.Report, handoffs, faults, overlaps int, worstGap time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked++
	s.reconciles += rep.Intervals
	s.handoffs += handoffs
	s.faults += faults
	s.overlaps += overlaps
	s.lost += len(rep.Lost)
	s.notFound += rep.NotFounds
	s.vanished += len(rep.Vanished)
	s.worstGap = max(s.worstGap, worstGap)
	s.overdue += len(rep.Liveness.Overdue)
	s.worstWait = max(s.worstWait, rep.Liveness.Worst)
	s.worstNet = max(s.worstNet, rep.Liveness.WorstNet)
}

// addCaches adds a round's end-of-round cache check (see checkCaches).
func (s *tally) addCaches(misplaced, mislabelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misplaced += misplaced
	s.mislabelled += mislabelled
}

// addTampered adds a round's label tamperings.
func (s *tally) addTampered(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tampered += n
}

// line is the summary tools read, or false when no round was checked.
func (s *tally) line() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked == 0 {
		return "", false
	}
	secs := func(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
	return fmt.Sprintf("chaos summary: rounds=%d reconciles=%d handoffs=%d faults=%d overlaps=%d lost=%d notfound=%d notfound_existing=%d tampered=%d worst_gap=%.3f overdue=%d worst_wait=%.3f worst_wait_net=%.3f misplaced=%d mislabelled=%d sends=%d late=%d regressions=%d stale=%d start=%s",
		*rounds, s.reconciles, s.handoffs, s.faults, s.overlaps, s.lost, s.notFound, s.vanished, s.tampered, secs(s.worstGap),
		s.overdue, secs(s.worstWait), secs(s.worstNet), s.misplaced, s.mislabelled,
		s.sends, s.late, s.regressions, s.stale, *start), true
}
