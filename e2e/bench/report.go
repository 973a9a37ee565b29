package main

import (
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// results is everything a run measured; results.json holds it with the
// headline ratios at the top level.
type results struct {
	Summary
	Params     params           `json:"-"`
	ParamsView map[string]any   `json:"params"`
	Env        env              `json:"environment"`
	Ceiling    []ceilingResult  `json:"ceiling"`
	Throughput throughputSet    `json:"throughput"`
	WriteBound throughputSet    `json:"write_bound"`
	Handoff    []handoffResult  `json:"handoff"`
	Failover   []failoverResult `json:"failover"`
	// RestartFailover is phase 6 (restart.go).
	RestartFailover *restartFailoverResult `json:"restart_failover,omitempty"`
	// RestartFailoverAdapter is phase 6 on the adapter.
	RestartFailoverAdapter *restartFailoverResult `json:"restart_failover_adapter,omitempty"`
	Resources              []resourceResult       `json:"resources"`
	// Sharded is phase 7 (sharded.go).
	ShardedRuns []shardedResult `json:"sharded_runs,omitempty"`
	// ShardedHandoff is phase 8 (shardedhandoff.go).
	ShardedHandoff []shardedHandoffResult `json:"sharded_handoff_runs,omitempty"`
	// Labels is phase 10 (labels.go).
	Labels  *labelsResults `json:"sharded_gate_off_runs,omitempty"`
	Seconds float64        `json:"run_seconds"`
	Command string         `json:"command"`
	// ChangedLines is the adapter conversion's size (adapter.go); nil when
	// it could not be counted.
	ChangedLines *int `json:"-"`
	// ChangedLinesKubebuilder is the size of the conversion of the
	// operator in kubebuilder's layout (adapter.go); nil when it could not
	// be counted.
	ChangedLinesKubebuilder *int `json:"-"`
	// Provenance names, per phase kept from earlier runs (a run of some
	// phases merges into results.json, merge.go), the run that measured it.
	Provenance map[string]provenance `json:"phases_from_earlier_runs,omitempty"`
	// PhaseCommits names, for every phase the file holds (and each part
	// of one kept from another run, "10 (spread)"), the commit that
	// measured it; "not recorded" for runs from before commits were.
	PhaseCommits map[string]string `json:"phase_commits,omitempty"`
	// LatencyChoice: where the latency-bound phases' latency came from
	// (latency.go); absent from runs before it was recorded.
	LatencyChoice *latencyChoice `json:"latency_choice,omitempty"`
	Warnings      []string       `json:"warnings,omitempty"`
	Failed        bool           `json:"failed"`
	Error         string         `json:"error,omitempty"`
}

// throughputSet is every throughput run of one workload and, per
// configuration, medians over the rounds. Ratios are taken within a round
// (kshard ÷ the baseline run of the same round, ÷ that round's ceiling)
// before the median, so load that drifts between rounds cancels out.
type throughputSet struct {
	Samples []throughputResult `json:"samples"`
	Configs []tpSummary        `json:"configs"`
}

type tpSummary struct {
	System          string   `json:"system"`
	Replicas        int      `json:"replicas"`
	ActiveReplicas  int      `json:"active_replicas"`
	Rounds          int      `json:"rounds"`
	ObjectsPerSec   float64  `json:"objects_per_second_median"`
	MinObjectsPerS  float64  `json:"objects_per_second_min"`
	MaxObjectsPerS  float64  `json:"objects_per_second_max"`
	SecondsMedian   float64  `json:"seconds_median"`
	Ratio           *float64 `json:"ratio_to_baseline_median"`
	CeilingFraction *float64 `json:"ceiling_fraction_median"`
	// MachineBusy and CPUMsPerObject are the rounds' medians of
	// machine_busy and of the operators' CPU per object reconciled (nil
	// when not recorded).
	MachineBusy    *float64 `json:"machine_busy_median,omitempty"`
	CPUMsPerObject *float64 `json:"cpu_ms_per_object_median,omitempty"`
	// SpreadCap is the latency-bound rounds' median cap by the keys'
	// spread (throughputResult.SpreadCap), for more than one active
	// replica; nil otherwise or when not known.
	SpreadCap *float64 `json:"spread_cap_median,omitempty"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func medianPtr(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	return ptr(median(v))
}

// summariseSet fills set.Configs from its samples; ceilings maps a round to
// its ceiling in writes/s.
func summariseSet(set *throughputSet, ceilings map[int]float64) {
	type key struct {
		system   string
		replicas int
	}
	base := map[int]float64{}
	var order []key
	groups := map[key][]throughputResult{}
	for _, t := range set.Samples {
		if t.System == baselineName {
			base[t.Round] = t.ObjectsPerSec
		}
		k := key{t.System, t.Replicas}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	set.Configs = nil
	for _, k := range order {
		g := groups[k]
		var rates, secs, ratios, fractions, busy, cpu, caps []float64
		for _, t := range g {
			if t.cpuMeasured() {
				busy, cpu = append(busy, t.busy()), append(cpu, t.cpuMsPerObject())
			}
			if c := t.spreadCap(); c > 0 && t.LatencyMS > 0 && t.ActiveReplicas > 1 {
				caps = append(caps, c)
			}
			rates = append(rates, t.ObjectsPerSec)
			secs = append(secs, t.Seconds)
			if b := base[t.Round]; b > 0 {
				ratios = append(ratios, t.ObjectsPerSec/b)
			}
			if c := ceilings[t.Round]; c > 0 {
				fractions = append(fractions, t.ObjectsPerSec/c)
			}
		}
		set.Configs = append(set.Configs, tpSummary{
			System: k.system, Replicas: k.replicas, ActiveReplicas: g[0].ActiveReplicas, Rounds: len(g),
			ObjectsPerSec: median(rates), MinObjectsPerS: slices.Min(rates), MaxObjectsPerS: slices.Max(rates),
			SecondsMedian: median(secs), Ratio: medianPtr(ratios), CeilingFraction: medianPtr(fractions),
			MachineBusy: medianPtr(busy), CPUMsPerObject: medianPtr(cpu), SpreadCap: medianPtr(caps),
		})
	}
}

// config returns the summary of system with n replicas, if measured.
func (set throughputSet) config(system string, n int) *tpSummary {
	for i := range set.Configs {
		if set.Configs[i].System == system && (system == baselineName || set.Configs[i].Replicas == n) {
			return &set.Configs[i]
		}
	}
	return nil
}

// perRoundRatio is the median over rounds of system a's rate ÷ system b's
// at n replicas each, both measured in the same round.
func (set throughputSet) perRoundRatio(a, b string, n int) *float64 {
	rates := map[string]map[int]float64{a: {}, b: {}}
	for _, t := range set.Samples {
		if (t.System == a || t.System == b) && t.Replicas == n {
			rates[t.System][t.Round] = t.ObjectsPerSec
		}
	}
	var ratios []float64
	for round, ra := range rates[a] {
		if rb := rates[b][round]; rb > 0 {
			ratios = append(ratios, ra/rb)
		}
	}
	return medianPtr(ratios)
}

// Summary holds the headline figures; absent ones (a phase that did not
// run) are null.
type Summary struct {
	ThroughputRatio1 *float64 `json:"throughput_ratio_1"`
	ThroughputRatio2 *float64 `json:"throughput_ratio_2"`
	// ThroughputRatio4 is judged only where the machine was not the limit
	// (ratioGate: null, with the reason, when the kshard 4-replica rounds'
	// median machine_busy was 0.7 or more).
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
	ratioGate
	WriteBoundRatio4          *float64 `json:"write_bound_ratio_4"`
	CeilingWritesPerSec       *float64 `json:"ceiling_writes_per_second"`
	CeilingFraction4          *float64 `json:"ceiling_fraction_4"`
	CeilingFractionBaseline   *float64 `json:"ceiling_fraction_baseline"`
	HandoffP99Seconds         *float64 `json:"handoff_p99_seconds"`
	HandoffP99SecondsBaseline *float64 `json:"handoff_p99_seconds_baseline"`
	HandoffMaxSeconds         *float64 `json:"handoff_max_seconds"`
	HandoffMaxSecondsBaseline *float64 `json:"handoff_max_seconds_baseline"`
	FailoverSeconds           *float64 `json:"failover_seconds"`
	FailoverSecondsBaseline   *float64 `json:"failover_seconds_baseline"`
	// Phase 6: crash failover restarted in place (p50, p99) and the
	// lease-wait failover measured beside it (p50, p99).
	RestartFailoverSeconds    *float64 `json:"restart_failover_seconds"`
	RestartFailoverP99Seconds *float64 `json:"restart_failover_p99_seconds"`
	LeaseWaitFailoverP50      *float64 `json:"lease_wait_failover_p50_seconds"`
	LeaseWaitFailoverP99      *float64 `json:"lease_wait_failover_p99_seconds"`
	RSSRatio                  *float64 `json:"rss_ratio"`
	CPURatio                  *float64 `json:"cpu_ratio"`
	APIRequestsRatio          *float64 `json:"api_requests_ratio"`
	// Adapter is the controller-runtime operator converted with
	// controller/crshard, measured in the same run (nil when it did not run).
	Adapter *adapterSummary `json:"adapter,omitempty"`
	// Sharded is the headline of phases 7 and 8: the sharded cache against
	// the controller-runtime leader (nil when neither ran);
	// ShardedFallback the same with the feature gate off.
	Sharded         *shardedSummary `json:"sharded,omitempty"`
	ShardedFallback *shardedSummary `json:"sharded_fallback,omitempty"`
	// ShardedGateOff is phase 10's headline: the gate-free sharded cache
	// (CacheMode labels) on custom resources.
	ShardedGateOff *labelsSummary `json:"sharded_gate_off,omitempty"`
	// Scale is phase 9 (scale.go): the scale envelope, a row per
	// configuration.
	Scale *scaleResults `json:"scale,omitempty"`
}

// adapterSummary holds the converted operator's headline figures; ratios
// are against the leader-elected baseline, as the native ones are.
type adapterSummary struct {
	ThroughputRatio1 *float64 `json:"throughput_ratio_1"`
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
	ratioGate
	// NativeRatio4 is the adapter's 4-replica throughput ÷ kshard-native's
	// (median of per-round ratios); the goal is within 10 %.
	NativeRatio4      *float64 `json:"throughput_ratio_4_to_native"`
	HandoffP99Seconds *float64 `json:"handoff_p99_seconds"`
	FailoverSeconds   *float64 `json:"failover_seconds"`
	RSSRatio          *float64 `json:"rss_ratio"`
	// ChangedLines is what the conversion changed in the operator's own Go
	// file: lines added plus removed (adapter.go).
	ChangedLines *int `json:"changed_lines"`
	// ShardedGateOff is phase 10's adapter: its gate-free sharded cache
	// (CacheMode labels) against the leader over custom resources.
	ShardedGateOff *adapterLabels `json:"sharded_gate_off,omitempty"`
	// Phase 6 on the adapter: failover when the killed replica is
	// restarted in place (median; goal ≤ 3 s), and when the Lease must be
	// waited out.
	RestartFailoverSeconds   *float64 `json:"restart_failover_seconds,omitempty"`
	LeaseWaitFailoverSeconds *float64 `json:"lease_wait_failover_seconds,omitempty"`
	// ChangedLinesKubebuilder is what the conversion of the operator in
	// kubebuilder's layout (e2e/bench/crshardop/kubebuilder) changed in its
	// Go files: lines added plus removed (adapter.go).
	ChangedLinesKubebuilder *int `json:"changed_lines_kubebuilder"`
}

type env struct {
	CPU           string `json:"cpu"`
	Cores         int    `json:"cores"`
	MemoryGiB     int    `json:"memory_gib"`
	Kernel        string `json:"kernel"`
	Go            string `json:"go"`
	KubeAPIServer string `json:"kube_apiserver"`
	ClientGo      string `json:"client_go"`
	CtrlRuntime   string `json:"controller_runtime"`
	Date          string `json:"date"`
	LoadStart     string `json:"loadavg_start"`
	LoadEnd       string `json:"loadavg_end"`
	// Commit is the kshard checkout the run measured (gitCommit): "+dirty"
	// when tracked files differed from it. Absent from files before it was
	// recorded.
	Commit string `json:"commit,omitempty"`
}

// loadavg is /proc/loadavg's 1, 5 and 15 minute load averages: other
// tenants of the machine show up there.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// environment describes the machine and the versions measured. The
// controller-runtime version is the one the baseline's binary was built
// with (its own module, e2e/bench/baseline), read from the binary.
func environment(ctx context.Context, cp *controlplane.ControlPlane, client kubernetes.Interface, baselineBin string) env {
	e := env{Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339), LoadStart: loadavg()}
	e.CtrlRuntime = moduleVersion(baselineBin, "sigs.k8s.io/controller-runtime")
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			e.MemoryGiB = (kb + 1<<19) >> 20
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	if v, err := client.Discovery().ServerVersion(); err == nil {
		e.KubeAPIServer = v.GitVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				e.ClientGo = d.Version
			}
		}
	}
	return e
}

// moduleVersion is the version of module path that the Go binary bin was
// built with, or "unknown" if bin cannot be read or has no such module.
func moduleVersion(bin, path string) string {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// paramsView is p for results.json, with durations as strings ("20ms").
func paramsView(p params) map[string]any {
	out := map[string]any{}
	v, t := reflect.ValueOf(p), reflect.TypeOf(p)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if d, ok := v.Field(i).Interface().(time.Duration); ok {
			out[name] = d.String()
		} else {
			out[name] = v.Field(i).Interface()
		}
	}
	return out
}

// paramsFromView reverses paramsView for a loaded results.json (durations
// from their strings), so that RESULTS.md can be rendered again without a
// run. Parameters the file lacks (it predates them) stay zero.
func paramsFromView(view map[string]any) (params, error) {
	var p params
	v, t := reflect.ValueOf(&p).Elem(), reflect.TypeOf(p)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		raw, ok := view[name]
		if name == "" || name == "-" || !ok {
			continue
		}
		if t.Field(i).Type == reflect.TypeFor[time.Duration]() {
			s, _ := raw.(string)
			d, err := time.ParseDuration(s)
			if err != nil {
				return p, fmt.Errorf("params.%s is %v, not a duration such as \"20ms\"", name, raw)
			}
			v.Field(i).SetInt(int64(d))
			continue
		}
		js, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(js, v.Field(i).Addr().Interface())
		}
		if err != nil {
			return p, fmt.Errorf("params.%s: %w", name, err)
		}
	}
	return p, nil
}

func ratio(a, b float64) *float64 {
	if a == 0 || b == 0 {
		return nil
	}
	r := a / b
	return &r
}

func ptr(v float64) *float64 { return &v }

// summarise fills the headline figures from the detailed results.
func (r *results) summarise() {
	s := &r.Summary
	ceilings := ceilingsByRound(r.Ceiling)
	var cs []float64
	for _, c := range ceilings {
		cs = append(cs, c)
	}
	s.CeilingWritesPerSec = medianPtr(cs)
	summariseSet(&r.Throughput, ceilings)
	summariseSet(&r.WriteBound, ceilings)
	for n, dst := range map[int]**float64{1: &s.ThroughputRatio1, 2: &s.ThroughputRatio2, 4: &s.ThroughputRatio4} {
		if c := r.Throughput.config(nativeName, n); c != nil {
			*dst = c.Ratio
		}
	}
	s.ThroughputRatio4, s.ratioGate = gateRatio(s.ThroughputRatio4, r.Throughput.Samples, nativeName, nil)
	r.warnNotJudged("throughput_ratio_4", s.ratioGate)
	if c := r.WriteBound.config(nativeName, 4); c != nil {
		s.CeilingFraction4, s.WriteBoundRatio4 = c.CeilingFraction, c.Ratio
	}
	if c := r.WriteBound.config(baselineName, 0); c != nil {
		s.CeilingFractionBaseline = c.CeilingFraction
	}
	ad := &adapterSummary{ChangedLines: r.ChangedLines, ChangedLinesKubebuilder: r.ChangedLinesKubebuilder}
	linesOnly := *ad
	for _, h := range r.Handoff {
		if h.Rollout.Updates == 0 {
			continue
		}
		switch h.System {
		case nativeName:
			s.HandoffP99Seconds, s.HandoffMaxSeconds = ptr(h.Rollout.P99Seconds), ptr(h.Rollout.MaxSeconds)
		case baselineName:
			s.HandoffP99SecondsBaseline, s.HandoffMaxSecondsBaseline = ptr(h.Rollout.P99Seconds), ptr(h.Rollout.MaxSeconds)
		case adapterName:
			ad.HandoffP99Seconds = ptr(h.Rollout.P99Seconds)
		}
	}
	for _, f := range r.Failover {
		switch f.System {
		case nativeName:
			s.FailoverSeconds = ptr(f.Seconds)
		case baselineName:
			s.FailoverSecondsBaseline = ptr(f.Seconds)
		case adapterName:
			ad.FailoverSeconds = ptr(f.Seconds)
		}
	}
	if rf := r.RestartFailover; rf != nil && len(rf.InPlaceSeconds) > 0 {
		s.RestartFailoverSeconds, s.RestartFailoverP99Seconds = ptr(rf.InPlaceP50), ptr(rf.InPlaceP99)
		s.LeaseWaitFailoverP50, s.LeaseWaitFailoverP99 = ptr(rf.LeaseWaitP50), ptr(rf.LeaseWaitP99)
	}
	res := map[string]*resourceResult{}
	for i := range r.Resources {
		res[r.Resources[i].System] = &r.Resources[i]
	}
	if kr, br := res[nativeName], res[baselineName]; kr != nil && br != nil {
		s.RSSRatio = ratio(kr.MaxPeakRSSMiB, br.MaxPeakRSSMiB)
		s.CPURatio = ratio(maxOf(kr.CPUSeconds), maxOf(br.CPUSeconds))
		s.APIRequestsRatio = ratio(kr.APIRequestsPerMin, br.APIRequestsPerMin)
	}
	if ar, br := res[adapterName], res[baselineName]; ar != nil && br != nil {
		ad.RSSRatio = ratio(ar.MaxPeakRSSMiB, br.MaxPeakRSSMiB)
	}
	if c := r.Throughput.config(adapterName, 1); c != nil {
		ad.ThroughputRatio1 = c.Ratio
	}
	if c := r.Throughput.config(adapterName, 4); c != nil {
		ad.ThroughputRatio4, ad.ratioGate = gateRatio(c.Ratio, r.Throughput.Samples, adapterName, nil)
		r.warnNotJudged("adapter.throughput_ratio_4", ad.ratioGate)
		ad.NativeRatio4 = r.Throughput.perRoundRatio(adapterName, nativeName, 4)
	}
	ad.ShardedGateOff = summariseAdapterLabels(r.Labels)
	if rf := r.RestartFailoverAdapter; rf != nil && len(rf.InPlaceSeconds) > 0 {
		ad.RestartFailoverSeconds, ad.LeaseWaitFailoverSeconds = ptr(rf.InPlaceP50), ptr(rf.LeaseWaitP50)
	}
	s.Adapter = nil
	if *ad != linesOnly {
		s.Adapter = ad
	}
	s.Sharded, s.ShardedFallback = summariseSharded(r.ShardedRuns, r.ShardedHandoff)
	s.ShardedGateOff = summariseLabels(r.Labels)
	for name, sum := range map[string]*shardedSummary{"sharded.throughput_ratio_4": s.Sharded, "sharded_fallback.throughput_ratio_4": s.ShardedFallback} {
		if sum != nil {
			r.warnNotJudged(name, sum.ratioGate)
		}
	}
	if g := s.ShardedGateOff; g != nil {
		r.warnNotJudged("sharded_gate_off.throughput_ratio_4", g.ratioGate)
	}
	r.PhaseCommits = r.phaseCommits()
	r.checkLeaders()
	if s.Scale != nil {
		s.Scale.summarise()
	}
}

// ceilingsByRound is each round's ceiling: its best goroutine count's
// writes/s.
func ceilingsByRound(cs []ceilingResult) map[int]float64 {
	out := map[int]float64{}
	for _, c := range cs {
		out[c.Round] = max(out[c.Round], c.WritesPerSec)
	}
	return out
}

func maxOf(m map[string]float64) float64 {
	var v float64
	for _, x := range m {
		v = max(v, x)
	}
	return v
}

// write writes results.json and RESULTS.md into dir; `make charts` draws
// the charts RESULTS.md shows from results.json (e2e/bench/charts).
func (r *results) write(dir string) error {
	r.summarise()
	r.ParamsView = paramsView(r.Params)
	r.Env.LoadEnd = loadavg()
	return r.save(dir)
}

// save writes r as it is into dir's results.json and RESULTS.md.
func (r *results) save(dir string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "RESULTS.md"), []byte(r.markdown()), 0o644)
}

// gateStored judges the 4-replica throughput ratios of a file written
// before they were gated (ratioGate) by the busy share its samples
// recorded, for RESULTS.md only: results.json keeps its figures.
func (r *results) gateStored() {
	s := &r.Summary
	// The per-configuration medians again from the samples, for the
	// busy share and CPU per object files before them did not hold.
	summariseSet(&r.Throughput, ceilingsByRound(r.Ceiling))
	summariseSet(&r.WriteBound, ceilingsByRound(r.Ceiling))
	if r.Labels != nil {
		for i := range r.Labels.Layouts {
			l := &r.Labels.Layouts[i]
			summariseSet(&l.Throughput, ceilingsByRound(l.Ceiling))
			summariseSet(&l.WriteBound, ceilingsByRound(l.Ceiling))
			if g := s.ShardedGateOff; g != nil && g.WriteBoundCPUMsPerObject == nil {
				if c := l.WriteBound.config(nativeName, 4); c != nil {
					g.WriteBoundCPUMsPerObject = c.CPUMsPerObject
				}
				if c := l.WriteBound.config(baselineName, 0); c != nil {
					g.WriteBoundCPUMsPerObjectBaseline = c.CPUMsPerObject
				}
			}
		}
	}
	// A gate recorded before the cap by the keys' spread was gets it from
	// the samples' shares.
	regate := func(ratio **float64, g *ratioGate, samples []throughputResult, system string, keep func(throughputResult) bool) {
		switch {
		case g.ThroughputRatio4Measured == nil:
			*ratio, *g = gateRatio(*ratio, samples, system, keep)
		case g.ThroughputRatio4SpreadCap == nil:
			g.ThroughputRatio4SpreadCap = spreadCap4(samples, system, keep)
		}
	}
	regate(&s.ThroughputRatio4, &s.ratioGate, r.Throughput.Samples, nativeName, nil)
	if a := s.Adapter; a != nil {
		regate(&a.ThroughputRatio4, &a.ratioGate, r.Throughput.Samples, adapterName, nil)
	}
	for gate, sum := range map[bool]*shardedSummary{true: s.Sharded, false: s.ShardedFallback} {
		if m := shardedHandoffRun(r.ShardedHandoff, gate); m != nil && sum != nil {
			regate(&sum.ThroughputRatio4, &sum.ratioGate, m.Throughput, nativeName, func(t throughputResult) bool { return t.Epochs == epochsName(true) })
		}
	}
	if g := s.ShardedGateOff; g != nil && r.Labels != nil {
		for _, l := range r.Labels.Layouts {
			if len(l.Throughput.Samples) > 0 {
				regate(&g.ThroughputRatio4, &g.ratioGate, l.Throughput.Samples, nativeName, nil)
			}
		}
	}
}

// rewriteReport renders RESULTS.md again from the results.json in dir and
// measures nothing: for a change to the report's text. results.json stays
// as it is, headline figures included, unless summarise: then the headline
// figures are derived again from the runs it holds (after a fix to how they
// are derived) and results.json is rewritten with them.
func rewriteReport(dir string, summarise bool) error {
	path := filepath.Join(dir, "results.json")
	r, err := loadResults(path)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("no %s: run the benchmark first, or pass -out with the directory that holds results.json", path)
	}
	if r.Params, err = paramsFromView(r.ParamsView); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if summarise {
		// The conversion's line counts are measured from the checkout and
		// kept only in the summary: carry them over.
		if a := r.Summary.Adapter; a != nil {
			r.ChangedLines, r.ChangedLinesKubebuilder = a.ChangedLines, a.ChangedLinesKubebuilder
		}
		r.summarise()
		return r.save(dir)
	}
	r.gateStored()
	return os.WriteFile(filepath.Join(dir, "RESULTS.md"), []byte(r.markdown()), 0o644)
}

func f2(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *p)
}

func f3(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.3f", *p)
}

// goal renders a goal check: met, missed, or not measured.
func goal(ok *bool) string {
	switch {
	case ok == nil:
		return "not measured"
	case *ok:
		return "**met**"
	default:
		return "**missed**"
	}
}

func check(v *float64, f func(float64) bool) *bool {
	if v == nil {
		return nil
	}
	b := f(*v)
	return &b
}

// checkInt checks an optional count against a maximum.
func checkInt(v *int, limit int) *bool {
	if v == nil {
		return nil
	}
	b := *v <= limit
	return &b
}

// checkInts is whether every measured value of vs is at most limit; nil
// when none was measured.
func checkInts(limit int, vs ...*int) *bool {
	var ok *bool
	for _, v := range vs {
		if c := checkInt(v, limit); c != nil && (ok == nil || *ok) {
			ok = c
		}
	}
	return ok
}

// intOrDash is *v, or "—" for nil.
func intOrDash(v *int) string {
	if v == nil {
		return "—"
	}
	return strconv.Itoa(*v)
}

// perReplica formats a figure per replica: "r-0 120, r-1 80".
func perReplica(m map[string]float64) string {
	var out []string
	for _, id := range sortedKeys(m) {
		out = append(out, fmt.Sprintf("%s %.0f", id, m[id]))
	}
	return strings.Join(out, ", ")
}

// orDash formats v, or "—" when it was not measured (0).
func orDash(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

// orEmpty is *s, or an empty summary (every figure "—") when s is nil.
func orEmpty(s *shardedSummary) *shardedSummary {
	if s == nil {
		return &shardedSummary{}
	}
	return s
}

func derefOr(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func sortedKeys(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }

// seconds formats samples as "0.61, 0.72 s".
func seconds(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ") + " s"
}

// labelsGoals renders phase 10's rows of the goals table.
func labelsGoals(p func(string, ...any), g *labelsSummary) {
	atMost := func(limit float64) func(float64) bool { return func(v float64) bool { return v <= limit } }
	both := func(a, b *float64, limit float64) *bool {
		switch {
		case a == nil && b == nil:
			return nil
		case a == nil:
			return check(b, atMost(limit))
		case b == nil:
			return check(a, atMost(limit))
		}
		return check(ptr(max(*a, *b)), atMost(limit))
	}
	p("| gate off, labels, custom resources: per-replica peak RSS ≤ 0.40× the leader's (aim 0.35; spread over namespaces, and in one namespace) | %s× (one namespace %s×; live heap %s× and %s×) | %s |",
		f2(g.RSSRatio), f2(g.RSSRatioSingleNamespace), f2(g.LiveHeapRatio), f2(g.LiveHeapRatioSingleNamespace), goal(both(g.RSSRatio, g.RSSRatioSingleNamespace, 0.40)))
	p("| gate off, labels: peak RSS through a rolling restart ≤ 0.40× | %s× (one namespace %s×) | %s |",
		f2(g.RSSRatioRollout), f2(g.RSSRatioSingleNamespaceRollout), goal(both(g.RSSRatioRollout, g.RSSRatioSingleNamespaceRollout, 0.40)))
	p("| gate off, labels: fleet CPU ≤ 1.2× | %s× (one namespace %s×) | %s |", f2(g.FleetCPURatio), f2(g.FleetCPURatioSingleNamespace), goal(both(g.FleetCPURatio, g.FleetCPURatioSingleNamespace, 1.2)))
	p("| gate off, labels: 4 replicas ≥ 3.6× on the latency-bound workload | %s×%s | %s |", f2(g.measured(g.ThroughputRatio4)), g.describe(), judgedGoal(g.ThroughputRatio4, g.ratioGate, 3.6))
	p("| gate off, labels: write-bound, 4 replicas ÷ the leader; operators' CPU ms per object, kshard / controller-runtime | %s× ; %s / %s ms | reported |", f2(g.WriteBoundRatio4), f2(g.WriteBoundCPUMsPerObject), f2(g.WriteBoundCPUMsPerObjectBaseline))
	p("| gate off, labels: write-bound 4 replicas ≥ 0.8 of the API-server ceiling | %s | %s |", f2(g.CeilingFraction4), goal(check(g.CeilingFraction4, func(v float64) bool { return v >= 0.8 })))
	p("| gate off, labels: objects written per move = 0 | %s | %s |", f3(g.WritesPerMove), goal(check(g.WritesPerMove, atMost(0))))
	p("| gate off, labels: label writes per object ≤ 1 | %s | %s |", f2(g.LabelWritesPerObject), goal(check(g.LabelWritesPerObject, atMost(1))))
	p("| gate off, labels: first start over unlabelled objects, peak RSS ≤ 0.6× | %s× (one namespace %s×) | %s |",
		f2(g.FirstStartRSSRatio), f2(g.FirstStartRSSRatioSingleNamespace), goal(both(g.FirstStartRSSRatio, g.FirstStartRSSRatioSingleNamespace, 0.6)))
}

// labelsSection renders phase 10.
func (r *results) labelsSection(p printer) {
	pr, g := r.Params, orZero(r.Summary.ShardedGateOff)
	p("")
	p("## Gate-free sharded cache on custom resources (phase 10)")
	p("")
	p("kshard with `CacheMode: labels` (`PartitionBy: key`, no `Balance`; %d replicas) beside the leader-elected controller-runtime operator (%d replicas), both reconciling the BenchObject custom resource (a ConfigMap's shape in a kind of its own: e2e/bench/benchobject-crd.yaml) and caching every namespace, on control planes **without** the `ShardedListAndWatch` feature gate: one with the objects spread over %d namespaces, one with all of them in one namespace. Per object count, kshard's first start over the objects that carry no partition label yet, then rounds of each system (%s): start, formed and idle, one update of every object until reconciled and idle. Memory per replica: peak RSS (VmHWM), steady RSS (VmRSS once idle after the pass), the Go heap live after a forced collection and the RSS once the collection's pages went back (each operator's bench debug server); CPU is the whole fleet's, start to end. Then kshard restarts every replica in turn: the new processes' peak RSS, and the label patches and objects listed ÷ the objects moved (every cached object moves twice). In the rounds whose rolling restart says *kept places*, kshard ran with `--keep-place-on-leave` (`KeepPlaceOnLeave`): a restarting replica's partitions waited for its next process instead of moving to its peers and back, so each object moved once, to its replica's next process, which listed it. Ratios are medians of per-round ratios.",
		pr.ShardedReplicas, pr.BaselineReplicas, pr.ShardedNamespaces, r.Labels.roundsRun())
	p("")
	p("At %d objects, kshard ÷ controller-runtime (largest replica of each): peak RSS **%s×** spread, **%s×** in one namespace (goal ≤ 0.40, aim 0.35); through a rolling restart %s× and %s×; live heap after a forced collection %s× and %s×; steady RSS %s× and %s×; fleet CPU %s× and %s× (goal ≤ 1.2). Label writes per moved object %s (goal 0), objects listed per moved object %s; label writes per unlabelled object at a first start %s (goal ≤ 1).",
		g.Objects, f2(g.RSSRatio), f2(g.RSSRatioSingleNamespace), f2(g.RSSRatioRollout), f2(g.RSSRatioSingleNamespaceRollout), f2(g.LiveHeapRatio), f2(g.LiveHeapRatioSingleNamespace),
		f2(g.SteadyRSSRatio), f2(g.SteadyRSSRatioSingleNamespace), f2(g.FleetCPURatio), f2(g.FleetCPURatioSingleNamespace), f3(g.WritesPerMove), f2(g.ObjectsListedPerMove), f2(g.LabelWritesPerObject))
	if s := r.Summary.Adapter; s != nil && s.ShardedGateOff != nil {
		a := s.ShardedGateOff
		p("")
		p("The **adapter** (e2e/bench/crshardop, controller-runtime with `crshard` and `Ring.NewCache` in `CacheMode: labels`, %d replicas; no rolling restart in its rounds) on the same objects, ÷ the same leader: peak RSS **%s×** spread, **%s×** in one namespace (goal ≤ 0.45); live heap after a forced collection %s× and %s×; steady RSS %s×; fleet CPU %s× and %s× (goal ≤ 1.2).",
			pr.ShardedReplicas, f2(a.RSSRatio), f2(a.RSSRatioSingleNamespace), f2(a.LiveHeapRatio), f2(a.LiveHeapRatioSingleNamespace), f2(a.SteadyRSSRatio), f2(a.FleetCPURatio), f2(a.FleetCPURatioSingleNamespace))
	}
	r.labelsRuns(p)
	r.labelsFirstStarts(p)
	for _, l := range r.Labels.Layouts {
		labelsThroughput(p, pr, l)
	}
}

// labelsRuns renders phase 10's rounds, every layout's.
func (r *results) labelsRuns(p printer) {
	p("")
	p("| layout | round | system | cache | objects | start → formed s | pass s | peak RSS per replica MiB | steady RSS max MiB | live heap max MiB | RSS after collection max MiB | fleet CPU s | objects cached per replica | label patches | rolling restart: peak RSS max MiB, label patches, objects listed |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range r.Labels.Layouts {
		for _, sr := range l.Runs {
			rollout := "—"
			if sr.RolloutMaxPeakRSSMiB > 0 {
				rollout = fmt.Sprintf("%.0f, %.0f, %.0f", sr.RolloutMaxPeakRSSMiB, sr.RolloutLabelPatches, sr.RolloutObjectsListed)
				if sr.RolloutKeptPlaces {
					rollout = "kept places: " + rollout
				}
			}
			p("| %s | %d | %s | %s | %d | %.1f | %.1f | %s | %.0f | %.0f | %.0f | %.1f | %s | %.0f | %s |", l.Layout, sr.Round, sr.System, sr.CacheMode, sr.Objects, sr.StartupSeconds, sr.PassSeconds,
				perReplica(sr.PeakRSSMiB), sr.MaxSteadyRSSMiB, sr.MaxLiveHeapMiB, sr.MaxRSSAfterGCMiB, sr.FleetCPU, cmp.Or(perReplica(sr.CachedObjects), "—"), sr.LabelPatches, rollout)
		}
	}
}

// labelsFirstStarts renders phase 10's first starts over unlabelled
// objects.
func (r *results) labelsFirstStarts(p printer) {
	pr, g := r.Params, orZero(r.Summary.ShardedGateOff)
	p("")
	p("**First start** over objects without their partition label (the objects were created while no kshard replica ran): %d kshard replicas, from the first process's start until the harness's watch sees every object labelled with its own partition, and until formed and idle; the fleet's label patches, live reads confirming objects that left a label selector, and objects listed; every resource request the API server completed meanwhile (a watch counts when it ends), those on BenchObjects by verb. Peak RSS %s× the leader's spread, %s× in one namespace (goal ≤ 0.6).",
		pr.ShardedReplicas, f2(g.FirstStartRSSRatio), f2(g.FirstStartRSSRatioSingleNamespace))
	p("")
	p("| layout | objects (unlabelled) | all labelled s | formed s | label patches (per unlabelled object) | confirm reads | objects listed | API requests | BenchObject LIST / WATCH / GET / PATCH | peak RSS per replica MiB | fleet CPU s |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range r.Labels.Layouts {
		for _, fs := range l.FirstStarts {
			p("| %s | %d (%d) | %.1f | %.1f | %.0f (%s) | %.0f | %.0f | %.0f | %.0f / %.0f / %.0f / %.0f | %s | %.1f |", l.Layout, fs.Objects, fs.Unlabelled, fs.LabelledSeconds, fs.FormedSeconds,
				fs.LabelPatches, f2(ratio(fs.LabelPatches, float64(fs.Unlabelled))), fs.ConfirmReads, fs.ObjectsListed, fs.APIRequests,
				fs.Requests["LIST"], fs.Requests["WATCH"], fs.Requests["GET"], fs.Requests["PATCH"], perReplica(fs.PeakRSSMiB), fs.FleetCPU)
		}
	}
}

// labelsThroughput renders the throughput, handoff and failover phase 10
// measured on layout l, if it measured them there.
func labelsThroughput(p printer, pr params, l labelsLayout) {
	if len(l.Ceiling) == 0 && len(l.Throughput.Samples) == 0 {
		return
	}
	p("")
	labelling := "the first round's kshard fleet labelled the objects with their partition while measured (one more patch per object), so that round's figures include a first start's labelling"
	if l.LabelledFirst {
		labelling = "the objects labelled with their partition by an untimed kshard fleet before the first round, so that no round measures a first start's labelling"
	}
	p("**Throughput** (%s layout's control plane, %d BenchObjects in the bench namespace, kshard at 4 replicas with the gate-free sharded cache; %s): phase 2's workloads, and the ceiling of BenchObject patches from a plain client-go loop before each round (round's best: %s writes/s median).",
		l.Layout, cmp.Or(throughputObjects(l.Throughput.Samples), pr.Objects), labelling, f2(medianPtr(slices.Collect(maps.Values(ceilingsByRound(l.Ceiling))))))
	p("")
	throughputTable(p, fmt.Sprintf("Latency-bound (%s per reconcile), custom resources.", samplesLatency(pr.Latency, l.Throughput.Samples)), l.Throughput)
	throughputTable(p, fmt.Sprintf("Write-bound (no simulated latency), custom resources: one patch per object; %s. Reported as kshard's rate ÷ controller-runtime's and each fleet's CPU per object.", writeBoundWindow(pr, l.WriteBound)), l.WriteBound)
	if h, f := l.Handoff, l.Failover; h != nil || f != nil {
		hf, ff := orZero(h), orZero(f)
		p("**Handoff and failover** (%d kshard replicas on those objects): a rolling restart under a writer at %.0f updates/s — %d updates, p50 %.3f s, p99 %.3f s, max %.3f s, rollout %.1f s, %.0f label patches and %.0f objects listed in it; crash failover %.2f s (%s killed).",
			pr.ShardedReplicas, pr.WriterRate, hf.Rollout.Updates, hf.Rollout.P50Seconds, hf.Rollout.P99Seconds, hf.Rollout.MaxSeconds, hf.RolloutTotal, hf.LabelPatches, hf.ObjectsListed, ff.Seconds, cmp.Or(ff.Killed, "—"))
	}
}

// orZero is *v, or T's zero value (every figure "—" or 0) when v is nil.
func orZero[T any](v *T) T {
	if v == nil {
		var zero T
		return zero
	}
	return *v
}

// writeBoundWindow says how long set's write-bound runs lasted: runs from
// before they were repeated recorded no passes.
func writeBoundWindow(p params, set throughputSet) string {
	passes := 0
	for _, t := range set.Samples {
		passes = max(passes, t.Passes)
	}
	if p.WriteBoundMin <= 0 || passes == 0 {
		return "one pass per run"
	}
	return fmt.Sprintf("new epochs back to back, each awaited, until %s had passed (rate = every object reconciled ÷ the whole window; machine busy and the operators' CPU over it too)", p.WriteBoundMin)
}

// samplesLatency is the latency the samples were measured at (their
// median; a phase kept from an earlier run may have run at another than
// this run's), or def when they recorded none.
func samplesLatency(def time.Duration, samples []throughputResult) time.Duration {
	var ms []float64
	for _, t := range samples {
		if t.LatencyMS > 0 {
			ms = append(ms, t.LatencyMS)
		}
	}
	if len(ms) == 0 {
		return def
	}
	return time.Duration(median(ms) * float64(time.Millisecond))
}
