package ring

import (
	"context"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/handoffsim"
	"github.com/kshard/kshard/shard"
)

var (
	coordSimSeeds = flag.Int("handoff.seeds", 10000, "number of seeds the simulation of the real coordinator runs")
	coordSimFirst = flag.Uint64("handoff.first", 0, "first seed of the run")
	coordSimSeed  = flag.Int64("handoff.seed", -1, "replay this one seed and print its trace")
	// coordSimCacheSeeds: TestCoordinatorSimulationPartitionCache's seeds.
	coordSimCacheSeeds = flag.Int("handoff.cacheseeds", 2000, "seeds the coordinator simulation with partition caches runs")
	// coordSimLabelSeeds: TestCoordinatorSimulationLabels' seeds.
	coordSimLabelSeeds = flag.Int("handoff.labelseeds", 500, "seeds the coordinator simulation with caches sharded by labels runs")
)

// simMetrics is one set of ring metrics shared by every simulated
// coordinator: they only write gauges and histograms, which nothing reads.
var simMetrics = sync.OnceValues(func() (*ringMetrics, error) { return newRingMetrics(prometheus.NewRegistry()) })

// simShell is the real coordinator as the shell of a simulated process: its
// membership and its one participant are the simulated world's, its clock
// is the process's, its prover reads the world's pods, and its drains,
// confirming reads, deletes and pod reads run as tasks the world schedules.
type simShell struct {
	c   *coordinator
	ctx context.Context
}

func newSimShell(p *handoffsim.Process) (handoffsim.Shell, error) {
	core, err := p.NewCore()
	if err != nil {
		return nil, err
	}
	core.SetPod(p.Pod()) // what setupProof does once it has read the own pod
	metrics, err := simMetrics()
	if err != nil {
		return nil, err
	}
	cfg := p.Config().WithDefaults()
	c := newCoordinatorWith(core, p, []Participant{simParticipant{p}}, metrics, logr.Discard(), cfg.Timing, p.Exit)
	c.now = p.Now
	c.goAsync = p.Go
	c.postFn = func(_ context.Context, f func()) { p.Post(f) }
	// Proofs of death: the prover reads the world's pods.
	c.prover = newProver(p, p.Config().Identity, logr.Discard())
	if p.PartitionCached() {
		// The world calls CacheChanged where run's watcher of Changed
		// would post partitionsSynced.
		c.cache = p
	}
	// Replays are owned by run in production; here, by the process, whose
	// context ends with it.
	_ = c.startReplays(p.Context())
	return &simShell{c: c, ctx: p.Context()}, nil
}

func (s *simShell) Core() *handoff.Core { return s.c.core }
func (s *simShell) CachesSynced()       { s.c.cachesSynced() }
func (s *simShell) Leave()              { s.c.beginLeave() }
func (s *simShell) CacheChanged()       { s.c.partitionsSynced(); s.c.step(s.ctx) }
func (s *simShell) Step()               { s.c.step(s.ctx) }

// simParticipant is the simulated controllers as a participant.
type simParticipant struct{ p *handoffsim.Process }

// The simulated controllers have no cache to replay: their activation is
// all admission, on the loop.
func (s simParticipant) Admit(ctx context.Context, set shard.PartitionSet) error {
	return s.p.Activate(ctx, set)
}

func (simParticipant) Replay(context.Context, shard.PartitionSet) error { return nil }

func (s simParticipant) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	return s.p.Revoke(ctx, set, fence)
}

var (
	_ memberLeases   = (*handoffsim.Process)(nil)
	_ podReader      = (*handoffsim.Process)(nil)
	_ PartitionCache = (*handoffsim.Process)(nil)
	// The simulated cache is told the active partitions, as cache.Cache
	// is, so that its labeller labels theirs.
	_ activeObserver = (*handoffsim.Process)(nil)
)

// TestCoordinatorSimulation runs the real coordinator, over the real core,
// in the deterministic simulation of internal/handoff's TestSimulation (crashes,
// restarts, pauses, partitions from the API server, stalled and lagging
// watches, failing and late-landing writes, third-party Lease edits,
// membership flapping, failed activations, pods force-deleted, crashed
// processes restarted in place whose death the kubelet reports, clocks at
// 1 ± up to 8 % and stale views of peers' Leases: handoffsim's defaults)
// and checks the same invariants
// at every step: never two at once, claims dropped only after drain, no
// claims voided while their holder runs anything, and every partition
// active on exactly one live member within the liveness bound once the
// faults stop. -handoff.seeds=N runs N seeds (from -handoff.first);
// -handoff.seed=S replays one with its trace.
func TestCoordinatorSimulation(t *testing.T) {
	opts := handoffsim.Options{Shell: newSimShell}
	if *coordSimSeed >= 0 {
		handoffsim.Replay(t, uint64(*coordSimSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*coordSimFirst, *coordSimSeeds, opts)
	t.Logf("coordinator simulation: seeds=%d steps=%d violations=%d in %v (faults injected include %d third-party Lease edits, %d pauses, %d clock-rate changes within ±%d ppm and %d stale views; %d graceful leaves)",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.Tampers, s.Pauses, s.ClockFaults, handoffsim.DefaultClockSkewPPM, s.StaleViews, s.Leaves)
	t.Logf("proofs of death the coordinators' cores held at the end: %d; pods force-deleted while (or before the kubelet reported that) their process ended: %d",
		s.Proven, s.ForceDeletes)
	if s.Seeds >= 1000 && s.Proven == 0 {
		t.Errorf("no coordinator was handed a proof of death in %d seeds: the prover did not run", s.Seeds)
	}
	// The coordinator's JoinScanClean, Finalize and DeletePeer paths must
	// run, not only the core's.
	handoffsim.CheckFinalizerPaths(t, s)
	handoffsim.ReportFailed(t, s, opts, "go test ./shard/ring -run TestCoordinatorSimulation -handoff.seed=%d -v")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The coordinator's tasks run on goroutines, but the world runs one at a
// time in an order the seed decides: a seed replays exactly, trace and all.
func TestCoordinatorSimulationReplaysExactly(t *testing.T) {
	opts := handoffsim.Options{Shell: newSimShell, Trace: true}
	for _, seed := range []uint64{1, 2, 3} {
		a, b := handoffsim.Run(seed, opts), handoffsim.Run(seed, opts)
		if a.Trace != b.Trace || a.Steps != b.Steps {
			t.Fatalf("seed %d ran differently twice (%d and %d steps)", seed, a.Steps, b.Steps)
		}
		if a.Violation != "" {
			t.Fatalf("seed %d: %s", seed, a.Violation)
		}
		if a.Steps < 100 || !strings.Contains(a.Trace, "activate") {
			t.Fatalf("seed %d: %d steps, no activation in the trace: the coordinator did not run", seed, a.Steps)
		}
	}
}

// TestCoordinatorSimulationPartitionCache runs the coordinator simulation
// with sharded caches (handoffsim.Options.PartitionCache): the coordinator
// hands the core's Hold to the cache and feeds back what it synced, and the
// world checks that no partition activates before its LIST succeeded.
func TestCoordinatorSimulationPartitionCache(t *testing.T) {
	opts := handoffsim.Options{Shell: newSimShell, PartitionCache: true}
	if *coordSimSeed >= 0 {
		handoffsim.Replay(t, uint64(*coordSimSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*coordSimFirst, *coordSimCacheSeeds, opts)
	t.Logf("coordinator simulation with partition caches: seeds=%d steps=%d violations=%d in %v; LISTs %d (%d of 1-8 s, %d failed and retried)",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), s.Lists, s.SlowLists, s.FailedLists)
	if s.Seeds >= 100 && (s.SlowLists == 0 || s.FailedLists == 0) {
		t.Errorf("no slow or no failing LIST in %d seeds: the cache fault did not run", s.Seeds)
	}
	handoffsim.ReportFailed(t, s, opts, "go test ./shard/ring -run TestCoordinatorSimulationPartitionCache -handoff.seed=%d -v")
}

// TestCoordinatorSimulationLabels runs the coordinator simulation with
// caches sharded by labels (handoffsim.Options.Labels, with the fixes
// handoffsim.AllLabelFixes): the coordinator holds partitions through the
// cache, activates only what it reports synced over its label segments and
// its unlabelled view, and tells it the active partitions (SetActive),
// whose objects its labeller labels. The world checks that no partition
// activates before both views listed it, that no object of a partition a
// process runs is missing from its cache, and that every object ends up
// with its own partition's label, and in the cache of the process its
// partition is active on, despite a third party stripping and editing
// labels and views that start before the ring's first Hold (the
// coordinator's first Hold, even of no partition, sizes the cache's held
// set).
func TestCoordinatorSimulationLabels(t *testing.T) {
	opts := handoffsim.Options{Shell: newSimShell, Labels: true, LabelFixes: handoffsim.AllLabelFixes}
	if *coordSimSeed >= 0 {
		handoffsim.Replay(t, uint64(*coordSimSeed), opts)
		return
	}
	s := handoffsim.RunSeeds(*coordSimFirst, *coordSimLabelSeeds, opts)
	l := s.Labels
	t.Logf("coordinator simulation with caches sharded by labels: seeds=%d steps=%d violations=%d in %v; objects %d (%d created unlabelled, %d without a valid label at the start), labels stripped %d and edited %d by a third party; label writes %d (%d failed, %d slow); unlabelled LISTs %d (%d replacements, %d before the ring's first Hold); objects pending %d; object checks %d (%d strays excused)",
		s.Seeds, s.Steps, s.Violations, s.Elapsed.Round(time.Millisecond), l.Objects, l.Created, l.InitiallyUnlabelled, l.Stripped, l.Edited,
		l.Patches, l.FailedPatches, l.SlowPatches, l.UnlabelledLists, l.Replacements, l.ListedBeforeHold, l.Pending, l.ObjectChecks, l.StraysExcused)
	if s.Seeds >= 100 && (l.Patches == 0 || l.Stripped == 0 || l.Pending == 0 || l.ListedBeforeHold == 0) {
		t.Errorf("no label write, stripped label, pending object or unlabelled view listed before the ring's first Hold in %d seeds: the labels model did not run", s.Seeds)
	}
	handoffsim.ReportFailed(t, s, opts, "go test ./shard/ring -run TestCoordinatorSimulationLabels -handoff.seed=%d -v")
}
