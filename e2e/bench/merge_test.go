package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fullRun is a results file as a full run writes it: every phase measured.
func fullRun(t *testing.T, dir string) {
	t.Helper()
	r := &results{Params: defaultParams(false), Command: "go run ./e2e/bench", Env: env{Date: "2026-11-20", LoadStart: "1.00 1.00 1.00"}}
	r.Ceiling = []ceilingResult{{Round: 1, Goroutines: 16, WritesPerSec: 1000}}
	r.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ObjectsPerSec: 200},
		{Round: 1, System: "kshard", Replicas: 4, ObjectsPerSec: 700},
	}
	r.Handoff = []handoffResult{{System: "kshard", Replicas: 2, Rollout: delayStats{Updates: 3, P99Seconds: 0.1}}}
	r.Failover = []failoverResult{{System: "kshard", Seconds: 9.8}, {System: baselineName, Seconds: 16}}
	r.Resources = []resourceResult{{System: "kshard", MaxPeakRSSMiB: 110}, {System: baselineName, MaxPeakRSSMiB: 100}}
	r.ShardedRuns = []shardedResult{{System: nativeName, Gate: true, Objects: 50, MaxPeakRSSMiB: 35}, {System: baselineName, Gate: true, Objects: 50, MaxPeakRSSMiB: 100}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
}

func TestPartialRunKeepsEarlierPhases(t *testing.T) {
	dir := t.TempDir()
	fullRun(t, dir)
	p := defaultParams(false)
	p.Phases = map[int]bool{4: true, 6: true}
	target := mergeTarget(p, dir, true)
	if target != filepath.Join(dir, "results.json") {
		t.Fatalf("mergeTarget = %q for a partial run", target)
	}
	earlier, err := loadResults(target)
	if err != nil || earlier == nil {
		t.Fatalf("loadResults: %v, %v", earlier, err)
	}
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 4,6"}
	r.Failover = []failoverResult{{System: "kshard", Seconds: 9.9}, {System: baselineName, Seconds: 10}}
	r.RestartFailover = &restartFailoverResult{InPlaceSeconds: []float64{2.2, 2.4}, InPlaceP50: 2.2, InPlaceP99: 2.4, LeaseWaitP50: 9.8, LeaseWaitP99: 9.9}
	kept, err := r.keepEarlier(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []int{1, 2, 3, 5, 7}) {
		t.Errorf("kept phases %v, want [1 2 3 5 7]", kept)
	}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	merged, err := loadResults(target)
	if err != nil {
		t.Fatal(err)
	}
	// The new phases replace the old figures; the kept ones survive.
	if merged.FailoverSeconds == nil || *merged.FailoverSeconds != 9.9 {
		t.Errorf("failover_seconds = %v, want this run's 9.9", merged.FailoverSeconds)
	}
	if merged.RestartFailoverSeconds == nil || *merged.RestartFailoverSeconds != 2.2 {
		t.Errorf("restart_failover_seconds = %v, want 2.2", merged.RestartFailoverSeconds)
	}
	// The kept samples recorded no machine load: measured, not judged.
	if m := merged.ThroughputRatio4Measured; m == nil || *m != 3.5 || merged.ThroughputRatio4 != nil || merged.ThroughputRatio4NotJudged != "machine load not recorded" {
		t.Errorf("throughput_ratio_4 = %v, measured %v (%q); want null, the earlier run's 3.5 measured, not judged for want of load", merged.ThroughputRatio4, m, merged.ThroughputRatio4NotJudged)
	}
	if merged.RSSRatio == nil || merged.HandoffP99Seconds == nil || merged.CeilingWritesPerSec == nil {
		t.Errorf("kept headline figures missing: rss %v handoff %v ceiling %v", merged.RSSRatio, merged.HandoffP99Seconds, merged.CeilingWritesPerSec)
	}
	if merged.Sharded == nil || merged.Sharded.RSSRatio == nil || *merged.Sharded.RSSRatio != 0.35 {
		t.Errorf("kept phase 7 headline = %+v, want rss_ratio 0.35", merged.Sharded)
	}
	pv, ok := merged.Provenance["5"]
	if !ok || pv.Command != "go run ./e2e/bench" || pv.Date != "2026-11-20" {
		t.Errorf("provenance of phase 5 = %+v, want the full run's", pv)
	}
	if _, ok := merged.Provenance["4"]; ok {
		t.Error("phase 4 was measured by this run but is listed as kept")
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Assembled from several runs") {
		t.Error("RESULTS.md does not say it was assembled from several runs")
	}

	// A second partial run keeps the first run's provenance, not the
	// intermediate file's command.
	p2 := defaultParams(false)
	p2.Phases = map[int]bool{3: true}
	r2 := &results{Params: p2, Command: "go run ./e2e/bench -phases 3"}
	r2.Handoff = []handoffResult{{System: "kshard", Replicas: 2, Rollout: delayStats{Updates: 3, P99Seconds: 0.2}}}
	if _, err := r2.keepEarlier(merged); err != nil {
		t.Fatal(err)
	}
	if got := r2.Provenance["5"].Command; got != "go run ./e2e/bench" {
		t.Errorf("phase 5 provenance after two merges: %q", got)
	}
	if got := r2.Provenance["4"].Command; got != "go run ./e2e/bench -phases 4,6" {
		t.Errorf("phase 4 provenance after two merges: %q", got)
	}
}

// Phase 6 measures kshard and the adapter: a later run of other phases
// keeps both (a phase 10 run once dropped the adapter's).
func TestPartialRunKeepsPhase6OfBothSystems(t *testing.T) {
	full := defaultParams(false)
	earlier := &results{Params: full, Command: "go run ./e2e/bench -phases 6",
		RestartFailover:        &restartFailoverResult{System: nativeName, InPlaceSeconds: []float64{2.1}, InPlaceP50: 2.1},
		RestartFailoverAdapter: &restartFailoverResult{System: adapterName, InPlaceSeconds: []float64{2.3}, InPlaceP50: 2.3}}
	p := defaultParams(false)
	p.Phases = map[int]bool{10: true}
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 10"}
	kept, err := r.keepEarlier(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kept, 6) || r.RestartFailover != earlier.RestartFailover || r.RestartFailoverAdapter != earlier.RestartFailoverAdapter {
		t.Errorf("kept %v; phase 6 kshard %+v, adapter %+v: want both of the earlier run's", kept, r.RestartFailover, r.RestartFailoverAdapter)
	}
}

func TestMergeRefusesAQuickFileForAFullRun(t *testing.T) {
	dir := t.TempDir()
	q := &results{Params: defaultParams(true)}
	if err := q.write(dir); err != nil {
		t.Fatal(err)
	}
	earlier, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := defaultParams(false)
	p.Phases = map[int]bool{4: true}
	if _, err := (&results{Params: p}).keepEarlier(earlier); err == nil || !strings.Contains(err.Error(), "-quick") {
		t.Errorf("merging a full run into a quick file: err = %v, want one naming -quick", err)
	}
}

func TestFullRunAndMergeOffReplace(t *testing.T) {
	all := defaultParams(false)
	for _, ph := range allPhases {
		all.Phases[ph] = true
	}
	if got := mergeTarget(all, "/x", true); got != "" {
		t.Errorf("a run of every phase merges into %q", got)
	}
	// Phase 9 runs only when asked for: a default run keeps its figures.
	if got := mergeTarget(defaultParams(false), "/x", true); got != filepath.Join("/x", "results.json") {
		t.Errorf("a default run merges into %q, want /x/results.json (to keep phase 9)", got)
	}
	p := defaultParams(false)
	p.Phases = map[int]bool{4: true}
	if got := mergeTarget(p, "/x", false); got != "" {
		t.Errorf("-merge=false still merges into %q", got)
	}
	if r, err := loadResults(filepath.Join(t.TempDir(), "results.json")); r != nil || err != nil {
		t.Errorf("a missing file: %v, %v; want nothing to merge and no error", r, err)
	}
	bad := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadResults(bad); err == nil || !strings.Contains(err.Error(), "-merge=false") {
		t.Errorf("a malformed file: err = %v, want one naming -merge=false", err)
	}
}

// Phase 8 kept from a run of 3 rounds says 3 rounds, whatever this run's
// -rounds.
func TestKeptPhase8SaysItsOwnRounds(t *testing.T) {
	p := defaultParams(false)
	p.Rounds = 2
	r := &results{Params: p, ShardedHandoff: []shardedHandoffResult{{Gate: true, CacheMode: "server", Throughput: []throughputResult{
		{Round: 1, System: nativeName, Replicas: 4}, {Round: 3, System: nativeName, Replicas: 4}, {Round: 2, System: baselineName, Replicas: 2}}}}}
	r.summarise()
	if md := r.markdown(); !strings.Contains(md, "20ms per reconcile, 3 round(s)") {
		t.Error("phase 8's section does not give the rounds its samples ran")
	}
}

// Every phase names the commit that measured it: this run's for its own
// phases, the earlier run's for kept ones, "not recorded" for a run from
// before commits were recorded.
func TestPhaseCommitsNameTheRunOfEachPhase(t *testing.T) {
	dir := t.TempDir()
	fullRun(t, dir) // no commit recorded
	earlier, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := defaultParams(false)
	p.Phases = map[int]bool{4: true}
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 4", Env: env{Date: "2026-12-06", LoadStart: "0.50 0.40 0.30", Commit: "def5678"}}
	r.Failover = []failoverResult{{System: "kshard", Seconds: 9.9}, {System: baselineName, Seconds: 10}}
	if _, err := r.keepEarlier(earlier); err != nil {
		t.Fatal(err)
	}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	merged, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := merged.PhaseCommits["4"]; got != "def5678" {
		t.Errorf("phase 4 commit = %q, want this run's def5678", got)
	}
	if got := merged.PhaseCommits["5"]; got != notRecorded {
		t.Errorf("phase 5 commit = %q, want %q (its run predates commits)", got, notRecorded)
	}

	// A later run keeps phase 4 with its commit in the provenance.
	p2 := defaultParams(false)
	p2.Phases = map[int]bool{3: true}
	r2 := &results{Params: p2, Command: "go run ./e2e/bench -phases 3", Env: env{Date: "2026-12-07", Commit: "aaa1111+dirty"}}
	r2.Handoff = []handoffResult{{System: "kshard", Replicas: 2, Rollout: delayStats{Updates: 3, P99Seconds: 0.2}}}
	if _, err := r2.keepEarlier(merged); err != nil {
		t.Fatal(err)
	}
	if err := r2.write(dir); err != nil {
		t.Fatal(err)
	}
	if got := r2.Provenance["4"].Commit; got != "def5678" {
		t.Errorf("phase 4 provenance commit = %q, want def5678", got)
	}
	want := map[string]string{"1": notRecorded, "2": notRecorded, "3": "aaa1111+dirty", "4": "def5678", "5": notRecorded, "7": notRecorded}
	for ph, c := range want {
		if r2.PhaseCommits[ph] != c {
			t.Errorf("phase_commits[%s] = %q, want %q (all: %v)", ph, r2.PhaseCommits[ph], c, r2.PhaseCommits)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| phase | commit | date | load at start |", "| 4 | def5678 | 2026-12-06 | 0.50 0.40 0.30 |", "| 3 | aaa1111+dirty | 2026-12-07 |", "| 5 | not recorded | 2026-11-20 | 1.00 1.00 1.00 |"} {
		if !strings.Contains(string(md), row) {
			t.Errorf("RESULTS.md lacks the row %q", row)
		}
	}
}

func TestDirtyBeyondOutput(t *testing.T) {
	for _, c := range []struct {
		porcelain string
		dirty     bool
	}{
		{"", false},
		{" M e2e/bench/results.json\n M e2e/bench/RESULTS.md\n M e2e/bench/rss.png\n", false},
		{" M e2e/bench/results.json\n M e2e/bench/main.go\n", true},
		{"M  shard/ring.go\n", true},
		{" M e2e/bench/charts/results.json\n", true},
		{"R  e2e/bench/old.png -> e2e/bench/new.png\n", false},
	} {
		if got := dirtyBeyondOutput(c.porcelain); got != c.dirty {
			t.Errorf("dirtyBeyondOutput(%q) = %t, want %t", c.porcelain, got, c.dirty)
		}
	}
}

// -labels-parts throughput measures the spread layout's throughput alone
// and keeps the rest of phase 10, each part named by the run that measured
// it, also through a later run that keeps phase 10 whole.
func TestLabelsThroughputPartKeepsTheRestOfPhase10(t *testing.T) {
	dir := t.TempDir()
	full := defaultParams(false)
	first := &results{Params: full, Command: "go run ./e2e/bench", Env: env{Date: "2026-11-29", Commit: "1111111"}, Labels: labelsFixture()}
	if err := first.write(dir); err != nil {
		t.Fatal(err)
	}
	prev, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := defaultParams(false)
	p.Phases, p.LabelsParts, p.LabelsLayouts = map[int]bool{10: true}, labelsPartsThroughput, []string{layoutSpread}
	if mergeTarget(p, dir, true) == "" {
		t.Fatal("a throughput-only run of phase 10 does not merge into results.json")
	}
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 10 -labels-parts throughput", Env: env{Date: "2026-12-06", Commit: "2222222"}}
	spread := labelsLayout{Layout: layoutSpread, Namespaces: 1, LabelledFirst: true, Ceiling: []ceilingResult{{Round: 1, Goroutines: 16, WritesPerSec: 600}}}
	spread.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ObjectsPerSec: 55, LatencyMS: 70},
		{Round: 1, System: nativeName, Replicas: 4, ObjectsPerSec: 209, LatencyMS: 70, Objects: 2000, MachineBusy: 0.5}}
	r.Labels = &labelsResults{Layouts: []labelsLayout{spread}}
	if _, err := r.keepEarlier(prev); err != nil {
		t.Fatal(err)
	}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	if n := len(r.Labels.Layouts); n != 2 || r.Labels.Layouts[0].Layout != layoutSpread || r.Labels.Layouts[1].Layout != layoutSingle {
		t.Fatalf("layouts %d, want spread then single namespace", n)
	}
	got := r.Labels.Layouts[0]
	old := prev.Labels.Layouts[0]
	if len(got.Runs) != len(old.Runs) || len(got.FirstStarts) != len(old.FirstStarts) || got.Handoff == nil || got.Failover == nil || got.Namespaces != 500 {
		t.Errorf("spread layout lost its memory rounds, first starts, handoff or failover: %d runs, %d first starts", len(got.Runs), len(got.FirstStarts))
	}
	if len(got.Throughput.Samples) != 2 || got.Throughput.Samples[1].ObjectsPerSec != 209 {
		t.Errorf("spread throughput %+v, want this run's", got.Throughput.Samples)
	}
	if g := r.ShardedGateOff; g == nil || g.ThroughputRatio4 == nil || math.Abs(*g.ThroughputRatio4-3.8) > 1e-9 || g.RSSRatio == nil {
		t.Errorf("sharded_gate_off %+v: want this run's throughput ratio 3.8 and the kept memory ratios", g)
	}
	want := map[string]string{labelsThroughputPart: "2222222", "10 (spread)": "1111111", "10 (single namespace)": "1111111"}
	for k, c := range want {
		if r.PhaseCommits[k] != c {
			t.Errorf("phase_commits[%q] = %q, want %q (all %v)", k, r.PhaseCommits[k], c, r.PhaseCommits)
		}
	}
	if _, ok := r.PhaseCommits["10"]; ok {
		t.Errorf("phase_commits names all of phase 10 (%v) though this run measured its spread throughput only", r.PhaseCommits)
	}

	// A later run of phase 2 keeps phase 10 whole, each part's run named.
	merged, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	p2 := defaultParams(false)
	p2.Phases = map[int]bool{2: true}
	r2 := &results{Params: p2, Command: "go run ./e2e/bench -phases 2", Env: env{Date: "2026-12-07", Commit: "3333333"}}
	if _, err := r2.keepEarlier(merged); err != nil {
		t.Fatal(err)
	}
	if err := r2.write(dir); err != nil {
		t.Fatal(err)
	}
	for k, c := range want {
		if r2.PhaseCommits[k] != c {
			t.Errorf("after a later run: phase_commits[%q] = %q, want %q (all %v)", k, r2.PhaseCommits[k], c, r2.PhaseCommits)
		}
	}
	if r2.Provenance[labelsThroughputPart].Command != r.Command {
		t.Errorf("provenance of %s = %+v, want the throughput-only run", labelsThroughputPart, r2.Provenance[labelsThroughputPart])
	}
}
