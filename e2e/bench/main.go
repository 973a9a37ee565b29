package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// baselineName names the controller-runtime system in results.
const baselineName = "controller-runtime"

// params are the benchmark's knobs; RESULTS.md prints them all.
type params struct {
	Quick bool `json:"quick"`
	// Objects is W: the objects of the main control plane's capacity
	// measurement, handoff and failover (phases 3, 4 and 6), and of phase
	// 8's and phase 10's spread layout's handoff and failover.
	Objects int `json:"objects"`
	// ThroughputObjects is how many objects the throughput rounds of
	// phases 2, 8 and 10 run on (at least Objects): the objects grow to it
	// before the rounds and shrink back to Objects after them, so that
	// the other phases keep their counts. A latency-bound round ends when
	// its busiest replica does, and 2,000 keys split 510/467/477/546 over 4
	// replicas (r-0..r-3), capping 4 replicas at 3.66× one leader however
	// fast each is; 4,000 split 1005/962/987/1046, a cap of 3.82
	// (TestThroughputObjectsOutgrowTheKeysSpread). 0 in files from before
	// it (their rounds ran on Objects).
	ThroughputObjects int           `json:"throughput_objects"`
	Latency           time.Duration `json:"latency"`
	// ChooseLatency: Latency is chosen from the machine's measured
	// capacity before the first round (latency.go); set in full runs that
	// run phase 2, 8 or 10 without -latency.
	ChooseLatency bool `json:"-"`
	// WriteBoundMin: a write-bound throughput run repeats new epochs back
	// to back until this long has passed (0: one pass, quick runs).
	WriteBoundMin time.Duration `json:"write_bound_min"`
	Workers       int           `json:"workers_per_replica"`
	// ThroughputWorkers: workers per replica in the latency-bound
	// throughput rounds of phases 2, 8 and 10 (0 in files from before it:
	// Workers). More workers at a proportionally longer latency keep a
	// replica's ideal rate, while one patch's round trip, which every
	// reconcile adds to the simulated latency and which grows with the
	// API server's load, becomes a smaller part of a reconcile: at 4
	// workers and 50 ms it took 4 replicas' ratio to the leader from the
	// keys' cap of 3.82 to 3.2 in key mode.
	ThroughputWorkers int `json:"throughput_workers_per_replica,omitempty"`
	// HandoffLatency is the simulated latency of the handoff, failover and
	// restart-in-place runs (phases 3, 4 and 6, and phase 8's and 10's
	// handoff and failover), which measure delays, not rates: fixed,
	// not chosen from the capacity (0 in files from before it: Latency).
	HandoffLatency   time.Duration `json:"handoff_latency,omitempty"`
	QPS              float64       `json:"client_qps"`
	Burst            int           `json:"client_burst"`
	Phases           map[int]bool  `json:"phases"`
	RestartKills     int           `json:"restart_kills"`
	Rounds           int           `json:"rounds"`
	Replicas         []int         `json:"kshard_replicas"`
	AdapterReplicas  []int         `json:"adapter_replicas"`
	WriteReplicas    []int         `json:"write_bound_kshard_replicas"`
	BaselineReplicas int           `json:"baseline_replicas"`
	CeilingWorkers   []int         `json:"ceiling_goroutines"`
	CeilingDuration  time.Duration `json:"ceiling_duration"`
	LeaseDuration    time.Duration `json:"lease_duration"`
	RenewDeadline    time.Duration `json:"renew_deadline"`
	RenewPeriod      time.Duration `json:"renew_period"`
	DrainGrace       time.Duration `json:"drain_grace"`
	HandoffReplicas  int           `json:"handoff_replicas"`
	WriterRate       float64       `json:"writer_updates_per_second"`
	Settle           time.Duration `json:"settle"`
	ResourceObjects  int           `json:"resource_objects"`
	ResourceReplicas int           `json:"resource_replicas"`
	SteadyWindow     time.Duration `json:"steady_window"`
	// Phase 7 (sharded.go): object counts, namespaces they are spread
	// over, and kshard replicas.
	ShardedObjects    []int `json:"sharded_objects"`
	ShardedNamespaces int   `json:"sharded_namespaces"`
	ShardedReplicas   int   `json:"sharded_replicas"`
	// ShardedFallback: phases 7 and 8 also run kshard on a control plane
	// without the feature gate (default in full runs).
	ShardedFallback bool `json:"sharded_fallback"`
	// ShardedBalance is kshard's --balance in phases 7 and 8: partitions
	// placed by object counts, within this fraction of the mean (0: by
	// number).
	ShardedBalance float64 `json:"sharded_balance"`
	// ShardedCustomResources: phase 7 also runs both systems over this
	// many BenchObject custom resources on each of its control planes
	// (0: none).
	ShardedCustomResources int `json:"sharded_custom_resources"`
	// Phase 10 (labels.go): the gate-free sharded cache's object counts,
	// rising; the spread layout uses ShardedNamespaces and both
	// ShardedReplicas kshard replicas, p.Rounds rounds.
	LabelsObjects []int `json:"labels_objects"`
	// LabelsLayouts: the layouts phase 10 runs, in this order (default
	// both); a run of one keeps the other's figures from results.json.
	LabelsLayouts []string `json:"labels_layouts"`
	// LabelsKeepPlace: phase 10's kshard rounds run with
	// --keep-place-on-leave, so that their rolling restart moves nothing
	// (default on).
	LabelsKeepPlace bool `json:"labels_keep_place"`
	// LabelsParts: labelsPartsThroughput runs only the spread layout's
	// throughput rounds of phase 10, and keeps its other figures and the
	// single layout from results.json; "" runs all of phase 10.
	LabelsParts string `json:"labels_parts,omitempty"`
	// Phase 9 (scale.go): fleet sizes, object counts, partitions and the
	// namespaces the objects are spread over.
	ScaleReplicas   []int `json:"scale_replicas"`
	ScaleObjects    []int `json:"scale_objects"`
	ScalePartitions int   `json:"scale_partitions"`
	ScaleNamespaces int   `json:"scale_namespaces"`
	// ScaleLeaseFixed: -lease-duration was given, so every phase 9
	// configuration runs with it instead of the recommendation in docs/configuration.md
	// for its size (scaleLeaseDuration).
	ScaleLeaseFixed bool          `json:"scale_lease_fixed"`
	ReadyTimeout    time.Duration `json:"-"`
	StopTimeout     time.Duration `json:"-"`
	Timeout         time.Duration `json:"-"`
}

// throughputWorkers is ThroughputWorkers, or Workers in files from before
// it was recorded.
func (p params) throughputWorkers() int { return cmp.Or(p.ThroughputWorkers, p.Workers) }

func defaultParams(quick bool) params {
	p := params{
		Objects: 2000, ThroughputObjects: 4000, Latency: 20 * time.Millisecond, Workers: 4, ThroughputWorkers: 16, HandoffLatency: 20 * time.Millisecond, QPS: 1000, Burst: 2000,
		Phases: map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 10: true}, RestartKills: 5,
		Rounds: 3, Replicas: []int{1, 2, 4}, AdapterReplicas: []int{1, 2, 4}, WriteReplicas: []int{1, 4}, BaselineReplicas: 2,
		CeilingWorkers: []int{16, 64}, CeilingDuration: 5 * time.Second, WriteBoundMin: 30 * time.Second,
		LeaseDuration: 10 * time.Second, RenewDeadline: 6666 * time.Millisecond, RenewPeriod: 2 * time.Second,
		DrainGrace: 5 * time.Second, HandoffReplicas: 2, WriterRate: 100, Settle: 3 * time.Second,
		ResourceObjects: 10000, ResourceReplicas: 2, SteadyWindow: 30 * time.Second,
		ShardedObjects: []int{10000, 50000, 100000}, ShardedNamespaces: 500, ShardedReplicas: 3, ShardedFallback: !quick, ShardedBalance: 0.02,
		ShardedCustomResources: 10000, LabelsObjects: []int{100000}, LabelsLayouts: []string{layoutSpread, layoutSingle}, LabelsKeepPlace: true,
		ScaleReplicas: []int{3, 16, 32, 64}, ScaleObjects: []int{10000, 100000}, ScalePartitions: 1021, ScaleNamespaces: 2000,
		ReadyTimeout: 3 * time.Minute, StopTimeout: 45 * time.Second, Timeout: 80 * time.Minute,
	}
	if quick {
		p.Quick = true
		p.Objects, p.ResourceObjects, p.Rounds = 200, 1000, 1
		// A smoke run keeps its latency-bound rounds at 20 ms and 4
		// workers: short, and not judged.
		p.ThroughputWorkers = p.Workers
		// A few more than Objects, so that a smoke run grows the objects
		// for its throughput rounds and shrinks them back as a full run
		// does.
		p.ThroughputObjects = 300
		p.WriteReplicas = []int{4}
		// The adapter runs only its 4-replica throughput in a smoke run:
		// its other phases would add a minute for little news.
		p.AdapterReplicas = []int{4}
		p.CeilingWorkers, p.CeilingDuration = []int{16}, 2*time.Second
		p.WriteBoundMin = 0
		p.LeaseDuration, p.RenewDeadline, p.RenewPeriod = 4*time.Second, 2600*time.Millisecond, 500*time.Millisecond
		p.DrainGrace, p.Settle, p.SteadyWindow = 2*time.Second, time.Second, 5*time.Second
		p.WriterRate = 50
		p.RestartKills = 1
		p.ShardedObjects, p.ShardedNamespaces = []int{600}, 20
		p.ShardedCustomResources, p.LabelsObjects = 200, []int{600}
		p.Timeout = 7 * time.Minute
	}
	return p
}

// passTimeout bounds a wait for a fleet to reconcile n objects once: the
// readiness timeout, plus a second per passPerSecond objects, since the
// leader alone reconciles 100,000 custom resources at a few hundred a
// second on 2 cores (a flat 3 minutes failed such a pass at 153,226 of
// 202,000 reconciles on a loaded machine).
func (p *params) passTimeout(n int) time.Duration {
	const passPerSecond = 100
	return p.ReadyTimeout + time.Duration(n/passPerSecond)*time.Second
}

// bench is one benchmark run on one control plane.
type bench struct {
	p      params
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
	// objs writes the benchmark objects: ConfigMaps, or the BenchObject
	// custom resource (phases 7 and 10).
	objs  objectClient
	obs   *observer
	dir   string // logs of the operators
	ns    string
	epoch int   // the epoch ConfigMap's value
	gens  []int // each object's generation as last written
	// fleetArgs are added to every replica's command line (phases 7, 8, 10).
	fleetArgs []string
	// ring, when set, names every kshard fleet's ring instead of the
	// fleet's own name (phase 10: the partition label's key names the
	// ring, so fleets that are to find the objects labelled share one).
	ring string
	// spread: object i lives in shardedNamespace(i % spread), each of those
	// namespaces with its own epoch ConfigMap (phase 8); 0: every object
	// and the one epoch ConfigMap live in ns.
	spread int
	// sharedEpoch: with objects spread, the operators read the one epoch
	// ConfigMap in ns (phase 8's "one epoch" runs) rather than their
	// namespace's; epochWritten is the epoch last written into each
	// layout's ConfigMaps (see useEpochs).
	sharedEpoch  bool
	epochWritten map[bool]int

	mu       sync.Mutex // guards warnings
	warnings []string
	// parent is the bench this one was made from, on a control plane of a
	// phase's own (phases 7-10): warnings go to the run's.
	parent *bench
}

func (b *bench) warn(format string, args ...any) {
	if b.parent != nil {
		b.parent.warn(format, args...)
		return
	}
	msg := fmt.Sprintf(format, args...)
	progress("warning: %s", msg)
	b.mu.Lock()
	b.warnings = append(b.warnings, msg)
	b.mu.Unlock()
}

var started = time.Now()

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	quick := flag.Bool("quick", false, "a smoke run of every phase with small numbers (about 2 minutes), for CI")
	out := flag.String("out", "", "directory for results.json and RESULTS.md (default e2e/bench in the module); `make charts` draws the charts beside them")
	reportOnly := flag.Bool("report-only", false, "measure nothing: render RESULTS.md again from the results.json in -out (after a change to the report's text)")
	resummarise := flag.Bool("summarise", false, "with -report-only, derive results.json's headline figures again from the runs it holds (after a fix to how they are derived)")
	objects := flag.Int("objects", 0, "objects W: those of the handoff and failover phases and of the capacity measurement (default 2000; 200 with -quick); the throughput rounds run on -throughput-objects")
	throughputObjects := flag.Int("throughput-objects", 0, "objects the throughput rounds of phases 2, 8 and 10 run on, at least -objects (0: the default, 4000; 300 with -quick): with fewer, the keys' spread over 4 replicas caps their ratio (2,000 objects: 3.66×)")
	latency := flag.Duration("latency", 0, "simulated latency per reconcile in the latency-bound rounds of phases 2, 8 and 10 (default: chosen from the machine's measured capacity in a full run, so that 4 replicas' ideal rate is at most a third of it; 20ms with -quick); the handoff, failover and restart-in-place runs (phases 3, 4, 6 and those of 8 and 10) run at 20ms")
	throughputWorkers := flag.Int("throughput-workers", 0, "workers per replica in the latency-bound rounds of phases 2, 8 and 10 (default 16; 4 with -quick); the other runs have 4")
	writeBoundMin := flag.Duration("write-bound-min", -1, "a write-bound throughput run repeats new epochs back to back until this long has passed (default 30s; one pass with -quick)")
	rounds := flag.Int("rounds", 0, "rounds of phases 1 and 2, each configuration once per round; medians are reported (default 3; 1 with -quick)")
	phases := flag.String("phases", "1,2,3,4,5,6,7,8,10", "phases to run: 1 ceiling, 2 throughput, 3 handoff, 4 failover, 5 resources, 6 restart-in-place failover, 7 sharded cache resources, 8 sharded cache throughput, handoff and failover, 9 the scale envelope (never by default: about 24 minutes), 10 the gate-free sharded cache (CacheMode labels) on custom resources")
	resReplicas := flag.Int("resource-replicas", 0, "replicas of each system in phase 5 (default 2)")
	keep := flag.Bool("keep", false, "keep the control plane's and operators' files")
	shardedObjects := flag.String("sharded-objects", "", "phase 7's object counts, comma-separated and rising (default 10000,50000,100000; 600 with -quick)")
	shardedCRs := flag.Int("sharded-custom-resources", -1, "phase 7 also runs both systems over this many BenchObject custom resources on each control plane, 0 none (default 10000; 200 with -quick)")
	labelsObjects := flag.String("labels-objects", "", "phase 10's object counts, comma-separated and rising (default 100000; 600 with -quick)")
	labelsKeepPlace := flag.Bool("labels-keep-place", true, "phase 10's kshard replicas keep their place on a graceful leave (--keep-place-on-leave): their rolling restart moves no partition to a peer")
	labelsLayouts := flag.String("labels-layouts", "spread,single", "phase 10's object layouts, comma-separated: spread (over -sharded-namespaces namespaces, with the gate-off throughput, handoff and failover) and single (one namespace); a run of one keeps the other's figures from results.json")
	labelsParts := flag.String("labels-parts", "all", "phase 10's parts: all, or throughput (only the spread layout's throughput rounds: ceiling, latency-bound and write-bound on -throughput-objects BenchObjects; the memory rounds, handoff and failover and the single layout are kept from results.json)")
	scaleReplicas := flag.String("scale-replicas", "", "phase 9's fleet sizes, comma-separated and rising (default 3,16,32,64)")
	scaleObjects := flag.String("scale-objects", "", "phase 9's object counts, comma-separated and rising (default 10000,100000)")
	shardedFallback := flag.Bool("sharded-fallback", true, "phases 7 and 8 also measure kshard with the feature gate off (never with -quick)")
	shardedBalance := flag.Float64("sharded-balance", -1, "kshard's --balance in phases 7 and 8: place partitions by object counts, within this fraction of the mean; 0 places by number (default 0.02)")
	leaseDuration := flag.Duration("lease-duration", 0, "every kshard replica's LeaseDuration, with RenewDeadline 2/3 and RenewPeriod 1/5 of it (default 10s; 4s with -quick; phase 9 by default uses the recommendation per fleet size in docs/configuration.md)")
	timeout := flag.Duration("timeout", 0, "the whole run's deadline (default 80m; 7m with -quick): raise it for phase 10 at 100,000 objects on a slow or shared machine")
	merge := flag.Bool("merge", true, "when -phases leaves some phases out, keep their figures from the results.json already in -out (see phases_from_earlier_runs)")
	flag.Parse()
	if *reportOnly {
		dir, err := outDir(*out)
		if err == nil {
			err = rewriteReport(dir, *resummarise)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -report-only: %v\n", err)
			os.Exit(1)
		}
		return
	}
	p := defaultParams(*quick)
	if *objects > 0 {
		p.Objects = *objects
		p.ResourceObjects = max(p.ResourceObjects, p.Objects)
	}
	switch {
	case *throughputObjects < 0:
		fmt.Fprintf(os.Stderr, "bench: -throughput-objects: %d is negative: give a count, or 0 for the default\n", *throughputObjects)
		os.Exit(2)
	case *throughputObjects > 0 && *throughputObjects < p.Objects:
		fmt.Fprintf(os.Stderr, "bench: -throughput-objects %d is below the %d objects of the other phases: the throughput rounds add objects, never run on fewer; give at least %d\n", *throughputObjects, p.Objects, p.Objects)
		os.Exit(2)
	case *throughputObjects > 0:
		p.ThroughputObjects = *throughputObjects
	}
	// -objects above the default throughput objects: the rounds run on
	// -objects.
	p.ThroughputObjects = max(p.ThroughputObjects, p.Objects)
	p.Phases = map[int]bool{}
	for _, f := range strings.Split(*phases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10 {
			fmt.Fprintf(os.Stderr, "bench: -phases: %q is not a phase number 1-10\n", f)
			os.Exit(2)
		}
		p.Phases[n] = true
	}
	if *resReplicas > 0 {
		p.ResourceReplicas = *resReplicas
	}
	if *timeout > 0 {
		p.Timeout = *timeout
	}
	p.ShardedFallback = p.ShardedFallback && *shardedFallback
	if *shardedBalance >= 0 {
		p.ShardedBalance = *shardedBalance
	}
	if *shardedCRs >= 0 {
		p.ShardedCustomResources = *shardedCRs
	}
	for _, c := range []struct {
		flag, list string
		dst        *[]int
	}{{"sharded-objects", *shardedObjects, &p.ShardedObjects}, {"scale-replicas", *scaleReplicas, &p.ScaleReplicas}, {"scale-objects", *scaleObjects, &p.ScaleObjects}, {"labels-objects", *labelsObjects, &p.LabelsObjects}} {
		if c.list == "" {
			continue
		}
		counts, err := risingCounts(c.list)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -%s: %v\n", c.flag, err)
			os.Exit(2)
		}
		*c.dst = counts
	}
	layouts, err := parseLayouts(*labelsLayouts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -labels-layouts: %v\n", err)
		os.Exit(2)
	}
	p.LabelsLayouts, p.LabelsKeepPlace = layouts, *labelsKeepPlace
	switch *labelsParts {
	case "all":
	case labelsPartsThroughput:
		if !slices.Equal(layouts, []string{layoutSpread}) && !slices.Equal(layouts, defaultParams(false).LabelsLayouts) {
			fmt.Fprintln(os.Stderr, "bench: -labels-parts throughput measures the spread layout only: leave -labels-layouts out or give spread")
			os.Exit(2)
		}
		p.LabelsParts, p.LabelsLayouts = labelsPartsThroughput, []string{layoutSpread}
	default:
		fmt.Fprintf(os.Stderr, "bench: -labels-parts: %q is not all or throughput\n", *labelsParts)
		os.Exit(2)
	}
	if *leaseDuration > 0 {
		p.LeaseDuration, p.RenewDeadline, p.RenewPeriod = *leaseDuration, *leaseDuration*2/3, *leaseDuration/5
		p.ScaleLeaseFixed = true
	}
	if *rounds > 0 {
		p.Rounds = *rounds
	}
	if *latency > 0 {
		p.Latency = *latency
	}
	if *throughputWorkers < 0 {
		fmt.Fprintf(os.Stderr, "bench: -throughput-workers %d: give a positive count (0: the default, %d)\n", *throughputWorkers, p.ThroughputWorkers)
		os.Exit(2)
	}
	if *throughputWorkers > 0 {
		p.ThroughputWorkers = *throughputWorkers
	}
	p.ChooseLatency = !p.Quick && *latency <= 0 && (p.Phases[2] || p.Phases[8] || p.Phases[10])
	if *writeBoundMin >= 0 {
		p.WriteBoundMin = *writeBoundMin
	}
	if err := run(p, *out, *keep, *merge); err != nil {
		progress("FAILED: %v", err)
		os.Exit(1)
	}
}

// risingCounts parses a comma-separated list of rising positive counts.
func risingCounts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%d does not follow %d: give the counts rising", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// outDir is -out, or e2e/bench in the module when it is empty.
func outDir(out string) (string, error) {
	if out != "" {
		return out, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "e2e", "bench"), nil
}

// moduleRoot is the directory of the kshard module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the benchmark inside the kshard module (go run ./e2e/bench)")
	}
	return filepath.Dir(mod), nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
