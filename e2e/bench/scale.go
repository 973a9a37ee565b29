package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kshard/kshard/internal/recorder"
)

// Phase 9 (never in a default or -quick run: `-phases 9`, make bench-scale)
// measures the scale envelope: kshard fleets of p.ScaleReplicas replicas
// with p.ScalePartitions partitions on the sharded cache, over
// p.ScaleObjects objects spread over p.ScaleNamespaces namespaces, on a
// control plane of its own with the ShardedListAndWatch gate. Per (replicas,
// objects): start → formed, the Lease traffic at the API server and each
// replica's CPU and memory in an idle window, then a rolling restart of
// every replica one by one under a writer (handoff delays, activations
// against the ideal, fences, lost updates).

// scaleRun is one (replicas, objects) configuration of phase 9.
type scaleRun struct {
	Replicas   int `json:"replicas"`
	Objects    int `json:"objects"`
	Partitions int `json:"partitions"`
	// LeaseDurationSeconds is the configuration's LeaseDuration
	// (RenewDeadline 2/3 and RenewPeriod 1/5 of it).
	LeaseDurationSeconds float64 `json:"lease_duration_seconds"`
	// FormedSeconds: start of the first process → every replica active in
	// a ring of all, every partition active, every object's initial
	// reconcile done and the fleet idle.
	FormedSeconds float64 `json:"formed_seconds"`
	// Idle window: Lease writes and Lease watch events per second at the
	// API server (its own metrics), CPU cores and peak RSS per replica.
	IdleWindowSeconds      float64 `json:"idle_window_seconds"`
	LeaseWritesPerSec      float64 `json:"lease_writes_per_second"`
	LeaseWatchEventsPerSec float64 `json:"lease_watch_events_per_second"`
	IdleCPUCoresMax        float64 `json:"idle_cpu_cores_max"`
	IdleCPUCoresMedian     float64 `json:"idle_cpu_cores_median"`
	PeakRSSMiBMax          float64 `json:"peak_rss_mib_max"`
	PeakRSSMiBMedian       float64 `json:"peak_rss_mib_median"`
	// Rolling restart: every replica stopped gracefully and started again,
	// highest identity first, each step waiting until the fleet is formed.
	RolloutSeconds float64    `json:"rollout_seconds"`
	StepSeconds    []float64  `json:"step_seconds"`
	Rollout        delayStats `json:"rollout"`
	// Activations counts partition activations over the rollout (every
	// process's kshard_handoff_seconds_count); IdealActivations is
	// 2 × Partitions: each replica's share moves away and back.
	Activations      float64 `json:"activations"`
	IdealActivations int     `json:"ideal_activations"`
	// CoordinatorStepSecondsMean: the fleet's mean coordinator step over
	// the rollout (kshard_coordinator_step_seconds, ring rebuilds included).
	CoordinatorStepSecondsMean float64 `json:"coordinator_step_seconds_mean"`
	Fences                     float64 `json:"fences"`
	Lost                       int     `json:"lost"`
	// Reconciles, Overlaps and PartitionOverlaps are the recorder's check
	// of the whole configuration (every process records its reconciles'
	// intervals and its partitions' activations and revokes): reconciles
	// of one key by two processes at once, and partitions active in two
	// processes at once.
	Reconciles        int `json:"reconciles"`
	Overlaps          int `json:"overlaps"`
	PartitionOverlaps int `json:"partition_overlaps"`
	// Failed says why the configuration did not complete (Fences then
	// counts the fences until it was given up).
	Failed string `json:"failed,omitempty"`
}

// scaleResults is phase 9: results.json's "scale", its headline figures
// (summarise fills them) beside a row per configuration.
type scaleResults struct {
	// MaxReplicas and MaxObjects: the largest configuration completed.
	MaxReplicas int `json:"max_replicas"`
	MaxObjects  int `json:"max_objects"`
	// FailedRuns counts configurations that did not complete.
	FailedRuns int     `json:"failed_runs"`
	Lost       int     `json:"lost"`
	Fences     float64 `json:"fences"`
	// Overlaps counts reconciles of one key by two processes at once and
	// partitions active in two processes at once, over every run.
	Overlaps int `json:"overlaps"`
	// FormedSecondsRatio10k: kshard's start → formed ÷ controller-runtime's
	// at 10,000 objects, 2 replicas each started together (the pods of a
	// StatefulSet with podManagementPolicy Parallel, as deploy/ ships, or of
	// a Deployment), on this phase's control plane: medians of formedTrials
	// starts of each, alternating (single sub-second samples swing by
	// ±0.2 s on 2 shared cores).
	FormedSecondsRatio10k  *float64  `json:"formed_seconds_ratio_10k"`
	CRFormed10kSeconds     float64   `json:"controller_runtime_formed_10k_seconds,omitempty"`
	KshardFormed10kSeconds float64   `json:"kshard_formed_10k_seconds,omitempty"`
	CRFormed10kSamples     []float64 `json:"controller_runtime_formed_10k_samples,omitempty"`
	KshardFormed10kSamples []float64 `json:"kshard_formed_10k_samples,omitempty"`
	// Formed10kStaggered: the same, the second replica started once the
	// first serves its probes (about 50 ms later), so that the first
	// kshard replica forms the ring alone and starts listing everything.
	Formed10kStaggered *formedSamples `json:"formed_10k_staggered,omitempty"`
	Runs               []scaleRun     `json:"runs"`
}

// formedSamples are one way of starting's start → formed samples and
// their medians.
type formedSamples struct {
	Ratio         *float64  `json:"ratio"`
	CRSeconds     float64   `json:"controller_runtime_seconds"`
	KshardSeconds float64   `json:"kshard_seconds"`
	CR            []float64 `json:"controller_runtime_samples"`
	Kshard        []float64 `json:"kshard_samples"`
}

// add records one sample of sys.
func (f *formedSamples) add(sys *system, took float64) {
	if sys.kshard {
		f.Kshard = append(f.Kshard, took)
	} else {
		f.CR = append(f.CR, took)
	}
	f.CRSeconds, f.KshardSeconds = quantile(f.CR, 0.5), quantile(f.Kshard, 0.5)
	f.Ratio = ratio(f.KshardSeconds, f.CRSeconds)
}

// summarise fills the headline figures from the runs.
func (s *scaleResults) summarise() {
	s.MaxReplicas, s.MaxObjects, s.FailedRuns, s.Lost, s.Fences, s.Overlaps = 0, 0, 0, 0, 0, 0
	for _, r := range s.Runs {
		if r.Failed != "" {
			s.FailedRuns++
		} else {
			s.MaxReplicas = max(s.MaxReplicas, r.Replicas)
			s.MaxObjects = max(s.MaxObjects, r.Objects)
		}
		s.Lost += r.Lost
		s.Fences += r.Fences
		s.Overlaps += r.Overlaps + r.PartitionOverlaps
	}
	s.FormedSecondsRatio10k = ratio(s.KshardFormed10kSeconds, s.CRFormed10kSeconds)
}

// scalePhase runs phase 9.
func (b *bench) scalePhase(ctx context.Context, kshard, baseline *system) (*scaleResults, error) {
	out := &scaleResults{}
	sb, stop, err := b.shardedBench(ctx, true, b.p.ScaleNamespaces)
	if err != nil {
		return out, err
	}
	defer stop()
	sb.obs = newObserver()
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone, err := sb.obs.run(obsCtx, sb.cp.Config(), sb.objs.kind, "")
	defer func() { stopObs(); <-obsDone }()
	if err != nil {
		return out, err
	}
	for _, n := range b.p.ScaleObjects {
		progress("phase 9: %d objects over %d namespaces", n, sb.spread)
		if err := sb.ensureObjects(ctx, n); err != nil {
			return out, err
		}
		if err := sb.obs.wait(ctx, func() bool { return len(sb.obs.objs) >= n }); err != nil {
			return out, err
		}
		if n == 10000 {
			if err := sb.scaleFormed10k(ctx, kshard, baseline, out); err != nil {
				return out, err
			}
		}
		for _, replicas := range b.p.ScaleReplicas {
			r, err := sb.scaleRun(ctx, kshard, replicas, n)
			if err != nil {
				r.Failed = err.Error()
			}
			out.Runs = append(out.Runs, r)
			if err != nil {
				return out, fmt.Errorf("%d replicas, %d objects: %w", replicas, n, err)
			}
		}
	}
	return out, nil
}

// formedTrials is how many times scaleFormed10k starts each system each
// way.
const formedTrials = 11

// scaleFormed10k times start → formed at 10,000 objects for 2 replicas of
// each system, the comparison issue 16 asks for: formedTrials starts of
// each, alternating, started together and staggered, and their medians.
func (b *bench) scaleFormed10k(ctx context.Context, kshard, baseline *system, out *scaleResults) error {
	defer func() { b.fleetArgs = nil }()
	var together formedSamples
	out.Formed10kStaggered = &formedSamples{}
	for range formedTrials {
		for _, staggered := range []bool{false, true} {
			for _, sys := range []*system{baseline, kshard} {
				took, err := b.formedOnce(ctx, sys, staggered)
				if err != nil {
					return err
				}
				how := "together"
				if staggered {
					how = "staggered"
					out.Formed10kStaggered.add(sys, took)
				} else {
					together.add(sys, took)
				}
				progress("  %s: 2 replicas started %s formed in %.2fs at 10,000 objects", sys.name, how, took)
			}
		}
	}
	out.CRFormed10kSamples, out.KshardFormed10kSamples = together.CR, together.Kshard
	out.CRFormed10kSeconds, out.KshardFormed10kSeconds = together.CRSeconds, together.KshardSeconds
	return nil
}

// formedPoll is how often formedOnce polls the replicas: formation at
// 10,000 objects takes about half a second, which the default 100ms would
// round up by as much as a fifth of it.
const formedPoll = 10 * time.Millisecond

// formedOnce starts 2 replicas of sys, together or one after the other,
// and returns how long they took to form, then stops them.
func (b *bench) formedOnce(ctx context.Context, sys *system, staggered bool) (float64, error) {
	b.fleetArgs = []string{"--all-namespaces"}
	if sys.kshard {
		b.fleetArgs = append(b.fleetArgs, "--partition-by=namespace", fmt.Sprintf("--partitions=%d", b.p.ScalePartitions))
	}
	start := time.Now()
	var f *fleet
	var err error
	if staggered {
		f, err = b.startFleet(sys, "scale-formed", 2, fleetSpec{})
	} else {
		f, err = b.startFleetTogether(sys, "scale-formed", 2)
	}
	if err != nil {
		return 0, err
	}
	f.partitions = b.p.ScalePartitions
	err = f.waitReady(ctx, readiness{minReconciles: float64(len(b.gens)), leaderWarm: float64(len(b.gens)), quiet: true, poll: formedPoll}, b.p.ReadyTimeout)
	took := time.Since(start).Seconds()
	if err != nil {
		f.kill()
		return 0, fmt.Errorf("%s formed at 10,000 objects: %w", sys.name, err)
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return took, nil
}

// scaleLeaseDuration is the LeaseDuration docs/configuration.md recommends
// for n replicas over objects objects ("Sizing a fleet"): the default
// 10 s, and 20 s once 48 or more replicas each list 1,500 objects or more at
// once when the fleet forms, whose LIST wave on a small control plane
// outlasts a 10 s Lease's renew timeout (64 × 100,000 did not form at 10 s).
func scaleLeaseDuration(n, objects int) time.Duration {
	if n >= 48 && objects >= 1500*n {
		return 20 * time.Second
	}
	return 10 * time.Second
}

// scaleRun measures one configuration.
func (b *bench) scaleRun(ctx context.Context, kshard *system, n, objects int) (scaleRun, error) {
	res := scaleRun{Replicas: n, Objects: objects, Partitions: b.p.ScalePartitions, IdealActivations: 2 * b.p.ScalePartitions}
	if !b.p.ScaleLeaseFixed {
		saved := b.p
		ld := scaleLeaseDuration(n, objects)
		b.p.LeaseDuration, b.p.RenewDeadline, b.p.RenewPeriod = ld, ld*2/3, ld/5
		defer func() {
			b.p.LeaseDuration, b.p.RenewDeadline, b.p.RenewPeriod = saved.LeaseDuration, saved.RenewDeadline, saved.RenewPeriod
		}()
	}
	res.LeaseDurationSeconds = b.p.LeaseDuration.Seconds()
	name := fmt.Sprintf("scale-%d-%d", n, objects)
	recordDir := filepath.Join(b.dir, "record", name)
	if err := os.MkdirAll(recordDir, 0o755); err != nil {
		return res, err
	}
	b.fleetArgs = []string{"--all-namespaces", "--partition-by=namespace", fmt.Sprintf("--partitions=%d", b.p.ScalePartitions), "--record-dir=" + recordDir}
	defer func() { b.fleetArgs = nil }()
	progress("phase 9: %d replicas, %d objects, %d partitions, LeaseDuration %s", n, objects, b.p.ScalePartitions, b.p.LeaseDuration)
	start := time.Now()
	f, err := b.startFleet(kshard, name, n, fleetSpec{})
	if err != nil {
		return res, err
	}
	defer f.kill()
	f.partitions = b.p.ScalePartitions
	if err := f.waitReady(ctx, readiness{minReconciles: float64(len(b.gens)), quiet: true}, b.p.ReadyTimeout); err != nil {
		if c, cerr := f.counters(ctx); cerr == nil {
			res.Fences = c["kshard_fences_total"]
		}
		return res, fmt.Errorf("not formed (%.0f fences so far): %w", res.Fences, err)
	}
	res.FormedSeconds = time.Since(start).Seconds()
	progress("  formed in %.1fs", res.FormedSeconds)

	if err := b.scaleIdle(ctx, f, &res); err != nil {
		return res, err
	}
	progress("  idle: %.1f Lease writes/s, %.0f Lease watch events/s; CPU per replica max %.3f cores; peak RSS max %.0f MiB", res.LeaseWritesPerSec, res.LeaseWatchEventsPerSec, res.IdleCPUCoresMax, res.PeakRSSMiBMax)

	if err := b.scaleRollout(ctx, f, &res); err != nil {
		return res, err
	}
	progress("  rolled %d replicas in %.0fs: handoff p99 %.3fs, %.0f activations (ideal %d), %.0f fences, %d lost", n, res.RolloutSeconds, res.Rollout.P99Seconds, res.Activations, res.IdealActivations, res.Fences, res.Lost)
	if err := f.stopAll(); err != nil {
		// A replica killed at its stop timeout leaves its windows open:
		// the check below then errs towards reporting overlaps.
		b.warn("%s: %v", f.name, err)
	}
	rep, err := recorder.Check(recordDir)
	if err != nil {
		return res, fmt.Errorf("checking the records: %w", err)
	}
	res.Reconciles, res.Overlaps, res.PartitionOverlaps = rep.Intervals, len(rep.Overlaps)+len(rep.SelfOverlaps), len(rep.PartitionOverlaps)
	progress("  recorder: %d reconciles, %d overlapping, %d partitions active twice at once", res.Reconciles, res.Overlaps, res.PartitionOverlaps)
	for i, o := range rep.Overlaps {
		if i == 3 {
			break
		}
		b.warn("%s: overlap: %s", f.name, o)
	}
	for i, o := range rep.PartitionOverlaps {
		if i == 3 {
			break
		}
		b.warn("%s: partition overlap: %s", f.name, o)
	}
	return res, nil
}

// scaleIdle measures an idle window of p.SteadyWindow.
func (b *bench) scaleIdle(ctx context.Context, f *fleet, res *scaleRun) error {
	before, err := b.apiserverMetrics(ctx)
	if err != nil {
		return err
	}
	stats0, err := f.stats()
	if err != nil {
		return err
	}
	winStart := time.Now()
	if err := sleep(ctx, b.p.SteadyWindow); err != nil {
		return err
	}
	after, err := b.apiserverMetrics(ctx)
	if err != nil {
		return err
	}
	stats1, err := f.stats()
	if err != nil {
		return err
	}
	win := time.Since(winStart).Seconds()
	res.IdleWindowSeconds = win
	isLeaseWrite := func(l map[string]string) bool {
		return l["resource"] == "leases" && l["verb"] != "GET" && l["verb"] != "LIST" && l["verb"] != "WATCH"
	}
	res.LeaseWritesPerSec = (sumRequests(after, isLeaseWrite) - sumRequests(before, isLeaseWrite)) / win
	isLease := map[string]string{"resource": "leases"}
	res.LeaseWatchEventsPerSec = (after.sum("apiserver_watch_events_total", isLease) - before.sum("apiserver_watch_events_total", isLease)) / win
	var cpu, rss []float64
	for id, s1 := range stats1 {
		cpu = append(cpu, (s1.CPUSeconds-stats0[id].CPUSeconds)/win)
		rss = append(rss, float64(s1.PeakRSS)/(1<<20))
	}
	res.IdleCPUCoresMax, res.IdleCPUCoresMedian = maxMedian(cpu)
	res.PeakRSSMiBMax, res.PeakRSSMiBMedian = maxMedian(rss)
	return nil
}

// scaleRollout restarts every replica one by one under the writer.
func (b *bench) scaleRollout(ctx context.Context, f *fleet, res *scaleRun) error {
	before, err := f.counters(ctx)
	if err != nil {
		return err
	}
	b.obs.takeDelays()
	stop := make(chan struct{})
	var writerErr error
	done := make(chan struct{})
	go func() { defer close(done); writerErr = b.writer(ctx, stop, b.p.WriterRate) }()
	stopWriter := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	defer stopWriter()
	rollStart := time.Now()
	for i := len(f.ids) - 1; i >= 0; i-- {
		stepStart := time.Now()
		if _, err := f.restart(ctx, f.ids[i]); err != nil {
			return fmt.Errorf("restarting %s: %w", f.ids[i], err)
		}
		res.StepSeconds = append(res.StepSeconds, time.Since(stepStart).Seconds())
	}
	rollEnd := time.Now()
	res.RolloutSeconds = rollEnd.Sub(rollStart).Seconds()
	stopWriter()
	if writerErr != nil {
		return fmt.Errorf("writer: %w", writerErr)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*b.p.LeaseDuration+30*time.Second)
	defer cancel()
	if err := b.obs.waitNoPending(pctx); err != nil {
		res.Lost = b.obs.pendingCount()
		return err
	}
	var roll []delay
	for _, d := range b.obs.takeDelays() {
		if !d.sent.Before(rollStart) && d.sent.Before(rollEnd) {
			roll = append(roll, d)
		}
	}
	res.Rollout = summarise(roll)
	after, err := f.counters(ctx)
	if err != nil {
		return err
	}
	delta := func(name string) float64 { return after[name] - before[name] }
	res.Activations = delta("kshard_handoff_seconds_count")
	res.Fences = delta("kshard_fences_total")
	if steps := delta("kshard_coordinator_step_seconds_count"); steps > 0 {
		res.CoordinatorStepSecondsMean = delta("kshard_coordinator_step_seconds_sum") / steps
	}
	return nil
}

// maxMedian returns the largest and the median of v (0, 0 when empty).
func maxMedian(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)-1], s[len(s)/2]
}
