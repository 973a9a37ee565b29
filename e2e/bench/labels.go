package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// Phase 10 measures the gate-free sharded cache (manager.Options.CacheMode
// labels, PartitionBy key, no Balance) on the BenchObject custom resource
// against the controller-runtime leader, on control planes of its own
// without the ShardedListAndWatch feature gate: one with the objects spread
// over p.ShardedNamespaces namespaces, one with all of them in one
// namespace. On each, per object count: kshard's first start over the
// objects that carry no partition label yet (time and API requests until
// every one carries its own, label writes per object, peak RSS); then
// p.Rounds rounds of both systems over the labelled objects (peak, steady
// and after-collection memory, fleet CPU; kshard through a rolling restart:
// its peak RSS, and the labels it wrote and objects it listed per moved
// object). The spread control plane first runs phase 2's latency-bound and
// write-bound throughput, with its ceiling, over p.ThroughputObjects
// objects in the bench namespace, and last a graceful handoff and a crash
// failover there, on p.Objects of them (the memory rounds cache those too).

// labelsRing names every kshard fleet of phase 10: the partition label's
// key names the ring, so fleets that share it find the objects labelled.
const labelsRing = "ks-labels"

// The two object layouts of phase 10.
const (
	layoutSpread = "spread"
	layoutSingle = "single namespace"
)

// labelsResults is phase 10: a row set per layout.
type labelsResults struct {
	Layouts []labelsLayout `json:"layouts"`
}

// labelsLayout is phase 10 on one control plane.
type labelsLayout struct {
	Layout     string `json:"layout"` // layoutSpread or layoutSingle
	Namespaces int    `json:"namespaces"`
	// FirstStarts: kshard's first start at each object count (over the
	// objects created since the last).
	FirstStarts []firstStart `json:"first_starts"`
	// Runs: per object count and round, controller-runtime's and kshard's.
	Runs []shardedResult `json:"runs"`
	// The spread layout's throughput rounds (as phases 1 and 2: ratios
	// are medians of per-round ratios) and its handoff and failover.
	Ceiling []ceilingResult `json:"ceiling,omitempty"`
	// LabelledFirst: an untimed kshard fleet labelled the throughput
	// objects before the first round (labelFirst); results without it had
	// the first kshard round label them while measured.
	LabelledFirst bool            `json:"labelled_first,omitempty"`
	Throughput    throughputSet   `json:"throughput"`
	WriteBound    throughputSet   `json:"write_bound"`
	Handoff       *handoffResult  `json:"handoff,omitempty"`
	Failover      *failoverResult `json:"failover,omitempty"`
}

// firstStart is kshard's start over objects of which some carry no
// partition label of its ring yet.
type firstStart struct {
	// Count is the phase's object count it ran at (p.LabelsObjects);
	// Objects all the objects the fleet caches (with the spread layout's
	// throughput objects); Unlabelled those without their partition label
	// when it started.
	Count      int `json:"count"`
	Objects    int `json:"objects"`
	Unlabelled int `json:"unlabelled"`
	Replicas   int `json:"replicas"`
	// LabelledSeconds: start of the first process → every object labelled
	// with its partition (seen by the harness's watch); FormedSeconds:
	// start → formed, every initial reconcile done and idle.
	LabelledSeconds float64 `json:"labelled_seconds"`
	FormedSeconds   float64 `json:"formed_seconds"`
	// LabelPatches, ConfirmReads and ObjectsListed sum the fleet's
	// kshard_cache_label_patches_total, kshard_cache_confirm_reads_total
	// and kshard_cache_listed_objects_total.
	LabelPatches  float64 `json:"label_patches"`
	ConfirmReads  float64 `json:"confirm_reads"`
	ObjectsListed float64 `json:"objects_listed"`
	// APIRequests counts every resource request the API server completed
	// from the start until labelled and formed (apiserver_request_total;
	// a watch counts when it ends); Requests those on BenchObjects, by
	// verb.
	APIRequests   float64            `json:"api_requests"`
	Requests      map[string]float64 `json:"benchobject_requests"`
	CacheMode     string             `json:"cache_mode"`
	PeakRSSMiB    map[string]float64 `json:"peak_rss_mib"`
	MaxPeakRSSMiB float64            `json:"max_peak_rss_mib"`
	CPUSeconds    map[string]float64 `json:"cpu_seconds"`
	FleetCPU      float64            `json:"fleet_cpu_seconds"`
}

// -labels-parts: labelsPartsThroughput runs only the spread layout's
// throughput rounds (ceiling, latency-bound and write-bound, on
// p.ThroughputObjects BenchObjects), whose provenance is
// labelsThroughputPart.
const (
	labelsPartsThroughput = "throughput"
	labelsThroughputPart  = "10 (" + layoutSpread + " throughput)"
)

// labelsArgs are kshard's flags for phase 10.
var labelsArgs = []string{"--kind=" + benchObjects.Name, "--cache-mode=labels"}

// layoutFlags are the -labels-layouts names of the layouts.
var layoutFlags = map[string]string{"spread": layoutSpread, "single": layoutSingle}

// parseLayouts reads -labels-layouts: layout names, each once.
func parseLayouts(list string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		l, ok := layoutFlags[strings.TrimSpace(f)]
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not a layout: spread or single", strings.TrimSpace(f))
		case slices.Contains(out, l):
			return nil, fmt.Errorf("%q is given twice", strings.TrimSpace(f))
		}
		out = append(out, l)
	}
	return out, nil
}

// labelsPhase runs phase 10 on each layout of p.LabelsLayouts; adapter
// (nil: not measured) runs the controller-runtime adapter's rounds beside
// kshard's.
func (b *bench) labelsPhase(ctx context.Context, kshard, baseline, adapter *system) (*labelsResults, error) {
	out := &labelsResults{}
	for _, layout := range b.p.LabelsLayouts {
		namespaces := 0
		if layout == layoutSpread {
			namespaces = b.p.ShardedNamespaces
		}
		res, err := b.labelsOn(ctx, kshard, baseline, adapter, layout, namespaces)
		out.Layouts = append(out.Layouts, res)
		if err != nil {
			return out, fmt.Errorf("%s: %w", layout, err)
		}
	}
	return out, nil
}

// labelsOn runs phase 10 on a new control plane without the feature gate,
// the objects spread over namespaces (0: all in the bench namespace).
func (b *bench) labelsOn(ctx context.Context, kshard, baseline, adapter *system, layout string, namespaces int) (labelsLayout, error) {
	res := labelsLayout{Layout: layout, Namespaces: max(namespaces, 1)}
	pb, stop, err := b.shardedBench(ctx, false, namespaces)
	if err != nil {
		return res, err
	}
	defer stop()
	pb.ring = labelsRing
	// rb holds the objects whose memory is measured; it watches them all,
	// counting those that carry their partition label.
	rb, err := pb.withKind(ctx, benchObjects)
	if err != nil {
		return res, err
	}
	rb.obs = newObserver()
	if err := rb.obs.watchLabels(labelsRing, shard.Config{}); err != nil {
		return res, err
	}
	obsCtx, stopObs := context.WithCancel(ctx)
	rbDone, err := rb.obs.run(obsCtx, rb.cp.Config(), benchObjects, "")
	defer func() { stopObs(); <-rbDone }()
	if err != nil {
		return res, err
	}
	// tb holds the throughput, handoff and failover objects in the bench
	// namespace, with its epoch ConfigMap (the spread layout):
	// p.ThroughputObjects for the throughput rounds, p.Objects after them.
	var tb *bench
	if layout == layoutSpread {
		if tb, err = pb.withKind(ctx, benchObjects); err != nil {
			return res, err
		}
		tb.spread = 0
		tb.obs = newObserver()
		if err := tb.obs.watchLabels(labelsRing, shard.Config{}); err != nil {
			return res, err
		}
		tbDone, err := tb.obs.run(obsCtx, tb.cp.Config(), benchObjects, tb.ns)
		defer func() { stopObs(); <-tbDone }()
		if err != nil {
			return res, err
		}
		if err := tb.labelsThroughput(ctx, kshard, baseline, &res); err != nil {
			return res, err
		}
		if b.p.LabelsParts == labelsPartsThroughput {
			// The layout's other figures are kept from results.json
			// (keepEarlierLayouts).
			return res, nil
		}
		// The memory rounds cache, and the handoff and failover run on,
		// p.Objects throughput objects, as before the rounds ran on more.
		if err := tb.shrinkObjects(ctx, b.p.Objects, rb.obs); err != nil {
			return res, err
		}
	}

	created := 0
	for _, n := range b.p.LabelsObjects {
		progress("phase 10: %d custom resources, %s (%d namespaces), feature gate off", n, layout, res.Namespaces)
		if err := rb.createSpread(ctx, created, n); err != nil {
			return res, err
		}
		created = n
		all := n + len(tbGens(tb))
		if err := rb.obs.wait(ctx, func() bool { return len(rb.obs.objs) >= all }); err != nil {
			return res, err
		}
		fs, err := rb.firstStart(ctx, kshard, all)
		fs.Count = n
		res.FirstStarts = append(res.FirstStarts, fs)
		if err != nil {
			return res, fmt.Errorf("first start over %d objects: %w", n, err)
		}
		progress("  first start: %d of %d objects unlabelled, all labelled after %.1fs (formed %.1fs); %.0f label patches, %.0f API requests, peak RSS max %.0f MiB",
			fs.Unlabelled, fs.Objects, fs.LabelledSeconds, fs.FormedSeconds, fs.LabelPatches, fs.APIRequests, fs.MaxPeakRSSMiB)
		systems := []*system{baseline, kshard}
		if adapter != nil {
			systems = append(systems, adapter)
		}
		for round := 1; round <= b.p.Rounds; round++ {
			for _, sys := range systems {
				spec := resourceSpec{scenario: fmt.Sprintf("labels-%d-%d", n, round), replicas: b.p.BaselineReplicas, args: []string{"--kind=" + benchObjects.Name}}
				if sys.kshard {
					// The adapter's rounds measure its cache, not its
					// handoff (phases 3 and 4 do): no rolling restart.
					spec.replicas, spec.args, spec.rollout = b.p.ShardedReplicas, labelsArgs, sys == kshard
					if spec.rollout && b.p.LabelsKeepPlace {
						spec.args = append(slices.Clone(labelsArgs), "--keep-place-on-leave")
					}
					// kshard and the adapter share the ring's name, so
					// that both find the objects labelled with their
					// partitions; the fleet before was killed, so its
					// Leases go rather than be waited out.
					if err := rb.deleteRingLeases(ctx, labelsRing); err != nil {
						return res, err
					}
				}
				progress("round %d/%d, phase 10: %s over %d custom resources, %s", round, b.p.Rounds, sys.name, n, layout)
				r, err := rb.measureResources(ctx, sys, n, spec)
				r.Round, r.Namespaces = round, res.Namespaces
				r.RolloutKeptPlaces = spec.rollout && b.p.LabelsKeepPlace
				res.Runs = append(res.Runs, r)
				if err != nil {
					return res, fmt.Errorf("%s at %d objects, round %d: %w", sys.name, n, round, err)
				}
				r.logProgress()
				if sys.kshard && r.CacheMode != cache.ModeLabels {
					return res, fmt.Errorf("%s cached BenchObjects in mode %q, want %s", sys.name, r.CacheMode, cache.ModeLabels)
				}
			}
		}
	}

	if tb != nil {
		return res, tb.labelsMoves(ctx, kshard, &res)
	}
	return res, nil
}

// deleteRingLeases deletes the Leases of ring's members in b's namespace,
// left by a fleet that was killed.
func (b *bench) deleteRingLeases(ctx context.Context, ring string) error {
	err := b.client.CoordinationV1().Leases(b.ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: lease.LabelRing + "=" + ring})
	if err != nil {
		return fmt.Errorf("deleting the Leases of ring %s: %w", ring, err)
	}
	return nil
}

// tbGens is the throughput objects' generations (none without them).
func tbGens(tb *bench) []int {
	if tb == nil {
		return nil
	}
	return tb.gens
}

// labelsThroughput runs phases 1 and 2 on b's objects in the bench
// namespace, in rounds: the ceiling of BenchObject patches, then the
// latency-bound and write-bound workloads on controller-runtime and on 4
// kshard replicas with the gate-free sharded cache.
func (b *bench) labelsThroughput(ctx context.Context, kshard, baseline *system, res *labelsLayout) error {
	progress("phase 10: creating %d custom resources in %s", b.p.ThroughputObjects, b.ns)
	if err := b.ensureObserved(ctx, b.p.ThroughputObjects); err != nil {
		return err
	}
	defer func() { b.fleetArgs = nil }()
	if err := b.labelFirst(ctx, kshard); err != nil {
		return err
	}
	res.LabelledFirst = true
	for round := 1; round <= b.p.Rounds; round++ {
		for _, g := range b.p.CeilingWorkers {
			progress("round %d/%d, phase 10: API server ceiling with %d goroutines (custom resources)", round, b.p.Rounds, g)
			c, err := b.measureCeiling(ctx, g, b.p.CeilingDuration)
			if err != nil {
				return fmt.Errorf("ceiling: %w", err)
			}
			c.Round = round
			progress("  %.0f writes/s", c.WritesPerSec)
			res.Ceiling = append(res.Ceiling, c)
		}
		for _, c := range []struct {
			sys     *system
			n       int
			latency time.Duration
			set     *throughputSet
		}{
			{baseline, b.p.BaselineReplicas, b.p.Latency, &res.Throughput}, {kshard, 4, b.p.Latency, &res.Throughput},
			{baseline, b.p.BaselineReplicas, 0, &res.WriteBound}, {kshard, 4, 0, &res.WriteBound},
		} {
			b.fleetArgs = []string{"--kind=" + benchObjects.Name}
			if c.sys.kshard {
				b.fleetArgs = labelsArgs
			}
			progress("round %d/%d, phase 10: %s with %d replicas, %s latency, %d custom resources", round, b.p.Rounds, c.sys.name, c.n, c.latency, len(b.gens))
			t, err := b.throughput(ctx, c.sys, c.n, c.latency, fmt.Sprintf("labels-%d-%d-%d", round, c.n, c.latency.Milliseconds()))
			if err != nil {
				return fmt.Errorf("throughput, %s, %d replicas, %s latency: %w", c.sys.name, c.n, c.latency, err)
			}
			t.Round = round
			t.logProgress()
			c.set.Samples = append(c.set.Samples, t)
		}
	}
	return nil
}

// labelFirst labels b's objects with their partition, untimed, before the
// throughput rounds: each object is labelled once in its life, so the
// rounds measure the steady state, and a first start is measured on its
// own (firstStart). Without it the first kshard round's window held the
// whole fleet's labelling (one more patch per object, at LabelQPS per
// replica), which halved that round's latency-bound throughput on 2 cores.
func (b *bench) labelFirst(ctx context.Context, kshard *system) error {
	n := len(b.gens)
	if b.obs.labelledCount() >= n {
		return nil
	}
	progress("phase 10: labelling the %d throughput objects first (untimed)", n)
	b.fleetArgs = labelsArgs
	const replicas = 4
	f, err := b.startFleet(kshard, "labels-prelabel", replicas, fleetSpec{})
	if err != nil {
		return err
	}
	defer f.kill()
	lctx, cancel := context.WithTimeout(ctx, b.labellingTimeout(n, replicas))
	defer cancel()
	if _, err := b.obs.waitLabelled(lctx, n); err != nil {
		return fmt.Errorf("labelling the throughput objects: %w", err)
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return nil
}

// labellingTimeout bounds the labelling of unlabelled objects by replicas:
// labelling runs once partitions are active, at most cache.DefaultLabelQPS
// patches per second per replica, so it may take beyond the readiness
// timeout; the API server on 2 cores may be slower than that rate, hence
// four times the time it implies.
func (b *bench) labellingTimeout(unlabelled, replicas int) time.Duration {
	const slack = 4
	perSecond := cache.DefaultLabelQPS * float64(replicas)
	return b.p.ReadyTimeout + time.Duration(slack*float64(unlabelled)/perSecond*float64(time.Second))
}

// labelsMoves runs a graceful handoff (rolling restart under a writer) and
// a crash failover of phase 7's fleet size on b's objects; the failover
// comes last, since the killed replica's Lease outlives it.
func (b *bench) labelsMoves(ctx context.Context, kshard *system, res *labelsLayout) error {
	b.fleetArgs = labelsArgs
	defer func() { b.fleetArgs = nil }()
	n := b.p.ShardedReplicas
	progress("phase 10: graceful handoff, rolling restart of %d kshard replicas (gate-free sharded cache)", n)
	h, err := b.handoff(ctx, kshard, n)
	if err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	res.Handoff = &h
	progress("  rollout p99 %.3fs, max %.3fs over %d updates; %.0f label patches, %.0f objects listed", h.Rollout.P99Seconds, h.Rollout.MaxSeconds, h.Rollout.Updates, h.LabelPatches, h.ObjectsListed)
	progress("phase 10: crash failover (%d kshard replicas)", n)
	f, err := b.failover(ctx, kshard, n)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	res.Failover = &f
	progress("  %s killed; %s reconciled again after %.2fs", f.Killed, f.Key, f.Seconds)
	return nil
}

// firstStart starts p.ShardedReplicas kshard replicas over b's objects (all
// of them, total with those of other benches on the control plane) and
// measures until every object carries its partition label and the fleet is
// formed and idle.
func (b *bench) firstStart(ctx context.Context, kshard *system, total int) (firstStart, error) {
	fs := firstStart{Objects: total, Unlabelled: total - b.obs.labelledCount(), Replicas: b.p.ShardedReplicas}
	b.fleetArgs = append([]string{"--all-namespaces"}, labelsArgs...)
	defer func() { b.fleetArgs = nil }()
	before, err := b.apiserverMetrics(ctx)
	if err != nil {
		return fs, err
	}
	start := time.Now()
	f, err := b.startFleet(kshard, fmt.Sprintf("labels-first-%d", total), fs.Replicas, fleetSpec{})
	if err != nil {
		return fs, err
	}
	defer f.kill()
	lctx, cancel := context.WithTimeout(ctx, b.labellingTimeout(fs.Unlabelled, fs.Replicas))
	defer cancel()
	var labelled time.Time
	var labelErr, readyErr error
	var wg sync.WaitGroup
	wg.Go(func() { labelled, labelErr = b.obs.waitLabelled(lctx, total) })
	readyErr = f.waitReady(ctx, readiness{minReconciles: float64(total), quiet: true}, b.p.ReadyTimeout)
	if readyErr == nil {
		fs.FormedSeconds = time.Since(start).Seconds()
	} else {
		cancel()
	}
	wg.Wait()
	if readyErr != nil {
		return fs, readyErr
	}
	if labelErr != nil {
		return fs, labelErr
	}
	fs.LabelledSeconds = labelled.Sub(start).Seconds()
	after, err := b.apiserverMetrics(ctx)
	if err != nil {
		return fs, err
	}
	fs.APIRequests = sumRequests(after, nil) - sumRequests(before, nil)
	fs.Requests = map[string]float64{}
	for _, verb := range []string{"LIST", "WATCH", "GET", "PATCH"} {
		on := func(l map[string]string) bool { return l["resource"] == benchObjects.GVR.Resource && l["verb"] == verb }
		fs.Requests[verb] = sumRequests(after, on) - sumRequests(before, on)
	}
	c, err := f.counters(ctx)
	if err != nil {
		return fs, err
	}
	fs.LabelPatches, fs.ConfirmReads, fs.ObjectsListed = c["kshard_cache_label_patches_total"], c["kshard_cache_confirm_reads_total"], c["kshard_cache_listed_objects_total"]
	stats, err := f.stats()
	if err != nil {
		return fs, err
	}
	fs.PeakRSSMiB, fs.CPUSeconds = map[string]float64{}, map[string]float64{}
	for id, s := range stats {
		fs.PeakRSSMiB[id], fs.CPUSeconds[id] = mib(s.PeakRSS), s.CPUSeconds
		fs.MaxPeakRSSMiB = max(fs.MaxPeakRSSMiB, fs.PeakRSSMiB[id])
		fs.FleetCPU += s.CPUSeconds
	}
	for _, r := range f.live() {
		m, err := scrape(ctx, r.metricsAddr)
		if err != nil {
			return fs, err
		}
		if mode := kindMode(m, benchObjects); mode != cache.ModeLabels {
			return fs, fmt.Errorf("%s cached BenchObjects in mode %q, want %s", r.id, mode, cache.ModeLabels)
		}
	}
	fs.CacheMode = cache.ModeLabels
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return fs, nil
}

// labelsSummary is phase 10's headline, results.json's "sharded_gate_off":
// the gate-free sharded cache on custom resources against the
// controller-runtime leader. Ratios are medians of per-round ratios at
// Objects (kshard ÷ controller-runtime, the largest replica of each).
type labelsSummary struct {
	Objects int `json:"objects"`
	// RSSRatio: peak RSS, the objects spread over namespaces (goal ≤ 0.40,
	// aim 0.35); RSSRatioRollout: the new processes of kshard's rolling
	// restart; the SingleNamespace figures with every object in one
	// namespace.
	RSSRatio                       *float64 `json:"rss_ratio"`
	RSSRatioRollout                *float64 `json:"rss_ratio_rolling_restart"`
	RSSRatioSingleNamespace        *float64 `json:"rss_ratio_single_namespace"`
	RSSRatioSingleNamespaceRollout *float64 `json:"rss_ratio_single_namespace_rolling_restart"`
	// Steadier figures beside the peaks, which move with the collector's
	// timing: the Go heap live after a forced collection, and the RSS
	// once the fleet is idle after the pass.
	LiveHeapRatio                 *float64 `json:"live_heap_ratio"`
	LiveHeapRatioSingleNamespace  *float64 `json:"live_heap_ratio_single_namespace"`
	SteadyRSSRatio                *float64 `json:"steady_rss_ratio"`
	SteadyRSSRatioSingleNamespace *float64 `json:"steady_rss_ratio_single_namespace"`
	// FleetCPURatio: the whole fleets' CPU, start to the end of a pass
	// over every object (goal ≤ 1.2).
	FleetCPURatio                *float64 `json:"fleet_cpu_ratio"`
	FleetCPURatioSingleNamespace *float64 `json:"fleet_cpu_ratio_single_namespace"`
	// Phase 2's workloads on the custom resource: 4 kshard replicas'
	// latency-bound throughput ÷ the leader's (goal ≥ 3.6), the
	// write-bound rate ÷ the ceiling of BenchObject patches (goal ≥ 0.8)
	// and ÷ the leader's.
	ThroughputRatio4 *float64 `json:"throughput_ratio_4"`
	ratioGate
	CeilingFraction4 *float64 `json:"ceiling_fraction_4"`
	WriteBoundRatio4 *float64 `json:"write_bound_ratio_4"`
	// The write-bound rounds' operator CPU per object reconciled, median:
	// kshard's 4 replicas and the controller-runtime fleet (reported).
	WriteBoundCPUMsPerObject         *float64 `json:"write_bound_cpu_ms_per_object,omitempty"`
	WriteBoundCPUMsPerObjectBaseline *float64 `json:"write_bound_cpu_ms_per_object_baseline,omitempty"`
	// Graceful handoff p99 in a rolling restart under a writer, and crash
	// failover.
	HandoffP99Seconds *float64 `json:"handoff_p99_seconds"`
	FailoverSeconds   *float64 `json:"failover_seconds"`
	// WritesPerMove: partition labels written in kshard's rolling restarts
	// ÷ the objects they moved (each replica's objects move away at its
	// stop and back at its start; goal 0); ObjectsListedPerMove: objects
	// listed in them ÷ the same (1: only what moved).
	WritesPerMove        *float64 `json:"writes_per_move"`
	ObjectsListedPerMove *float64 `json:"objects_listed_per_move"`
	// LabelWritesPerObject: label patches of the first starts ÷ the
	// objects they found unlabelled (goal ≤ 1).
	LabelWritesPerObject *float64 `json:"label_writes_per_object"`
	// The first start over Objects unlabelled objects, spread over
	// namespaces: the largest replica's peak RSS ÷ the leader's (median
	// over the rounds; goal ≤ 0.6), start → every object labelled, and the
	// API requests until labelled and formed.
	FirstStartRSSRatio                *float64 `json:"first_start_rss_ratio"`
	FirstStartRSSRatioSingleNamespace *float64 `json:"first_start_rss_ratio_single_namespace"`
	FirstStartLabelledSeconds         *float64 `json:"first_start_labelled_seconds"`
	FirstStartAPIRequests             *float64 `json:"first_start_api_requests"`
}

// layoutFigures are one layout's medians at one object count: kshard's,
// and the adapter's in adapter (nil when it did not run).
type layoutFigures struct {
	rss, rollout, live, steady, cpu, firstStart *float64
	firstStartRun                               *firstStart
	adapter                                     *adapterLabels
}

// adapterLabels is the controller-runtime adapter's gate-free sharded cache
// against the controller-runtime leader in phase 10 (results.json's
// "adapter"."sharded_gate_off"): medians of per-round ratios at Objects,
// the largest replica of each; CPU is the whole fleets'.
type adapterLabels struct {
	Objects                      int      `json:"objects"`
	RSSRatio                     *float64 `json:"rss_ratio"`
	RSSRatioSingleNamespace      *float64 `json:"rss_ratio_single_namespace"`
	LiveHeapRatio                *float64 `json:"live_heap_ratio"`
	LiveHeapRatioSingleNamespace *float64 `json:"live_heap_ratio_single_namespace"`
	SteadyRSSRatio               *float64 `json:"steady_rss_ratio"`
	FleetCPURatio                *float64 `json:"fleet_cpu_ratio"`
	FleetCPURatioSingleNamespace *float64 `json:"fleet_cpu_ratio_single_namespace"`
}

// figures computes l's medians of per-round ratios at n objects, and its
// first start's peak against the leader's median peak.
func (l *labelsLayout) figures(n int) layoutFigures {
	rounds := map[int]map[string]*shardedResult{}
	for i := range l.Runs {
		r := &l.Runs[i]
		if r.Objects != n {
			continue
		}
		if rounds[r.Round] == nil {
			rounds[r.Round] = map[string]*shardedResult{}
		}
		rounds[r.Round][r.System] = r
	}
	type ratios struct{ rss, rollout, live, steady, cpu []float64 }
	var leader []float64
	bySystem := map[string]*ratios{nativeName: {}, adapterName: {}}
	add := func(v *[]float64, a, b float64) {
		if q := ratio(a, b); q != nil {
			*v = append(*v, *q)
		}
	}
	for _, m := range rounds {
		cr := m[baselineName]
		if cr == nil || cr.MaxPeakRSSMiB == 0 {
			// A leader run cut off before its figures were read (the
			// run's deadline, an interrupt) measured nothing.
			continue
		}
		leader = append(leader, cr.MaxPeakRSSMiB)
		for name, q := range bySystem {
			if sys := m[name]; sys != nil {
				add(&q.rss, sys.MaxPeakRSSMiB, cr.MaxPeakRSSMiB)
				add(&q.rollout, sys.RolloutMaxPeakRSSMiB, cr.MaxPeakRSSMiB)
				add(&q.live, sys.MaxLiveHeapMiB, cr.MaxLiveHeapMiB)
				add(&q.steady, sys.MaxSteadyRSSMiB, cr.MaxSteadyRSSMiB)
				add(&q.cpu, sys.FleetCPU, cr.FleetCPU)
			}
		}
	}
	ks := bySystem[nativeName]
	f := layoutFigures{rss: medianPtr(ks.rss), rollout: medianPtr(ks.rollout), live: medianPtr(ks.live), steady: medianPtr(ks.steady), cpu: medianPtr(ks.cpu)}
	if ad := bySystem[adapterName]; len(ad.rss) > 0 {
		f.adapter = &adapterLabels{Objects: n, RSSRatio: medianPtr(ad.rss), LiveHeapRatio: medianPtr(ad.live), SteadyRSSRatio: medianPtr(ad.steady), FleetCPURatio: medianPtr(ad.cpu)}
	}
	for i := range l.FirstStarts {
		if fs := &l.FirstStarts[i]; fs.Count == n {
			f.firstStartRun = fs
			if len(leader) > 0 {
				f.firstStart = ratio(fs.MaxPeakRSSMiB, median(leader))
			}
		}
	}
	return f
}

// summariseAdapterLabels is the adapter's figures of phase 10 at its
// largest object count (nil when it did not run): the spread layout's, with
// the single namespace's beside them.
func summariseAdapterLabels(lr *labelsResults) *adapterLabels {
	if lr == nil {
		return nil
	}
	var out *adapterLabels
	for i := range lr.Layouts {
		l := &lr.Layouts[i]
		counts := l.counts()
		if len(counts) == 0 {
			continue
		}
		ad := l.figures(counts[len(counts)-1]).adapter
		if ad == nil {
			continue
		}
		if out == nil {
			out = &adapterLabels{}
		}
		out.Objects = max(out.Objects, ad.Objects)
		if l.Layout == layoutSingle {
			out.RSSRatioSingleNamespace, out.LiveHeapRatioSingleNamespace, out.FleetCPURatioSingleNamespace = ad.RSSRatio, ad.LiveHeapRatio, ad.FleetCPURatio
		} else {
			out.RSSRatio, out.LiveHeapRatio, out.SteadyRSSRatio, out.FleetCPURatio = ad.RSSRatio, ad.LiveHeapRatio, ad.SteadyRSSRatio, ad.FleetCPURatio
		}
	}
	return out
}

// roundsRun says how many rounds each layout completed (kshard's figures
// read), "3 spread, 1 single namespace": a layout may come from another
// run than the rest, or from one cut short.
func (lr *labelsResults) roundsRun() string {
	var out []string
	for _, l := range lr.Layouts {
		n := 0
		for _, r := range l.Runs {
			if r.System == nativeName && r.MaxPeakRSSMiB > 0 {
				n = max(n, r.Round)
			}
		}
		out = append(out, fmt.Sprintf("%d %s", n, l.Layout))
	}
	return strings.Join(out, ", ")
}

// counts are the object counts of l's runs, rising.
func (l *labelsLayout) counts() []int {
	var out []int
	for _, r := range l.Runs {
		if len(out) == 0 || r.Objects > out[len(out)-1] {
			out = append(out, r.Objects)
		}
	}
	return out
}

// summariseLabels fills phase 10's headline (nil when it did not run) and
// the throughput sets' per-configuration medians.
func summariseLabels(lr *labelsResults) *labelsSummary {
	if lr == nil || len(lr.Layouts) == 0 {
		return nil
	}
	s := &labelsSummary{}
	var patches, unlabelled, movePatches, moveListed, moved float64
	for i := range lr.Layouts {
		l := &lr.Layouts[i]
		counts := l.counts()
		if len(counts) > 0 {
			n := counts[len(counts)-1]
			s.Objects = max(s.Objects, n)
			f := l.figures(n)
			if l.Layout == layoutSingle {
				s.RSSRatioSingleNamespace, s.RSSRatioSingleNamespaceRollout = f.rss, f.rollout
				s.LiveHeapRatioSingleNamespace, s.SteadyRSSRatioSingleNamespace, s.FleetCPURatioSingleNamespace = f.live, f.steady, f.cpu
				s.FirstStartRSSRatioSingleNamespace = f.firstStart
			} else {
				s.RSSRatio, s.RSSRatioRollout, s.LiveHeapRatio, s.SteadyRSSRatio, s.FleetCPURatio = f.rss, f.rollout, f.live, f.steady, f.cpu
				s.FirstStartRSSRatio = f.firstStart
				if fs := f.firstStartRun; fs != nil {
					s.FirstStartLabelledSeconds, s.FirstStartAPIRequests = ptr(fs.LabelledSeconds), ptr(fs.APIRequests)
				}
			}
		}
		for _, fs := range l.FirstStarts {
			patches += fs.LabelPatches
			unlabelled += float64(fs.Unlabelled)
		}
		for _, r := range l.Runs {
			if r.System == nativeName && r.RolloutMaxPeakRSSMiB > 0 {
				movePatches += r.RolloutLabelPatches
				moveListed += r.RolloutObjectsListed
				// Every cached object moves away from its replica and back;
				// with kept places, once: to its replica's next process.
				moves := 2.0
				if r.RolloutKeptPlaces {
					moves = 1
				}
				for _, c := range r.CachedObjects {
					moved += moves * c
				}
			}
		}
		summariseSet(&l.Throughput, ceilingsByRound(l.Ceiling))
		summariseSet(&l.WriteBound, ceilingsByRound(l.Ceiling))
		if c := l.Throughput.config(nativeName, 4); c != nil {
			s.ThroughputRatio4, s.ratioGate = gateRatio(c.Ratio, l.Throughput.Samples, nativeName, nil)
		}
		if c := l.WriteBound.config(nativeName, 4); c != nil {
			s.CeilingFraction4, s.WriteBoundRatio4, s.WriteBoundCPUMsPerObject = c.CeilingFraction, c.Ratio, c.CPUMsPerObject
		}
		if c := l.WriteBound.config(baselineName, 0); c != nil {
			s.WriteBoundCPUMsPerObjectBaseline = c.CPUMsPerObject
		}
		if h := l.Handoff; h != nil && h.Rollout.Updates > 0 {
			s.HandoffP99Seconds = ptr(h.Rollout.P99Seconds)
		}
		if f := l.Failover; f != nil && f.Seconds > 0 {
			s.FailoverSeconds = ptr(f.Seconds)
		}
	}
	if moved > 0 {
		s.WritesPerMove, s.ObjectsListedPerMove = ptr(movePatches/moved), ptr(moveListed/moved)
	}
	if unlabelled > 0 {
		s.LabelWritesPerObject = ptr(patches / unlabelled)
	}
	return s
}
