package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ceilingResult is the API server's write rate from a plain client-go loop.
type ceilingResult struct {
	Round        int     `json:"round"`
	Goroutines   int     `json:"goroutines"`
	Writes       int64   `json:"writes"`
	Seconds      float64 `json:"seconds"`
	WritesPerSec float64 `json:"writes_per_second"`
}

// measureCeiling patches the objects' annotations from g goroutines for d.
func (b *bench) measureCeiling(ctx context.Context, g int, d time.Duration) (ceilingResult, error) {
	cfg := b.cp.Config()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: measure the server
	objs, err := newObjectClient(cfg, b.objs.kind)
	if err != nil {
		return ceilingResult{}, err
	}
	var writes atomic.Int64
	var next atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, g)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range g {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				n := next.Add(1)
				i := int(n) % len(b.gens)
				patch := []byte(`{"metadata":{"annotations":{"bench.kshard.io/ceiling":"` + strconv.FormatInt(n, 10) + `"}}}`)
				if err := objs.patch(ctx, b.objectNamespace(i), objectName(i), patch); err != nil {
					errs <- err
					cancel()
					return
				}
				writes.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return ceilingResult{}, fmt.Errorf("ceiling loop: %w", err)
	default:
	}
	w := writes.Load()
	return ceilingResult{Goroutines: g, Writes: w, Seconds: el, WritesPerSec: float64(w) / el}, nil
}

// throughputResult is one system's time to converge every object after a
// new epoch.
type throughputResult struct {
	Round          int     `json:"round"`
	System         string  `json:"system"`
	Replicas       int     `json:"replicas"`
	ActiveReplicas int     `json:"active_replicas"`
	LatencyMS      float64 `json:"latency_ms"`
	Objects        int     `json:"objects"`
	Seconds        float64 `json:"seconds"`
	ObjectsPerSec  float64 `json:"objects_per_second"`
	StartupSeconds float64 `json:"startup_seconds"`
	// Passes: new epochs written back to back, each awaited, in Seconds (a
	// write-bound run repeats them for p.WriteBoundMin; before that was
	// recorded, 0: one pass). ObjectsPerSec is Objects × Passes ÷ Seconds.
	Passes int `json:"passes,omitempty"`
	// Workers per replica (params.ThroughputWorkers in a latency-bound
	// run, params.Workers in a write-bound one); 0 in files from before it
	// was recorded (then params.Workers, 4).
	Workers int `json:"workers,omitempty"`
	// Epochs is phase 8's epoch layout: "one epoch" or "epoch per namespace".
	Epochs string `json:"epochs,omitempty"`
	// Shares: each replica's objects and when its last one was seen, from
	// the last pass's epoch write (the largest share bounds a latency-bound run).
	Shares []replicaShare `json:"shares,omitempty"`
	// BusiestShare is the largest share's objects, and SpreadCap the most
	// this fleet's ratio to one replica can be when a round lasts as long
	// as its busiest replica's share: Objects ÷ BusiestShare (the keys'
	// spread over the replicas; 4 replicas ideally 4). Both 0 in files from
	// before they were recorded: spreadCap derives the cap from Shares.
	BusiestShare int     `json:"busiest_share,omitempty"`
	SpreadCap    float64 `json:"spread_cap,omitempty"`
	// MachineBusy is the share of the machine's CPU time (every core) that
	// was busy from the epoch write until convergence, every busy column
	// of /proc/stat. Near 1, the run was bound by the CPU the API server,
	// etcd, the harness, the operators and anything else on the machine
	// share, not by the simulated latency. BackgroundBusy is the part of
	// it that was user time at a positive nice value: niced work does not
	// yield the CPU to the benchmark here (with the kernel's autogroups a
	// process niced in another session competes as a group of its own; a
	// run beside nice -n 19 builds measured 58 % background and every
	// kshard replica a third slower), so it counts. MachineBusyAll is
	// MachineBusy (runs of 5aeb9a8 recorded MachineBusy without the niced
	// part and MachineBusyAll with it; busy reads either). FleetCPUSeconds
	// is the operators' own CPU time in that window. All 0 when not
	// measured.
	MachineBusy     float64 `json:"machine_busy,omitempty"`
	MachineBusyAll  float64 `json:"machine_busy_all,omitempty"`
	BackgroundBusy  float64 `json:"background_busy,omitempty"`
	FleetCPUSeconds float64 `json:"fleet_cpu_seconds,omitempty"`
}

// spreadCap is the run's SpreadCap, derived from its shares in files from
// before it was recorded; 0 when neither is known.
func (t throughputResult) spreadCap() float64 {
	if t.SpreadCap > 0 {
		return t.SpreadCap
	}
	busiest := 0
	for _, s := range t.Shares {
		busiest = max(busiest, s.Objects)
	}
	if busiest == 0 || t.Objects == 0 {
		return 0
	}
	return float64(t.Objects) / float64(busiest)
}

// cpuMeasured reports whether the run recorded the machine's and the
// operators' CPU (runs before ce05270 did not).
func (t throughputResult) cpuMeasured() bool { return t.MachineBusy > 0 && t.Objects > 0 }

// busy is the share of the machine busy over the run, niced background
// included, from files of either recording (MachineBusy).
func (t throughputResult) busy() float64 { return max(t.MachineBusy, t.MachineBusyAll) }

// cpuMsPerObject is the operators' CPU time per object reconciled (every
// pass's), in milliseconds.
func (t throughputResult) cpuMsPerObject() float64 {
	return 1000 * t.FleetCPUSeconds / float64(t.Objects*max(t.Passes, 1))
}

// logProgress prints the run's rate, and how busy the machine was when
// that was measured.
func (t throughputResult) logProgress() {
	busy := ""
	if t.cpuMeasured() {
		busy = fmt.Sprintf("; machine CPU %.0f%% busy, operators %.2f ms CPU per object", 100*t.busy(), t.cpuMsPerObject())
	}
	if t.ActiveReplicas > 1 && t.BusiestShare > 0 {
		busy += fmt.Sprintf("; busiest replica %d of %d objects, a cap of %.2f× by the keys' spread", t.BusiestShare, t.Objects, t.SpreadCap)
	}
	progress("  converged in %.2fs: %.0f objects/s (startup %.1fs%s)", t.Seconds, t.ObjectsPerSec, t.StartupSeconds, busy)
}

// throughput measures sys with n replicas converging every object after a
// new epoch. A write-bound run (no latency) repeats new epochs back to
// back, each awaited, until p.WriteBoundMin has passed (one pass when it is
// 0, as in quick runs): a single pass of a few seconds was noise.
func (b *bench) throughput(ctx context.Context, sys *system, n int, latency time.Duration, scenario string) (throughputResult, error) {
	var minWindow time.Duration
	if latency == 0 {
		minWindow = b.p.WriteBoundMin
	}
	return b.throughputFor(ctx, sys, n, latency, scenario, minWindow)
}

// throughputFor is throughput with passes repeated until minWindow has
// passed since the first epoch write (at least one). The rate is every
// object reconciled ÷ the whole window; the machine's and the fleet's CPU
// are over the whole window too. A latency-bound run has
// params.ThroughputWorkers workers per replica, a write-bound one
// params.Workers.
func (b *bench) throughputFor(ctx context.Context, sys *system, n int, latency time.Duration, scenario string, minWindow time.Duration) (throughputResult, error) {
	workers := b.p.Workers
	if latency > 0 {
		workers = b.p.throughputWorkers()
	}
	res := throughputResult{System: sys.name, Replicas: n, ActiveReplicas: n, LatencyMS: float64(latency) / float64(time.Millisecond), Objects: len(b.gens), Workers: workers}
	if !sys.kshard {
		res.ActiveReplicas = 1
	}
	start := time.Now()
	f, err := b.startSettled(ctx, sys, scenario, n, fleetSpec{latency: latency, workers: workers})
	if err != nil {
		return res, err
	}
	defer f.kill()
	res.StartupSeconds = time.Since(start).Seconds()
	cpu0, cpuErr := sampleCPU(f)
	var first time.Time
	var epoch int
	var sent, at time.Time
	for res.Passes == 0 || at.Sub(first) < minWindow {
		if epoch, sent, err = b.bumpEpoch(ctx); err != nil {
			return res, err
		}
		if res.Passes == 0 {
			first = sent
			progress("    epoch written in %.2fs", time.Since(sent).Seconds())
		}
		// Generous bound: ten times the ideal time of one active replica.
		ideal := time.Duration(len(b.gens)) * (latency + 2*time.Millisecond) / time.Duration(workers)
		wctx, cancel := context.WithTimeout(ctx, 10*ideal+2*time.Minute)
		at, err = b.obs.waitEpoch(wctx, epoch, len(b.gens))
		cancel()
		if err != nil {
			return res, fmt.Errorf("%s with %d replicas, pass %d: %w", sys.name, n, res.Passes+1, err)
		}
		res.Passes++
	}
	res.Seconds = at.Sub(first).Seconds()
	res.ObjectsPerSec = float64(res.Passes*len(b.gens)) / res.Seconds
	// Sampled when the wait returns, a little after the last object was
	// seen: the window is the run's, to within the watch's delay.
	cpu1, err := sampleCPU(f)
	if err = errors.Join(cpuErr, err); err != nil {
		b.warn("%s: CPU during the run not measured: %v", f.name, err)
	} else if cpu1.total > cpu0.total {
		span := cpu1.total - cpu0.total
		res.BackgroundBusy = (cpu1.nice - cpu0.nice) / span
		res.MachineBusy = (cpu1.busy-cpu0.busy)/span + res.BackgroundBusy
		res.MachineBusyAll = res.MachineBusy
		res.FleetCPUSeconds = cpu1.fleet - cpu0.fleet
	}
	res.Shares = b.obs.shares(epoch, sent)
	if len(res.Shares) > 0 {
		res.BusiestShare = res.Shares[0].Objects // largest first
		res.SpreadCap = res.spreadCap()
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// delayStats summarise update→reconcile delays.
type delayStats struct {
	Updates    int     `json:"updates"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	// Percentiles are the delays at every whole percentile, the 1st to the
	// 100th (the max): the distribution e2e/bench/charts draws, at 1 %
	// resolution and in a size that does not grow with the run.
	Percentiles []float64 `json:"percentiles_seconds,omitempty"`
}

func summarise(ds []delay) delayStats {
	if len(ds) == 0 {
		return delayStats{}
	}
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = d.d.Seconds()
	}
	slices.Sort(v)
	q := func(p float64) float64 { return v[max(0, int(math.Ceil(p*float64(len(v))))-1)] }
	pct := make([]float64, 100)
	for i := range pct {
		pct[i] = q(float64(i+1) / 100)
	}
	return delayStats{Updates: len(v), P50Seconds: q(0.5), P99Seconds: q(0.99), MaxSeconds: v[len(v)-1], Percentiles: pct}
}

// handoffResult is the update→reconcile delay during a rolling restart.
type handoffResult struct {
	System       string      `json:"system"`
	Replicas     int         `json:"replicas"`
	Steady       delayStats  `json:"steady"`
	Rollout      delayStats  `json:"rollout"`
	StopSeconds  []float64   `json:"stop_seconds"` // SIGTERM → exit, per replica (drain + leave)
	RolloutTotal float64     `json:"rollout_seconds"`
	Windows      [][2]string `json:"-"`
	// ObjectsListed: objects kshard's processes listed during the rollout
	// (kshard_cache_listed_objects_total; phase 8); LabelPatches the
	// partition labels they wrote (kshard_cache_label_patches_total;
	// phase 10).
	ObjectsListed float64 `json:"objects_listed,omitempty"`
	LabelPatches  float64 `json:"label_patches,omitempty"`
}

// handoff runs a writer updating objects at a fixed rate while every
// replica is restarted in turn (highest identity first, as a StatefulSet
// rolls), and times each update until its reconcile is seen.
func (b *bench) handoff(ctx context.Context, sys *system, n int) (handoffResult, error) {
	res := handoffResult{System: sys.name, Replicas: n}
	f, err := b.startSettled(ctx, sys, "handoff", n, fleetSpec{latency: b.p.HandoffLatency})
	if err != nil {
		return res, err
	}
	defer f.kill()
	b.obs.takeDelays()
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopWriter := func() { stopOnce.Do(func() { close(stop) }) }
	var writerErr error
	var wg sync.WaitGroup
	wg.Go(func() { writerErr = b.writer(ctx, stop, b.p.WriterRate) })
	defer func() { stopWriter(); wg.Wait() }()

	if err := sleep(ctx, b.p.Settle); err != nil { // steady-state sample
		return res, err
	}
	before, err := f.counters(ctx)
	if err != nil {
		return res, err
	}
	rollStart := time.Now()
	for i := n - 1; i >= 0; i-- {
		took, err := f.restart(ctx, f.ids[i])
		res.StopSeconds = append(res.StopSeconds, took.Seconds())
		if err != nil {
			return res, err
		}
	}
	rollEnd := time.Now()
	res.RolloutTotal = rollEnd.Sub(rollStart).Seconds()
	after, err := f.counters(ctx)
	if err != nil {
		return res, err
	}
	res.ObjectsListed = after["kshard_cache_listed_objects_total"] - before["kshard_cache_listed_objects_total"]
	res.LabelPatches = after["kshard_cache_label_patches_total"] - before["kshard_cache_label_patches_total"]
	if err := sleep(ctx, b.p.Settle); err != nil {
		return res, err
	}
	stopWriter()
	wg.Wait()
	if writerErr != nil {
		return res, fmt.Errorf("writer: %w", writerErr)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*b.p.LeaseDuration+30*time.Second)
	defer cancel()
	if err := b.obs.waitNoPending(pctx); err != nil {
		return res, fmt.Errorf("%s handoff: %w (%s)", sys.name, err, f.partitionStates(ctx))
	}
	var steady, roll []delay
	for _, d := range b.obs.takeDelays() {
		switch {
		case d.sent.Before(rollStart):
			steady = append(steady, d)
		case d.sent.Before(rollEnd):
			roll = append(roll, d)
		}
	}
	res.Steady, res.Rollout = summarise(steady), summarise(roll)
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// writer bumps the generation of objects round-robin at rate per second
// until stop is closed. Writes use ctx, not stop: a write cut off in flight
// could be lost while the observer still waits for it.
func (b *bench) writer(ctx context.Context, stop <-chan struct{}, rate float64) error {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for i := 0; ; i = (i + 1) % len(b.gens) {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := b.bumpGen(ctx, i); err != nil {
			return err
		}
	}
}

// failoverResult is the time from SIGKILL of a key's owner to that key's
// next reconcile.
type failoverResult struct {
	System   string  `json:"system"`
	Replicas int     `json:"replicas"`
	Key      string  `json:"key"`
	Killed   string  `json:"killed"`
	Seconds  float64 `json:"seconds"`
}

func (b *bench) failover(ctx context.Context, sys *system, n int) (failoverResult, error) {
	res := failoverResult{System: sys.name, Replicas: n, Key: objectName(0)}
	f, err := b.startSettled(ctx, sys, "failover", n, fleetSpec{latency: b.p.HandoffLatency})
	if err != nil {
		return res, err
	}
	defer f.kill()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.bumpGen(wctx, 0); err != nil {
		return res, err
	}
	if err := b.obs.waitNoPending(wctx); err != nil {
		return res, err
	}
	b.obs.takeDelays()
	owner := b.obs.get(b.objectKey(0)).by
	r := f.replicas[owner]
	if r == nil {
		return res, fmt.Errorf("%s was reconciled by %q, not a replica of %s", res.Key, owner, f.name)
	}
	res.Killed = owner
	killed := time.Now()
	r.kill()
	if err := b.bumpGen(ctx, 0); err != nil {
		return res, err
	}
	fctx, cancel2 := context.WithTimeout(ctx, 3*b.p.LeaseDuration+30*time.Second)
	defer cancel2()
	if err := b.obs.waitNoPending(fctx); err != nil {
		return res, fmt.Errorf("%s failover: %w", sys.name, err)
	}
	ds := b.obs.takeDelays()
	if len(ds) != 1 {
		return res, fmt.Errorf("%s failover: %d delays recorded, want 1", sys.name, len(ds))
	}
	res.Seconds = ds[0].sent.Add(ds[0].d).Sub(killed).Seconds()
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// resourceResult is per-replica CPU and memory at many objects, and the
// API server load at steady state.
type resourceResult struct {
	System              string             `json:"system"`
	Replicas            int                `json:"replicas"`
	Objects             int                `json:"objects"`
	StartupSeconds      float64            `json:"startup_seconds"`
	PassSeconds         float64            `json:"pass_seconds"`
	CPUSeconds          map[string]float64 `json:"cpu_seconds"`
	SteadyCPUSeconds    map[string]float64 `json:"steady_cpu_seconds"`
	PeakRSSMiB          map[string]float64 `json:"peak_rss_mib"`
	HeapInUseMiB        map[string]float64 `json:"steady_heap_inuse_mib"`
	MaxPeakRSSMiB       float64            `json:"max_peak_rss_mib"`
	LeaseWritesPerMin   float64            `json:"lease_writes_per_minute"`
	APIRequestsPerMin   float64            `json:"api_requests_per_minute"`
	SteadyWindowSeconds float64            `json:"steady_window_seconds"`
}

// resources starts n replicas over all objects, runs one write-bound pass
// (no simulated latency), then measures a quiet steady state.
func (b *bench) resources(ctx context.Context, sys *system, n int) (resourceResult, error) {
	res := resourceResult{System: sys.name, Replicas: n, Objects: len(b.gens)}
	start := time.Now()
	f, err := b.startSettled(ctx, sys, "resources", n, fleetSpec{})
	if err != nil {
		return res, err
	}
	defer f.kill()
	res.StartupSeconds = time.Since(start).Seconds()
	epoch, sent, err := b.bumpEpoch(ctx)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	at, err := b.obs.waitEpoch(wctx, epoch, len(b.gens))
	if err != nil {
		return res, err
	}
	res.PassSeconds = at.Sub(sent).Seconds()
	if err := f.waitReady(ctx, readiness{quiet: true}, b.p.ReadyTimeout); err != nil {
		return res, err
	}
	before, err := b.apiserverMetrics(ctx)
	if err != nil {
		return res, err
	}
	stats0, err := f.stats()
	if err != nil {
		return res, err
	}
	winStart := time.Now()
	if err := sleep(ctx, b.p.SteadyWindow); err != nil {
		return res, err
	}
	after, err := b.apiserverMetrics(ctx)
	if err != nil {
		return res, err
	}
	win := time.Since(winStart)
	stats1, err := f.stats()
	if err != nil {
		return res, err
	}
	res.SteadyWindowSeconds = win.Seconds()
	perMin := 60 / win.Seconds()
	res.APIRequestsPerMin = (sumRequests(after, nil) - sumRequests(before, nil)) * perMin
	isLeaseWrite := func(l map[string]string) bool {
		return l["resource"] == "leases" && l["verb"] != "GET" && l["verb"] != "LIST" && l["verb"] != "WATCH"
	}
	res.LeaseWritesPerMin = (sumRequests(after, isLeaseWrite) - sumRequests(before, isLeaseWrite)) * perMin
	res.CPUSeconds, res.SteadyCPUSeconds, res.PeakRSSMiB, res.HeapInUseMiB = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, r := range f.live() {
		// Go heap in use after the window: what the replica keeps, as
		// opposed to the transient peaks that VmHWM records.
		if m, err := scrape(ctx, r.metricsAddr); err == nil {
			res.HeapInUseMiB[r.id] = m.sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)
		}
	}
	for id, s := range stats1 {
		res.CPUSeconds[id] = s.CPUSeconds
		res.SteadyCPUSeconds[id] = s.CPUSeconds - stats0[id].CPUSeconds
		res.PeakRSSMiB[id] = float64(s.PeakRSS) / (1 << 20)
		res.MaxPeakRSSMiB = max(res.MaxPeakRSSMiB, res.PeakRSSMiB[id])
	}
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// apiserverMetrics scrapes the API server's own /metrics.
func (b *bench) apiserverMetrics(ctx context.Context) (metrics, error) {
	raw, err := b.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's /metrics: %w", err)
	}
	return parseMetrics(bytesReader(raw))
}

// sumRequests adds apiserver_request_total over the series keep accepts
// (all when nil). Non-resource requests (such as /metrics itself) are left
// out.
func sumRequests(m metrics, keep func(map[string]string) bool) float64 {
	mf := m["apiserver_request_total"]
	if mf == nil {
		return 0
	}
	var total float64
	for _, s := range mf.GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["resource"] == "" || keep != nil && !keep(l) {
			continue
		}
		total += s.GetCounter().GetValue()
	}
	return total
}

// sleep waits d (a measurement window, not a synchronisation) or until ctx
// ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// startSettled starts a fleet as spec says and waits until it has
// reconciled every object and gone quiet; on failure it kills the fleet and
// returns the error.
func (b *bench) startSettled(ctx context.Context, sys *system, scenario string, n int, spec fleetSpec) (*fleet, error) {
	f, err := b.startFleet(sys, scenario, n, spec)
	if err != nil {
		return nil, err
	}
	if err := f.waitReady(ctx, readiness{minReconciles: float64(len(b.gens)), quiet: true}, b.p.ReadyTimeout); err != nil {
		f.kill()
		return nil, err
	}
	return f, nil
}
