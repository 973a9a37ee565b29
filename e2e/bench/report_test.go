package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// loadedAt marks latency-bound samples as measured at 20 ms with the
// machine busy at busy.
func loadedAt(busy float64, samples []throughputResult) {
	for i := range samples {
		samples[i].LatencyMS, samples[i].MachineBusy, samples[i].Objects = 20, busy, max(samples[i].Objects, 200)
	}
}

func TestSummaryTakesRatiosWithinRounds(t *testing.T) {
	r := &results{Params: defaultParams(false)}
	// Round 2 ran on a machine twice as loaded: every rate halves, the
	// per-round ratios stay the same.
	for round, scale := range map[int]float64{1: 1, 2: 0.5, 3: 1} {
		r.Ceiling = append(r.Ceiling, ceilingResult{Round: round, Goroutines: 16, WritesPerSec: 1000 * scale})
		r.Throughput.Samples = append(r.Throughput.Samples,
			throughputResult{Round: round, System: baselineName, Replicas: 2, ObjectsPerSec: 200 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 1, ObjectsPerSec: 190 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 4, ObjectsPerSec: 760 * scale})
		r.WriteBound.Samples = append(r.WriteBound.Samples,
			throughputResult{Round: round, System: baselineName, Replicas: 2, ObjectsPerSec: 600 * scale},
			throughputResult{Round: round, System: "kshard", Replicas: 4, ObjectsPerSec: 900 * scale})
	}
	loadedAt(0.5, r.Throughput.Samples)
	r.summarise()
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"throughput_ratio_1": {r.ThroughputRatio1, 0.95},
		"throughput_ratio_4": {r.ThroughputRatio4, 3.8},
		"ceiling_fraction_4": {r.CeilingFraction4, 0.9},
		"ceiling":            {r.CeilingWritesPerSec, 1000},
	} {
		if c.got == nil || *c.got < c.want-1e-9 || *c.got > c.want+1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if r.ThroughputRatio2 != nil {
		t.Errorf("throughput_ratio_2 = %v, want null: 2 replicas did not run", *r.ThroughputRatio2)
	}
}

func TestWriteProducesEveryFile(t *testing.T) {
	dir := t.TempDir()
	r := &results{Params: defaultParams(true)}
	r.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ActiveReplicas: 1, ObjectsPerSec: 150, Seconds: 1},
		{Round: 1, System: "kshard", Replicas: 4, ActiveReplicas: 4, ObjectsPerSec: 500, Seconds: 0.3, Objects: 200, MachineBusy: 0.974, MachineBusyAll: 0.99, BackgroundBusy: 0.016, FleetCPUSeconds: 0.5},
		// Recorded before 5aeb9a8 and after its fix: machine_busy counts niced time.
		{Round: 1, System: nativeName, Replicas: 1, ActiveReplicas: 1, ObjectsPerSec: 150, Seconds: 1.33, Objects: 200, MachineBusy: 0.5, FleetCPUSeconds: 0.2},
	}
	r.Handoff = []handoffResult{{System: "kshard", Replicas: 2, Rollout: delayStats{Updates: 3, P99Seconds: 0.1}}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"throughput_ratio_1", "throughput_ratio_2", "throughput_ratio_4", "ceiling_fraction_4",
		"handoff_p99_seconds", "handoff_p99_seconds_baseline", "failover_seconds", "failover_seconds_baseline", "rss_ratio"} {
		if _, ok := got[k]; !ok {
			t.Errorf("results.json lacks %q", k)
		}
	}
	if p := got["params"].(map[string]any); p["latency"] != (20 * time.Millisecond).String() {
		t.Errorf("params.latency = %v, want %q", p["latency"], "20ms")
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Every run says how busy the machine was and what the operators spent
	// per object; a run without the measurement (older results) says so.
	for _, row := range []string{"| 1 | kshard | 4 | 0.30 | 500 | 0.0 | 99 % (niced 2 %) | 2.50 |", "| 1 | kshard | 1 | 1.33 | 150 | 0.0 | 50 % | 1.00 |", "| 1 | controller-runtime | 2 | 1.00 | 150 | 0.0 | — | — |"} {
		if !strings.Contains(string(md), row) {
			t.Errorf("RESULTS.md lacks the run %q", row)
		}
	}
	// e2e/bench/charts draws these beside RESULTS.md (make charts).
	for _, chart := range []string{"throughput.png", "rss.png", "handoff.png"} {
		if !strings.Contains(string(md), "]("+chart+")") {
			t.Errorf("RESULTS.md does not show %s", chart)
		}
	}
}

// The percentiles e2e/bench/charts draws agree with the headline p50, p99
// and max, rise, and are as many whatever the number of updates.
func TestDelayPercentiles(t *testing.T) {
	for _, n := range []int{1, 7, 2000} {
		ds := make([]delay, n)
		for i := range ds {
			ds[i] = delay{d: time.Duration((i*7919)%n+1) * time.Millisecond} // 1..n ms, shuffled
		}
		s := summarise(ds)
		if len(s.Percentiles) != 100 {
			t.Fatalf("%d delays: %d percentiles, want 100", n, len(s.Percentiles))
		}
		if s.Percentiles[49] != s.P50Seconds || s.Percentiles[98] != s.P99Seconds || s.Percentiles[99] != s.MaxSeconds {
			t.Errorf("%d delays: percentiles 50, 99, 100 = %v, %v, %v; headline p50 %v, p99 %v, max %v", n,
				s.Percentiles[49], s.Percentiles[98], s.Percentiles[99], s.P50Seconds, s.P99Seconds, s.MaxSeconds)
		}
		if !slices.IsSorted(s.Percentiles) {
			t.Errorf("%d delays: percentiles not rising: %v", n, s.Percentiles)
		}
		if want := float64(n) / 1000; s.MaxSeconds != want {
			t.Errorf("%d delays: max %v, want %v", n, s.MaxSeconds, want)
		}
	}
	if s := summarise(nil); s.Percentiles != nil {
		t.Errorf("no delays: percentiles %v, want none", s.Percentiles)
	}
}

// paramsFromView reads back every serialised parameter of a results.json;
// the ones results.json leaves out (timeouts) stay zero.
func TestParamsRoundTripThroughResultsJSON(t *testing.T) {
	for _, quick := range []bool{false, true} {
		want := defaultParams(quick)
		want.ScaleLeaseFixed, want.ShardedBalance = true, 0.05
		js, err := json.Marshal(paramsView(want))
		if err != nil {
			t.Fatal(err)
		}
		var view map[string]any
		if err := json.Unmarshal(js, &view); err != nil {
			t.Fatal(err)
		}
		got, err := paramsFromView(view)
		if err != nil {
			t.Fatal(err)
		}
		want.ReadyTimeout, want.StopTimeout, want.Timeout = 0, 0, 0
		if !reflect.DeepEqual(got, want) {
			t.Errorf("quick=%t: read back\n%+v\nwant\n%+v", quick, got, want)
		}
	}
	if _, err := paramsFromView(map[string]any{"latency": "fast"}); err == nil || !strings.Contains(err.Error(), "params.latency") {
		t.Errorf("a bad duration: error %v does not name params.latency", err)
	}
	if _, err := paramsFromView(map[string]any{"objects": "many"}); err == nil || !strings.Contains(err.Error(), "params.objects") {
		t.Errorf("a bad count: error %v does not name params.objects", err)
	}
}

// -report-only renders the RESULTS.md the run wrote, from results.json
// alone, and leaves results.json as it was.
func TestRewriteReportRendersTheSameReport(t *testing.T) {
	dir := t.TempDir()
	fullRun(t, dir)
	mdPath, jsPath := filepath.Join(dir, "RESULTS.md"), filepath.Join(dir, "results.json")
	want, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(jsPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(mdPath); err != nil {
		t.Fatal(err)
	}
	if err := rewriteReport(dir, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("RESULTS.md rendered again differs from the run's:\n%s\nwant\n%s", got, want)
	}
	if after, err := os.ReadFile(jsPath); err != nil || string(after) != string(js) {
		t.Errorf("results.json changed (%v)", err)
	}
	if err := rewriteReport(t.TempDir(), false); err == nil || !strings.Contains(err.Error(), "run the benchmark first") {
		t.Errorf("no results.json: error %v does not say to run the benchmark", err)
	}
}

func TestParseObserved(t *testing.T) {
	for in, want := range map[string][2]int{"3/7": {3, 7}, "": {0, 0}, "x": {0, 0}, "2/": {2, 0}} {
		if g, e := parseObserved(in); g != want[0] || e != want[1] {
			t.Errorf("parseObserved(%q) = %d, %d; want %v", in, g, e, want)
		}
	}
}

// The sharded headlines take phase 7's largest object count, the
// controller-runtime leader (its largest replica) as the reference, its
// standby as the idle floor, and phase 8's run on the same control plane;
// the fallback's divide by the gate-on controller-runtime runs.
func TestShardedSummary(t *testing.T) {
	runs := []shardedResult{
		{System: baselineName, Gate: true, Objects: 10, MaxPeakRSSMiB: 100, MinPeakRSSMiB: 30, FleetCPU: 10},
		{System: nativeName, Gate: true, Objects: 10, MaxPeakRSSMiB: 50, FleetCPU: 12},
		{System: baselineName, Gate: true, Objects: 50, MaxPeakRSSMiB: 400, MinPeakRSSMiB: 40, FleetCPU: 40},
		{System: nativeName, Gate: true, Objects: 50, MaxPeakRSSMiB: 140, FleetCPU: 44},
		{System: nativeName, Gate: false, Objects: 50, MaxPeakRSSMiB: 420, FleetCPU: 90},
	}
	moves := []shardedHandoffResult{
		{Gate: true, Objects: 100, ConfigMaps: 100, ThroughputRatio4: ptr(3.7), Throughput: []throughputResult{
			{System: nativeName, Replicas: 4, Epochs: epochsName(true), LatencyMS: 70, Objects: 100, MachineBusy: 0.6},
			{System: nativeName, Replicas: 4, Epochs: epochsName(false), LatencyMS: 70, Objects: 100, MachineBusy: 0.9}}, Handoff: handoffResult{Rollout: delayStats{Updates: 9, P99Seconds: 0.25}, ObjectsListed: 210}, Failover: failoverResult{Seconds: 9.5}},
		{Gate: false, Objects: 100, ConfigMaps: 100, ThroughputRatio4: ptr(3.1), Throughput: []throughputResult{
			{System: nativeName, Replicas: 4, Epochs: epochsName(true), LatencyMS: 70, Objects: 100, MachineBusy: 0.8}}, Handoff: handoffResult{Rollout: delayStats{Updates: 9, P99Seconds: 0.5}, ObjectsListed: 400}, Failover: failoverResult{Seconds: 9.75}},
	}
	s, fb := summariseSharded(runs, moves)
	if s == nil || fb == nil {
		t.Fatalf("headlines %v, %v; want both", s, fb)
	}
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"rss_ratio":                        {s.RSSRatio, 0.35},
		"rss_ratio_smallest":               {s.RSSRatioSmall, 0.5},
		"idle_floor_ratio":                 {s.IdleFloorRatio, 0.1},
		"fleet_cpu_ratio":                  {s.FleetCPURatio, 1.1},
		"throughput_ratio_4":               {s.ThroughputRatio4, 3.7},
		"handoff_p99_seconds":              {s.HandoffP99Seconds, 0.25},
		"failover_seconds":                 {s.FailoverSeconds, 9.5},
		"objects_listed_per_move":          {s.ObjectsListedPerMove, 1.05},
		"sharded_fallback.rss_ratio":       {fb.RSSRatio, 1.05},
		"sharded_fallback.fleet_cpu_ratio": {fb.FleetCPURatio, 2.25},
		"sharded_fallback.throughput_4":    {fb.ThroughputRatio4Measured, 3.1},
		"throughput_ratio_4_machine_busy":  {s.ThroughputRatio4MachineBusy, 0.6},
		"throughput_ratio_4_latency_ms":    {s.ThroughputRatio4LatencyMS, 70},
		"sharded_fallback.listed_per_move": {fb.ObjectsListedPerMove, 2},
	} {
		if c.got == nil || math.Abs(*c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	// The fallback's rounds ran on a machine 80 % busy: not judged.
	if fb.ThroughputRatio4 != nil || fb.ThroughputRatio4NotJudged != "machine 80 % busy" {
		t.Errorf("sharded_fallback.throughput_ratio_4 = %v (%q), want null, not judged: machine 80 %% busy", fb.ThroughputRatio4, fb.ThroughputRatio4NotJudged)
	}
	if s.Objects != 50 {
		t.Errorf("objects %d, want the largest count 50", s.Objects)
	}
	if fb.IdleFloorRatio != nil || fb.RSSRatioSmall != nil {
		t.Errorf("fallback idle floor %v, smallest-count ratio %v; want none (not measured without the gate)", fb.IdleFloorRatio, fb.RSSRatioSmall)
	}
	if s, fb := summariseSharded(nil, nil); s != nil || fb != nil {
		t.Error("no runs must give no headline")
	}
}

func TestFormedSamplesKeepEachSystemsMedian(t *testing.T) {
	var f formedSamples
	kshard, baseline := &system{kshard: true}, &system{}
	for _, s := range []struct {
		sys  *system
		took float64
	}{{baseline, 0.9}, {kshard, 0.5}, {baseline, 0.6}, {kshard, 2.0}, {baseline, 0.7}, {kshard, 0.4}} {
		f.add(s.sys, s.took)
	}
	if f.KshardSeconds != 0.5 || f.CRSeconds != 0.7 {
		t.Errorf("medians kshard %v, controller-runtime %v; want 0.5 and 0.7", f.KshardSeconds, f.CRSeconds)
	}
	if f.Ratio == nil || math.Abs(*f.Ratio-0.5/0.7) > 1e-12 {
		t.Errorf("ratio %v, want %v", f.Ratio, 0.5/0.7)
	}
	if len(f.Kshard) != 3 || len(f.CR) != 3 {
		t.Errorf("samples kshard %v, controller-runtime %v; want 3 each", f.Kshard, f.CR)
	}
}

// -report-only -summarise derives the headline figures again from the
// runs, after a fix to how they are derived; without it they stay.
func TestRewriteReportSummarisesAgainOnRequest(t *testing.T) {
	dir := t.TempDir()
	fullRun(t, dir)
	path := filepath.Join(dir, "results.json")
	r, err := loadResults(path)
	if err != nil || r == nil || r.Summary.CeilingWritesPerSec == nil {
		t.Fatalf("loading the run's results: %v", err)
	}
	derived := *r.Summary.CeilingWritesPerSec
	r.Summary.CeilingWritesPerSec = ptr(derived + 1) // a headline derived by older code
	lines := 15
	if r.Summary.Adapter == nil {
		r.Summary.Adapter = &adapterSummary{}
	}
	r.Summary.Adapter.ChangedLines = &lines // measured from the checkout, kept only here
	r.RestartFailoverAdapter = &restartFailoverResult{System: adapterName, InPlaceSeconds: []float64{2.3}, InPlaceP50: 2.3}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		summarise bool
		want      float64
	}{{false, derived + 1}, {true, derived}} {
		if err := rewriteReport(dir, c.summarise); err != nil {
			t.Fatal(err)
		}
		got, err := loadResults(path)
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Summary.CeilingWritesPerSec; v == nil || *v != c.want {
			t.Errorf("summarise=%t: ceiling headline %v, want %v", c.summarise, deref(v), c.want)
		}
		if a := got.Summary.Adapter; a == nil || a.ChangedLines == nil || *a.ChangedLines != lines {
			t.Errorf("summarise=%t: the conversion's changed lines were lost", c.summarise)
		}
	}
}

// TestModuleVersionReadsTheBinary: the versions recorded in results.json
// come from the binary measured, so a module upgraded in its go.mod shows
// up without a constant to edit.
func TestModuleVersionReadsTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("the test binary carries no build information")
	}
	var want string
	for _, d := range bi.Deps {
		if d.Path == "k8s.io/client-go" {
			want = d.Version
		}
	}
	if want == "" {
		t.Fatal("the test binary has no k8s.io/client-go dependency")
	}
	if got := moduleVersion(self, "k8s.io/client-go"); got != want {
		t.Errorf("moduleVersion(test binary, client-go) = %q, want %q", got, want)
	}
	if got := moduleVersion(self, "example.com/absent"); got != "unknown" {
		t.Errorf("moduleVersion of a module the binary lacks = %q, want unknown", got)
	}
	if got := moduleVersion(filepath.Join(t.TempDir(), "missing"), "k8s.io/client-go"); got != "unknown" {
		t.Errorf("moduleVersion of a missing file = %q, want unknown", got)
	}
}

// RESULTS.md is what -report-only renders from the committed
// results.json: a change to the report's text renders it again (go run
// ./e2e/bench -report-only), and a change that should not touch the
// report, such as splitting markdown into sections, leaves it byte for
// byte.
func TestCommittedResultsRenderTheCommittedReport(t *testing.T) {
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "results.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteReport(dir, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("RESULTS.md line %d differs from what results.json renders (go run ./e2e/bench -report-only renders it again):\ngot:  %.200s\nwant: %.200s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("RESULTS.md has %d lines, results.json renders %d (go run ./e2e/bench -report-only renders it again)", len(wl), len(gl))
	}
}
