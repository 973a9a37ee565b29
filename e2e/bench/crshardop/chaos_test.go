package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/manager/kshardtest/recorder"
)

// rounds is how many rounds of every chaos scenario run (make
// chaos-crshard ROUNDS=N); each round has its own control plane.
var rounds = flag.Int("rounds", 1, "rounds of each chaos scenario of the converted operator")

// summaryEnv names a file the chaos summary line is appended to, as the
// native chaos suite's (e2e/chaos) does.
const summaryEnv = "KSHARD_CHAOS_SUMMARY"

// operator is the converted operator built once per test binary with
// -tags kshardtest (its reconciles and ring events are recorded).
var operator struct {
	once sync.Once
	bin  string
	err  error
}

func operatorBinary(t *testing.T) string {
	t.Helper()
	operator.once.Do(func() {
		dir, err := os.MkdirTemp("", "crshardop-bin-")
		if err != nil {
			operator.err = err
			return
		}
		operator.bin = filepath.Join(dir, "crshardop")
		if out, err := exec.Command("go", "build", "-tags", "kshardtest", "-o", operator.bin, ".").CombinedOutput(); err != nil {
			operator.err = fmt.Errorf("building the operator: %v\n%s", err, out)
		}
	})
	if operator.err != nil {
		t.Fatal(operator.err)
	}
	return operator.bin
}

// fleet is one round: a control plane, the converted operator's replicas
// and the kit's writer bumping generations in ConfigMaps.
type fleet struct {
	env    *kshardtest.Env
	writer *kshardtest.Writer
	bin    string
}

func newFleet(t *testing.T, ring string, ids ...string) *fleet {
	f := &fleet{bin: operatorBinary(t), env: kshardtest.New(t, kshardtest.Options{Ring: ring, Namespace: ring})}
	for _, id := range ids {
		f.start(id)
	}
	f.env.AwaitConverged(2*time.Minute, ids...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := kshardtest.CreateConfigMaps(ctx, f.env.Client(), ring,
		map[string]string{kshardtest.Label: kshardtest.LabelValue, labelKey: labelObject}, 60, f.env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.writer, err = kshardtest.StartWriter(f.env.Client(), ring, names, 40, f.env.RecordDir()); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs a new incarnation of identity with the kit's lease timings.
func (f *fleet) start(id string) {
	o := f.env.Options()
	f.env.StartProcess(id, kshardtest.Command{Path: f.bin, Args: []string{
		"--name", o.Ring, "--namespace", o.Namespace, "--identity", id,
		"--lease-duration", o.LeaseDuration.String(), "--renew-deadline", o.RenewDeadline.String(),
		"--renew-period", o.RenewPeriod.String(), "--drain-grace", o.DrainGracePeriod.String(),
		"--latency", "5ms",
	}})
}

// check stops the writer, waits for every update's reconcile and fails the
// test on any overlap or lost update.
func (f *fleet) check(t *testing.T, scenario string) recorder.Report {
	t.Helper()
	writes, failures, lastErr := f.writer.Stop()
	report := f.env.Check(time.Minute)
	t.Logf("%s: %d writes (%d failed, last error %v); %s", scenario, writes, failures, lastErr, report)
	if !report.OK() {
		t.Fatal(report)
	}
	if report.Completed == 0 {
		t.Fatalf("%s: no reconcile of the kit's objects completed", scenario)
	}
	return report
}

// totals sums the checked rounds for the summary line.
var totals struct {
	sync.Mutex
	rounds, reconciles, writes, overlaps, lost int
}

func (f *fleet) count(r recorder.Report) {
	totals.Lock()
	defer totals.Unlock()
	totals.rounds++
	totals.reconciles += r.Intervals
	totals.writes += r.Writes
	totals.overlaps += len(r.Overlaps) + len(r.SelfOverlaps) + len(r.PartitionOverlaps)
	totals.lost += len(r.Lost)
}

// TestConvertedOperatorChaos runs the converted controller-runtime
// operator through the native chaos suite's fault kinds — a SIGKILL, a
// rolling restart, scaling out and in, an API-server outage longer than
// the LeaseDuration — under a stream of updates, each round on a fresh
// control plane, and checks every round with the kit's checker: no key
// reconciled by two replicas at once, no update left unreconciled.
func TestConvertedOperatorChaos(t *testing.T) {
	ids := []string{"r-0", "r-1", "r-2"}
	scenarios := []struct {
		name  string
		fault func(t *testing.T, f *fleet)
	}{
		{"kill", func(t *testing.T, f *fleet) {
			f.env.Crash("r-1")
			f.env.AwaitConverged(time.Minute, "r-0", "r-2")
			f.start("r-1")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
		{"rolling", func(t *testing.T, f *fleet) {
			f.env.RollingRestart(2*time.Minute, f.start, ids...)
		}},
		{"scaling", func(t *testing.T, f *fleet) {
			f.start("r-3")
			f.start("r-4")
			f.env.AwaitConverged(2*time.Minute, append(ids, "r-3", "r-4")...)
			f.env.Stop("r-4")
			f.env.Stop("r-3")
			f.env.Stop("r-2")
			f.env.AwaitConverged(time.Minute, "r-0", "r-1")
			f.start("r-2")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
		{"outage", func(t *testing.T, f *fleet) {
			down := f.env.StopAPIServer()
			// Past LeaseDuration: every replica fences itself, and must
			// rejoin on its own once the API server is back.
			// The outage's length is the fault itself, not a wait for a
			// condition.
			time.Sleep(time.Until(down.Add(f.env.Options().LeaseDuration + time.Second)))
			f.env.StartAPIServer()
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
	}
	for round := 1; round <= *rounds; round++ {
		for _, sc := range scenarios {
			t.Run(fmt.Sprintf("%s/round-%d", sc.name, round), func(t *testing.T) {
				f := newFleet(t, "crshardop", ids...)
				sc.fault(t, f)
				f.count(f.check(t, sc.name))
			})
		}
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if operator.bin != "" {
		_ = os.RemoveAll(filepath.Dir(operator.bin))
	}
	if path := os.Getenv(summaryEnv); path != "" && totals.rounds > 0 {
		line := fmt.Sprintf("crshard chaos summary: rounds=%d reconciles=%d writes=%d overlaps=%d lost=%d\n",
			totals.rounds, totals.reconciles, totals.writes, totals.overlaps, totals.lost)
		if fh, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			_, _ = fh.WriteString(line)
			_ = fh.Close()
		}
	}
	os.Exit(code)
}
