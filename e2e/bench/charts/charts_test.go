package main

import (
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The committed results.json draws every chart RESULTS.md shows, each a
// PNG of the chart size and well under the 1 MiB limit on tracked files.
func TestCommittedResultsDrawEveryChart(t *testing.T) {
	dir := t.TempDir()
	if err := run("../results.json", dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		path := filepath.Join(dir, c.file)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		want := int(chartWidth.Dots(chartDPI))
		if w := img.Bounds().Dx(); w != want {
			t.Errorf("%s is %d pixels wide, want %d", c.file, w, want)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 512<<10 {
			t.Errorf("%s is %d KiB; keep each chart under 512 KiB", c.file, st.Size()>>10)
		}
	}
}

// RESULTS.md (e2e/bench/report.go writes it) links every chart this
// command draws, under the same file name.
func TestResultsMarkdownShowsEveryChart(t *testing.T) {
	md, err := os.ReadFile("../RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if !strings.Contains(string(md), "]("+c.file+")") {
			t.Errorf("RESULTS.md does not show %s; e2e/bench/report.go should link it", c.file)
		}
	}
}

// A file with none of the charted phases (a run of phases 1, 4 and 6)
// still yields every PNG RESULTS.md links to, each titled as not measured.
func TestAbsentPhasesAreSaidNotMeasured(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.json")
	if err := os.WriteFile(in, []byte(`{"params": {"latency": "20ms"}, "ceiling": [{"round": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	r, err := readResults(in)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := throughputChart(r)
	if err != nil {
		t.Fatal(err)
	}
	ho, err := handoffChart(r)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := rssChart(r)
	if err != nil {
		t.Fatal(err)
	}
	titles := []string{tp.Title.Text, ho.Title.Text}
	for _, p := range rss.(panels).plots {
		titles = append(titles, p.Title.Text)
	}
	for _, title := range titles {
		if !strings.Contains(title, "not measured") {
			t.Errorf("title %q does not say the chart's phases were not measured", title)
		}
	}
}

func TestReadResultsSaysWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	if _, err := readResults(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "-results") {
		t.Errorf("missing file: error %v does not point at -results", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"throughput": [1, 2]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readResults(bad); err == nil || !strings.Contains(err.Error(), "not the bench's results.json") {
		t.Errorf("wrong shape: error %v does not say the file is not a results.json", err)
	}
}

// Phase 8 keeps only samples: kshard's are grouped by cache mode and epoch
// layout (an empty layout is an epoch per namespace, as the bench writes
// it), in the order they first appear; controller-runtime's are left out.
func TestPhase8ThroughputGroupsRounds(t *testing.T) {
	runs := []shardedHandoffRun{
		{CacheMode: shardedMode, Throughput: []throughputSample{
			{System: crName, Replicas: 2, ObjectsPerSec: 150, Epochs: "one epoch"},
			{System: kshardName, Replicas: 4, ObjectsPerSec: 600, Epochs: "one epoch"},
			{System: kshardName, Replicas: 4, ObjectsPerSec: 500},
			{System: kshardName, Replicas: 4, ObjectsPerSec: 580, Epochs: "one epoch"},
			{System: kshardName, Replicas: 4, ObjectsPerSec: 620, Epochs: "one epoch"},
		}},
		{CacheMode: fallbackMode, Throughput: []throughputSample{
			{System: kshardName, Replicas: 4, ObjectsPerSec: 400, Epochs: "one epoch"},
			{System: kshardName, Replicas: 4, ObjectsPerSec: 500, Epochs: "one epoch"},
		}},
	}
	got := phase8Throughput(runs)
	want := []phase8Group{
		{mode: shardedMode, epochs: "one epoch", replicas: 4, median: 600, min: 580, max: 620},
		{mode: shardedMode, epochs: "epoch per namespace", replicas: 4, median: 500, min: 500, max: 500},
		{mode: fallbackMode, epochs: "one epoch", replicas: 4, median: 450, min: 400, max: 500},
	}
	if !slices.Equal(got, want) {
		t.Errorf("phase8Throughput =\n%+v\nwant\n%+v", got, want)
	}
}

// Rows run top to bottom phase 3, 8, 9; a rolling restart with no updates
// or a phase 9 configuration that failed has no distribution to show.
func TestHandoffRowsOrderAndSkips(t *testing.T) {
	r := &results{
		Handoff: []handoffRun{
			{System: crName, Replicas: 2, Rollout: delays{Updates: 85, P50: 0.04, P99: 0.6, Max: 0.65}},
			{System: kshardName, Replicas: 2},
		},
		ShardedHandoff: []shardedHandoffRun{{CacheMode: shardedMode, Handoff: handoffRun{Replicas: 3, Rollout: delays{Updates: 116, P50: 0.03, P99: 0.05, Max: 0.06}}}},
	}
	r.Scale = &struct {
		Runs []scaleRun `json:"runs"`
	}{Runs: []scaleRun{
		{Replicas: 64, Objects: 100000, Rollout: delays{Updates: 5121, P50: 0.02, P99: 2, Max: 3}},
		{Replicas: 128, Objects: 100000, Failed: "not formed", Rollout: delays{Updates: 10}},
	}}
	var labels []string
	for _, row := range handoffRows(r) {
		labels = append(labels, row.label)
	}
	want := []string{
		"phase 3: controller-runtime, 2 replicas (85 updates)",
		"phase 8: kshard sharded cache, 3 replicas (116 updates)",
		"phase 9: kshard sharded, 64 replicas, 100,000 objects (5,121 updates)",
	}
	if !slices.Equal(labels, want) {
		t.Errorf("rows =\n%q\nwant\n%q", labels, want)
	}
}

// With percentiles recorded, the handoff chart draws them; a file with a
// zero delay (hand-edited) still draws on the log axis.
func TestHandoffChartDrawsPercentiles(t *testing.T) {
	pct := make([]float64, 100)
	for i := range pct {
		pct[i] = 0.01 * math.Pow(1.04, float64(i))
	}
	pct[0] = 0
	r := &results{Handoff: []handoffRun{{System: kshardName, Replicas: 2, Rollout: delays{Updates: 2000, P50: pct[49], P99: pct[98], Max: pct[99], Percentiles: pct}}}}
	p, err := handoffChart(r)
	if err != nil {
		t.Fatal(err)
	}
	if p.X.Min != -4 || p.X.Max != 0 {
		t.Errorf("x axis spans 10^%v to 10^%v s, want 10^-4 (the zero, clamped) to 10^0 (the decade above the max, %.2f s)", p.X.Min, p.X.Max, pct[99])
	}
	if err := savePNG(p, filepath.Join(t.TempDir(), "handoff.png")); err != nil {
		t.Fatal(err)
	}
}

func TestDenseTicksAreRoundAndCoverTheAxis(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		labels []string
	}{
		{0, 650, []string{"0", "100", "200", "300", "400", "500", "600"}},
		{0, 0.7, []string{"0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"}},
		{0, 20, []string{"0", "2.5", "5", "7.5", "10", "12.5", "15", "17.5", "20"}},
		{5, 5, []string{"5"}},
	} {
		var labels []string
		for _, tk := range (denseTicks{}).Ticks(c.lo, c.hi) {
			labels = append(labels, tk.Label)
		}
		if !slices.Equal(labels, c.labels) {
			t.Errorf("ticks over [%v, %v] = %q, want %q", c.lo, c.hi, labels, c.labels)
		}
	}
}

func TestDecadeTicksLabelDecades(t *testing.T) {
	var labels []string
	minor := 0
	for _, tk := range decadeTicks(-2, 0) {
		if tk.Label == "" {
			minor++
			continue
		}
		labels = append(labels, tk.Label)
	}
	if want := []string{"0.01", "0.1", "1"}; !slices.Equal(labels, want) || minor != 16 {
		t.Errorf("decade ticks over 0.01–1 s: labels %q and %d minor ticks, want %q and 16", labels, minor, want)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// Phase 10 (the gate-free sharded cache on custom resources) joins each
// chart: its rolling restart a handoff row, its 4-replica runs a point
// beside phase 8's, and each layout's leader and kshard a line of medians
// over the rounds in the cache-mode panel.
func TestPhase10JoinsTheCharts(t *testing.T) {
	in := filepath.Join(t.TempDir(), "results.json")
	js := `{"params": {"latency": "20ms", "workers_per_replica": 4},
	  "sharded_runs": [
	    {"system": "controller-runtime", "kind": "BenchObject", "cache_mode": "full", "replicas": 2, "objects": 10000, "max_peak_rss_mib": 90},
	    {"system": "kshard", "cache_mode": "sharded", "replicas": 3, "objects": 10000, "max_peak_rss_mib": 40}],
	  "sharded_gate_off_runs": {"layouts": [
	    {"layout": "spread", "namespaces": 500,
	     "runs": [
	       {"system": "controller-runtime", "round": 1, "objects": 1000, "max_peak_rss_mib": 100},
	       {"system": "kshard", "round": 1, "objects": 1000, "max_peak_rss_mib": 35},
	       {"system": "controller-runtime", "round": 2, "objects": 1000, "max_peak_rss_mib": 300},
	       {"system": "kshard", "round": 2, "objects": 1000, "max_peak_rss_mib": 45},
	       {"system": "controller-runtime", "round": 3, "objects": 1000, "max_peak_rss_mib": 120},
	       {"system": "kshard", "round": 3, "objects": 1000, "max_peak_rss_mib": 40}],
	     "throughput": {"configs": [
	       {"system": "controller-runtime", "replicas": 2, "objects_per_second_median": 100, "objects_per_second_min": 90, "objects_per_second_max": 110},
	       {"system": "kshard", "replicas": 4, "objects_per_second_median": 370, "objects_per_second_min": 350, "objects_per_second_max": 380, "ratio_to_baseline_median": 3.7}]},
	     "handoff": {"system": "kshard", "replicas": 3, "rollout": {"updates": 40, "p50_seconds": 0.02, "p99_seconds": 0.05, "max_seconds": 0.06}}},
	    {"layout": "single namespace", "namespaces": 1,
	     "runs": [{"system": "controller-runtime", "round": 1, "objects": 1000, "max_peak_rss_mib": 110}, {"system": "kshard", "round": 1, "objects": 1000, "max_peak_rss_mib": 42}],
	     "throughput": {}}]}}`
	if err := os.WriteFile(in, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readResults(in)
	if err != nil {
		t.Fatal(err)
	}
	rows := handoffRows(r)
	if len(rows) != 1 || rows[0].label != "phase 10: kshard labels cache, custom resources, 3 replicas (40 updates)" {
		t.Errorf("handoff rows %+v", rows)
	}
	tp := phase10Throughput(r)
	if len(tp) != 1 || tp[0].Replicas != 4 || tp[0].Median != 370 || tp[0].Ratio == nil || *tp[0].Ratio != 3.7 {
		t.Errorf("phase 10 throughput %+v, want kshard's 4-replica configuration only", tp)
	}
	fig, err := rssChart(r)
	if err != nil {
		t.Fatal(err)
	}
	modes := fig.(panels).plots[0]
	// The leader's median over the rounds is 120: the 300 of round 2 is
	// no point of its own, and the scale is shared by both panels.
	if modes.Y.Max < 120 || modes.Y.Max > 1.1*120 {
		t.Errorf("cache-mode panel's y axis reaches %v; want the phase 10 leader's median peak, 120, plus a margin", modes.Y.Max)
	}
	if err := run(in, t.TempDir(), io.Discard); err != nil {
		t.Fatal(err)
	}
}
