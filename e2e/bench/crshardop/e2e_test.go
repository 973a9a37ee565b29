package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/kshard/kshard/manager/kshardtest"
)

// TestConvertedOperatorHandsOff runs three replicas of the converted
// operator (built with -tags kshardtest, which records its reconciles and
// ring events) on a real control plane under a stream of updates, through
// a graceful rolling restart and one SIGKILL, and checks with the kit's
// checker that no key was reconciled by two replicas at once and that every
// update was reconciled.
func TestConvertedOperatorHandsOff(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "crshardop")
	if out, err := exec.Command("go", "build", "-tags", "kshardtest", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the operator: %v\n%s", err, out)
	}
	env := kshardtest.New(t, kshardtest.Options{Ring: "crshardop", Namespace: "crshardop"})
	start := func(id string) {
		o := env.ManagerOptions(id)
		env.StartProcess(id, kshardtest.Command{Path: bin, Args: []string{
			"--name", o.Ring, "--namespace", o.Namespace, "--identity", id,
			"--lease-duration", o.LeaseDuration.String(), "--renew-deadline", o.RenewDeadline.String(),
			"--renew-period", o.RenewPeriod.String(), "--drain-grace", o.DrainGracePeriod.String(),
			"--latency", "5ms",
		}})
	}
	ids := []string{"r-0", "r-1", "r-2"}
	began := time.Now()
	for _, id := range ids {
		start(id)
	}
	env.AwaitConverged(2*time.Minute, ids...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := kshardtest.CreateConfigMaps(ctx, env.Client(), "crshardop",
		map[string]string{kshardtest.Label: kshardtest.LabelValue, "kshard-bench": "obj"}, 60, env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := kshardtest.StartWriter(env.Client(), "crshardop", names, 40, env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	env.RollingRestart(2*time.Minute, start, ids...)
	env.Crash("r-1")
	env.AwaitConverged(time.Minute, "r-0", "r-2")
	start("r-1")
	env.AwaitConverged(2*time.Minute, ids...)
	writes, failures, lastErr := w.Stop()
	report := env.Check(time.Minute)
	t.Logf("%d writes (%d failed, last error %v); %s; took %s", writes, failures, lastErr, report, time.Since(began).Round(time.Second))
	if !report.OK() {
		t.Fatal(report)
	}
	log, err := env.Log()
	if err != nil {
		t.Fatal(err)
	}
	gaps := log.Handoffs()
	if len(gaps) == 0 {
		t.Fatal("no partition moved between replicas: the restarts handed nothing off")
	}
	slices.Sort(gaps)
	// Moves off the killed replica wait out its Lease (LeaseDuration);
	// graceful ones wait only for a drain and a watch round-trip.
	slow := len(gaps) - sort.Search(len(gaps), func(i int) bool { return gaps[i] >= time.Second })
	t.Logf("%d partition moves; time active nowhere: p50 %s, max %s; %d moves of 1s or more (the SIGKILL's, which peers wait out)",
		len(gaps), gaps[len(gaps)/2], gaps[len(gaps)-1], slow)
}
