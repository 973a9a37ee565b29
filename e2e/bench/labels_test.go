package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kshard/kshard/shard"
)

// The operators take the debug server and the custom resource's Go type
// from e2e/bench/benchkit, a module the harness cannot import (it would
// make kshard's module require it): the harness's names must agree with
// benchkit's.
func TestBenchkitAgreesWithTheHarness(t *testing.T) {
	for file, want := range map[string]string{
		"benchkit/heap.go":        `const DebugServer = "` + debugServer + `"`,
		"benchkit/benchobject.go": fmt.Sprintf("schema.GroupVersion{Group: %q, Version: %q}", benchObjects.GVR.Group, benchObjects.GVR.Version),
	} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("e2e/bench/%s lacks %s, which the harness expects", file, want)
		}
	}
}

// The embedded CRD serves the kind the harness writes and the operators'
// type names.
func TestBenchObjectCRDMatchesTheKind(t *testing.T) {
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(benchObjectCRD), 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(crd.Object, path...); return v }
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("%d versions, want 1", len(versions))
	}
	version, _, _ := unstructured.NestedString(versions[0].(map[string]any), "name")
	got := [4]string{str("spec", "group"), version, str("spec", "names", "plural"), str("spec", "names", "kind")}
	want := [4]string{benchObjects.GVR.Group, benchObjects.GVR.Version, benchObjects.GVR.Resource, benchObjects.Name}
	if got != want {
		t.Errorf("CRD group, version, plural, kind = %v, want %v", got, want)
	}
	if name := str("metadata", "name"); name != benchObjects.GVR.Resource+"."+benchObjects.GVR.Group {
		t.Errorf("CRD name %q", name)
	}
	if l := benchObjects.metricLabel(); l != "bench.kshard.io/v1, Kind=BenchObject" {
		t.Errorf("metric label %q, want kshard_cache_mode's kind label", l)
	}
	if l := configMaps.metricLabel(); l != "/v1, Kind=ConfigMap" {
		t.Errorf("metric label %q, want kshard_cache_mode's kind label", l)
	}
}

// The observer counts the objects whose label names their own partition
// under the ring's key, as labels come, go and change.
func TestObserverCountsPartitionLabels(t *testing.T) {
	o := newObserver()
	if err := o.watchLabels(labelsRing, shard.Config{}); err != nil {
		t.Fatal(err)
	}
	key, err := shard.PartitionLabelKey(labelsRing, shard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := shard.NewPartitioner(shard.DefaultPartitions)
	own := func(ns, name string) string { return shard.PartitionLabelValue(p.Partition(shard.KeyOf(ns, name))) }
	object := func(ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	a, b, c := own("s000", "obj-00000"), own("s001", "obj-00001"), own("kshard-bench", "obj-00000")
	wrong := shard.PartitionLabelValue((p.Partition(shard.KeyOf("s001", "obj-00001")) + 1) % shard.DefaultPartitions)
	o.observe(object("s000", "obj-00000", map[string]string{key: a}))
	o.observe(object("s001", "obj-00001", map[string]string{key: wrong}))
	// The same name in another namespace is another object.
	o.observe(object("kshard-bench", "obj-00000", nil))
	if got := o.labelledCount(); got != 1 {
		t.Fatalf("%d labelled, want 1 (one own label, one naming another partition, one without)", got)
	}
	o.observe(object("s001", "obj-00001", map[string]string{key: b}))
	o.observe(object("kshard-bench", "obj-00000", map[string]string{key: c, "other.kshard.io/xx1-key-p271": "0"}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := o.waitLabelled(ctx, 3); err != nil {
		t.Fatal(err)
	}
	o.observe(object("s000", "obj-00000", map[string]string{labelKey: labelObject})) // stripped
	if got := o.labelledCount(); got != 2 {
		t.Fatalf("%d labelled after a label was stripped, want 2", got)
	}
	if len(o.objs) != 3 {
		t.Errorf("%d objects observed, want 3 (keyed by namespace and name)", len(o.objs))
	}
}

// labelsRun is a phase 10 run of one system in one round.
func labelsRun(system string, round int, peak, rollout, live, steady, cpu float64, cached ...float64) shardedResult {
	r := shardedResult{System: system, Kind: benchObjects.Name, Round: round, Objects: 1000, MaxPeakRSSMiB: peak, RolloutMaxPeakRSSMiB: rollout,
		MaxLiveHeapMiB: live, MaxSteadyRSSMiB: steady, FleetCPU: cpu, CacheMode: "full", PeakRSSMiB: map[string]float64{"r-0": peak}}
	if system == nativeName {
		r.CacheMode, r.CachedObjects = "labels", map[string]float64{}
		for i, c := range cached {
			r.CachedObjects["r-"+string(rune('0'+i))] = c
		}
		r.RolloutObjectsListed = 2 * 1000
	}
	return r
}

// labelsFixture is phase 10 as a run writes it: three rounds spread over
// namespaces (the leader's peak moving from round to round), one in one
// namespace, first starts on both, throughput, handoff and failover.
func labelsFixture() *labelsResults {
	spread := labelsLayout{Layout: layoutSpread, Namespaces: 500,
		FirstStarts: []firstStart{{Count: 1000, Objects: 1200, Unlabelled: 1000, LabelPatches: 1000, MaxPeakRSSMiB: 55, LabelledSeconds: 7.5, APIRequests: 1400}},
		Runs: []shardedResult{
			labelsRun(baselineName, 1, 100, 0, 50, 80, 10), labelsRun(nativeName, 1, 35, 38, 15, 30, 11, 334, 333, 333),
			labelsRun(baselineName, 2, 110, 0, 50, 80, 10), labelsRun(nativeName, 2, 44, 40, 15, 30, 11, 334, 333, 333),
			labelsRun(baselineName, 3, 90, 0, 50, 80, 10), labelsRun(nativeName, 3, 30, 36, 15, 30, 11, 334, 333, 333),
		},
		Ceiling:  []ceilingResult{{Round: 1, Goroutines: 16, WritesPerSec: 500}},
		Handoff:  &handoffResult{System: nativeName, Replicas: 3, Rollout: delayStats{Updates: 10, P99Seconds: 0.05}},
		Failover: &failoverResult{System: nativeName, Seconds: 9.5, Killed: "r-1"},
	}
	spread.Throughput.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ObjectsPerSec: 100, LatencyMS: 70}, {Round: 1, System: nativeName, Replicas: 4, ObjectsPerSec: 370, LatencyMS: 70, Objects: 2000, MachineBusy: 0.55}}
	spread.WriteBound.Samples = []throughputResult{
		{Round: 1, System: baselineName, Replicas: 2, ObjectsPerSec: 300, Objects: 2000, Passes: 5, MachineBusy: 0.95, FleetCPUSeconds: 30},
		{Round: 1, System: nativeName, Replicas: 4, ObjectsPerSec: 420, Objects: 2000, Passes: 6, MachineBusy: 0.97, FleetCPUSeconds: 48}}
	single := labelsLayout{Layout: layoutSingle, Namespaces: 1,
		FirstStarts: []firstStart{{Count: 1000, Objects: 1000, Unlabelled: 1000, LabelPatches: 1100, MaxPeakRSSMiB: 70}},
		Runs:        []shardedResult{labelsRun(baselineName, 1, 100, 0, 50, 80, 10), labelsRun(nativeName, 1, 37, 45, 16, 31, 12, 500, 500)},
	}
	single.Runs[1].RolloutLabelPatches = 20 // a replica relabelled objects while partitions moved
	return &labelsResults{Layouts: []labelsLayout{spread, single}}
}

// With kept places every cached object moves once in a rolling restart
// (to its replica's next process), not twice; the report says which rounds
// kept them.
func TestKeptPlacesMoveEachObjectOnce(t *testing.T) {
	res := labelsFixture()
	single := &res.Layouts[1]
	single.Runs[1].RolloutKeptPlaces = true
	single.Runs[1].RolloutObjectsListed = 1000
	s := summariseLabels(res)
	moved := 3*2*1000.0 + 1000.0
	if got, want := s.ObjectsListedPerMove, (3*2000+1000)/moved; got == nil || *got < want-1e-9 || *got > want+1e-9 {
		t.Errorf("objects listed per move = %v, want %v", deref(got), want)
	}
	r := &results{Params: defaultParams(false), Labels: res, Summary: Summary{ShardedGateOff: s}}
	var b strings.Builder
	r.labelsSection(func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) })
	if got := strings.Count(b.String(), "kept places: "); got != 1 {
		t.Errorf("%d rows say kept places, want 1:\n%s", got, b.String())
	}
}

func TestLabelsSummaryTakesMediansOfRoundRatios(t *testing.T) {
	s := summariseLabels(labelsFixture())
	// Moved: every cached object twice in each of the 4 rolling restarts.
	moved := 3*2*1000.0 + 2*1000.0
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{
		"rss_ratio":                          {s.RSSRatio, 0.35},        // 0.35, 0.40, 0.333
		"rss_ratio_rolling_restart":          {s.RSSRatioRollout, 0.38}, // 0.38, 0.364, 0.40
		"rss_ratio_single_namespace":         {s.RSSRatioSingleNamespace, 0.37},
		"rss_ratio_single_namespace_rollout": {s.RSSRatioSingleNamespaceRollout, 0.45},
		"live_heap_ratio":                    {s.LiveHeapRatio, 0.3},
		"steady_rss_ratio":                   {s.SteadyRSSRatio, 0.375},
		"fleet_cpu_ratio":                    {s.FleetCPURatio, 1.1},
		"fleet_cpu_ratio_single_namespace":   {s.FleetCPURatioSingleNamespace, 1.2},
		"throughput_ratio_4":                 {s.ThroughputRatio4, 3.7},
		"ceiling_fraction_4":                 {s.CeilingFraction4, 0.84},
		"write_bound_ratio_4":                {s.WriteBoundRatio4, 1.4},
		"handoff_p99_seconds":                {s.HandoffP99Seconds, 0.05},
		"failover_seconds":                   {s.FailoverSeconds, 9.5},
		"writes_per_move":                    {s.WritesPerMove, 20 / moved},
		"objects_listed_per_move":            {s.ObjectsListedPerMove, 4 * 2000 / moved},
		"label_writes_per_object":            {s.LabelWritesPerObject, 2100.0 / 2000},
		// The first start's peak ÷ the leader's median peak (100).
		"first_start_rss_ratio":                  {s.FirstStartRSSRatio, 0.55},
		"first_start_rss_ratio_single_namespace": {s.FirstStartRSSRatioSingleNamespace, 0.7},
		"first_start_labelled_seconds":           {s.FirstStartLabelledSeconds, 7.5},
		"first_start_api_requests":               {s.FirstStartAPIRequests, 1400},
	} {
		if c.got == nil || *c.got < c.want-1e-9 || *c.got > c.want+1e-9 {
			t.Errorf("%s = %v, want %v", name, deref(c.got), c.want)
		}
	}
	if s.Objects != 1000 {
		t.Errorf("objects = %d, want 1000", s.Objects)
	}
	if summariseLabels(nil) != nil || summariseLabels(&labelsResults{}) != nil {
		t.Error("a run without phase 10 has a sharded_gate_off headline")
	}
}

// A round cut off by the run's deadline or an interrupt (the leader's pass
// cancelled before its figures were read) leaves a run of zeros: it must not
// count as a leader peak of 0 MiB, which would pull the median under the
// first start's peak.
func TestLabelsSummaryIgnoresACutOffRound(t *testing.T) {
	lr := labelsFixture()
	spread := &lr.Layouts[0]
	spread.Runs = append(spread.Runs[:4:4], shardedResult{System: baselineName, Round: 3, Objects: 1000})
	s := summariseLabels(lr)
	// Leader peaks 100 and 110: median 105, not median(100, 110, 0) = 100.
	if want := 55.0 / 105; s.FirstStartRSSRatio == nil || *s.FirstStartRSSRatio != want {
		t.Errorf("first_start_rss_ratio = %v, want %v", deref(s.FirstStartRSSRatio), want)
	}
	if want := (0.35 + 0.4) / 2; s.RSSRatio == nil || *s.RSSRatio < want-1e-9 || *s.RSSRatio > want+1e-9 {
		t.Errorf("rss_ratio = %v, want %v (rounds 1 and 2)", deref(s.RSSRatio), want)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Phase 7's custom resources run beside its ConfigMaps: their mode and
// ratio are reported apart, and the ConfigMaps' ratios ignore them.
func TestShardedSummaryKeepsCustomResourcesApart(t *testing.T) {
	runs := []shardedResult{
		{System: baselineName, Kind: benchObjects.Name, Gate: true, Objects: 200, MaxPeakRSSMiB: 60},
		{System: nativeName, Kind: benchObjects.Name, Gate: true, Objects: 200, MaxPeakRSSMiB: 50, CacheMode: "fallback"},
		{System: baselineName, Gate: true, Objects: 600, MaxPeakRSSMiB: 100, MaxLiveHeapMiB: 40, MaxSteadyRSSMiB: 90},
		{System: nativeName, Kind: configMaps.Name, Gate: true, Objects: 600, MaxPeakRSSMiB: 40, MaxLiveHeapMiB: 12, MaxSteadyRSSMiB: 36, CacheMode: "sharded"},
	}
	s, _ := summariseSharded(runs, nil)
	if s == nil || s.RSSRatio == nil || *s.RSSRatio != 0.4 || s.RSSRatioSmall == nil || *s.RSSRatioSmall != 0.4 {
		t.Fatalf("ConfigMap ratios %+v: the custom resources' runs leaked in", s)
	}
	if s.LiveHeapRatio == nil || *s.LiveHeapRatio != 0.3 || s.SteadyRSSRatio == nil || *s.SteadyRSSRatio != 0.4 {
		t.Errorf("live heap %v, steady RSS %v; want 0.3, 0.4", deref(s.LiveHeapRatio), deref(s.SteadyRSSRatio))
	}
	if s.CustomResources != 200 || s.CustomResourceMode != "fallback" || s.RSSRatioCustomResources == nil || *s.RSSRatioCustomResources != 50.0/60 {
		t.Errorf("custom resources %d in mode %q, ratio %v", s.CustomResources, s.CustomResourceMode, deref(s.RSSRatioCustomResources))
	}
}

// results.json gains "sharded_gate_off" with every figure the issue asks
// for, and RESULTS.md phase 10's section and goals.
func TestPhase10ReachesResults(t *testing.T) {
	dir := t.TempDir()
	r := &results{Params: defaultParams(false), Labels: labelsFixture()}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		GateOff map[string]any `json:"sharded_gate_off"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rss_ratio", "rss_ratio_single_namespace", "fleet_cpu_ratio", "throughput_ratio_4", "handoff_p99_seconds",
		"failover_seconds", "writes_per_move", "label_writes_per_object", "ceiling_fraction_4", "live_heap_ratio", "steady_rss_ratio",
		"rss_ratio_rolling_restart", "first_start_rss_ratio", "first_start_labelled_seconds", "first_start_api_requests"} {
		if v, ok := got.GateOff[k]; !ok || v == nil {
			t.Errorf("sharded_gate_off.%s = %v", k, v)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Gate-free sharded cache on custom resources (phase 10)",
		"| gate off, labels, custom resources: per-replica peak RSS ≤ 0.40× the leader's (aim 0.35; spread over namespaces, and in one namespace) | 0.35× (one namespace 0.37×; live heap 0.30× and 0.32×) | **met** |",
		"| gate off, labels: objects written per move = 0 | 0.003 | **missed** |",
		"| gate off, labels: label writes per object ≤ 1 | 1.05 | **missed** |",
		"| spread | 1200 (1000) | 7.5 |",
		"| single namespace | 1 | kshard | labels | 1000 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	// Rendering again from results.json (-report-only) gives the same file.
	if err := rewriteReport(dir, false); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(md, again) {
		t.Error("-report-only renders phase 10 differently from the run")
	}
}

// A run of other phases keeps phase 10's figures.
func TestPartialRunKeepsPhase10(t *testing.T) {
	dir := t.TempDir()
	prev := &results{Params: defaultParams(false), Command: "go run ./e2e/bench -phases 10", Labels: labelsFixture()}
	prev.Params.Phases = map[int]bool{10: true}
	if err := prev.write(dir); err != nil {
		t.Fatal(err)
	}
	earlier, err := loadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := defaultParams(false)
	p.Phases = map[int]bool{4: true}
	r := &results{Params: p}
	kept, err := r.keepEarlier(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0] != 10 || r.Labels == nil || len(r.Labels.Layouts) != 2 {
		t.Fatalf("kept %v, phase 10 %v", kept, r.Labels)
	}
	r.summarise()
	if r.ShardedGateOff == nil || r.ShardedGateOff.RSSRatio == nil {
		t.Error("the kept phase 10 has no headline")
	}
}

// A phase 10 run of one layout keeps the other layout from the earlier
// results.json, named with the run that measured it, cut short or not.
func TestRunOfOneLayoutKeepsTheOther(t *testing.T) {
	dir := t.TempDir()
	prev := &results{Params: defaultParams(false), Command: "go run ./e2e/bench -phases 10", Labels: labelsFixture(),
		Failed: true, Error: "context deadline exceeded"}
	prev.Params.Phases = map[int]bool{10: true}
	if err := prev.write(dir); err != nil {
		t.Fatal(err)
	}
	p := phase10Params(t, "single")
	target := mergeTarget(p, dir, true)
	if target == "" {
		t.Fatal("a run of one layout does not merge into the earlier results.json")
	}
	earlier, err := loadResults(target)
	if err != nil {
		t.Fatal(err)
	}
	single := labelsFixture().Layouts[1]
	single.FirstStarts[0].LabelPatches = 1000 // this run's, not the earlier one's
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 10 -labels-layouts single", Labels: &labelsResults{Layouts: []labelsLayout{single}}}
	if _, err := r.keepEarlier(earlier); err != nil {
		t.Fatal(err)
	}
	if got := len(r.Labels.Layouts); got != 2 || r.Labels.Layouts[0].Layout != layoutSpread || r.Labels.Layouts[1].Layout != layoutSingle {
		t.Fatalf("layouts after the merge: %d, want spread (kept) then single namespace (measured)", got)
	}
	if got := r.Labels.Layouts[1].FirstStarts[0].LabelPatches; got != 1000 {
		t.Errorf("the single namespace's first start has %v label patches, want this run's 1000", got)
	}
	pv, ok := r.Provenance["10 ("+layoutSpread+")"]
	if !ok || pv.Command != prev.Command || pv.Error != prev.Error {
		t.Errorf("provenance of the kept layout: %+v (present %v), want the earlier run's command and its error", pv, ok)
	}
	if _, ok := r.Provenance["10"]; ok {
		t.Error("phase 10 as a whole is named as kept, but this run measured it")
	}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "phase 10 (spread): `go run ./e2e/bench -phases 10`") || !strings.Contains(string(md), "cut short (context deadline exceeded)") {
		t.Error("RESULTS.md does not say which run measured the kept layout and that it was cut short")
	}
	if !strings.Contains(string(md), "rounds of each system (3 spread, 1 single namespace)") {
		t.Error("RESULTS.md does not give each layout's rounds")
	}
}

// A run of other phases keeps phase 10 whole, and with it the provenance
// of a layout an earlier run kept from a run of its own.
func TestKeptPhase10KeepsItsLayoutsProvenance(t *testing.T) {
	spreadRun := provenance{Command: "go run ./e2e/bench -phases 10", Error: "context deadline exceeded"}
	prev := &results{Params: defaultParams(false), Command: "go run ./e2e/bench -phases 10 -labels-layouts single", Labels: labelsFixture(),
		Provenance: map[string]provenance{"10 (" + layoutSpread + ")": spreadRun}}
	prev.Params.Phases = map[int]bool{10: true}
	p := defaultParams(false)
	p.Phases = map[int]bool{3: true}
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 3"}
	if _, err := r.keepEarlier(prev); err != nil {
		t.Fatal(err)
	}
	if pv := r.Provenance["10"]; pv.Command != prev.Command {
		t.Errorf("phase 10 kept from %q, want %q", pv.Command, prev.Command)
	}
	if pv, ok := r.Provenance["10 ("+layoutSpread+")"]; !ok || pv.Command != spreadRun.Command || pv.Error != spreadRun.Error {
		t.Errorf("the spread layout's provenance: %+v (present %v), want the run that measured it, %+v", pv, ok, spreadRun)
	}
}

// A run of one layout over a file that kept phase 10 from another run
// names that run, not the file's own, as the measure of the other layout.
func TestRunOfOneLayoutNamesTheRunThatMeasuredTheOther(t *testing.T) {
	singleRun := provenance{Command: "go run ./e2e/bench -phases 10 -labels-layouts single -rounds 2", Date: "2026-11-28T17:35:53Z"}
	spreadRun := provenance{Command: "go run ./e2e/bench -phases 10", Error: "context deadline exceeded"}
	prev := &results{Params: defaultParams(false), Command: "go run ./e2e/bench -phases 8", Labels: labelsFixture(),
		Provenance: map[string]provenance{"10": singleRun, "10 (" + layoutSpread + ")": spreadRun}}
	prev.Params.Phases = map[int]bool{8: true}
	p := phase10Params(t, "spread")
	r := &results{Params: p, Command: "go run ./e2e/bench -phases 10 -labels-layouts spread", Labels: &labelsResults{Layouts: []labelsLayout{labelsFixture().Layouts[0]}}}
	if _, err := r.keepEarlier(prev); err != nil {
		t.Fatal(err)
	}
	if pv := r.Provenance["10 ("+layoutSingle+")"]; pv.Command != singleRun.Command || pv.Date != singleRun.Date {
		t.Errorf("the kept single namespace layout is said to come from %q (%s), want %q (%s)", pv.Command, pv.Date, singleRun.Command, singleRun.Date)
	}
	if _, ok := r.Provenance["10 ("+layoutSpread+")"]; ok {
		t.Error("the spread layout, measured by this run, is named as kept")
	}
}

func TestLayoutsFlag(t *testing.T) {
	for list, want := range map[string]string{"spread,single": "", " single ": "", "spread,spread": "given twice", "both": "not a layout", "": "not a layout"} {
		_, err := parseLayouts(list)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("parseLayouts(%q) = %v, want an error with %q", list, err, want)
		}
	}
}

// The throughput paragraph says whether the first round measured the
// fleet's labelling of the objects, and results.json carries that through
// a rendering again (-report-only).
func TestThroughputSaysWhetherObjectsWereLabelledFirst(t *testing.T) {
	for _, first := range []bool{false, true} {
		dir := t.TempDir()
		labels := labelsFixture()
		labels.Layouts[0].LabelledFirst = first
		r := &results{Params: defaultParams(false), Labels: labels}
		if err := r.write(dir); err != nil {
			t.Fatal(err)
		}
		if err := rewriteReport(dir, false); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
		if err != nil {
			t.Fatal(err)
		}
		want, not := "labelled the objects with their partition while measured", "labelled with their partition by an untimed kshard fleet"
		if first {
			want, not = not, want
		}
		if !strings.Contains(string(md), want) || strings.Contains(string(md), not) {
			t.Errorf("labelled first %v: RESULTS.md should say %q and not %q", first, want, not)
		}
	}
}

// phase10Params are the default parameters of a phase 10 run of one layout.
func phase10Params(t *testing.T, layout string) params {
	t.Helper()
	p := defaultParams(false)
	p.Phases = map[int]bool{10: true}
	layouts, err := parseLayouts(layout)
	if err != nil {
		t.Fatal(err)
	}
	p.LabelsLayouts = layouts
	return p
}
