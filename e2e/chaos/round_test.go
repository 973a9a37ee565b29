package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// seed, when set, replays the random timing of a logged round (each round
// of a scenario logs the seed it drew).
var seed = flag.Uint64("seed", 0, "random seed of every round (0: a new one per round)")

// start is how a scenario's first fleet starts: all at once, one by one
// at random gaps, or alternating by round (odd rounds together, even
// staggered). A replica that starts while its peers are forming the ring
// meets it half-made: its caches may start before its first ring update
// (issue 41), which starting together rarely shows.
var start = flag.String("start", startTogether, "how each scenario's first replicas start: together, staggered (one by one, 0.3-4s apart) or alternate (odd rounds together, even staggered)")

// replicaV is every replica's --v (harness.Options.Verbosity); make's V=.
var replicaV = flag.Int("replica-v", 0, "every replica's log verbosity (--v): 1 adds activations, drains, why claimed partitions are not active yet, and the cache's segments, views and self-checks")

const (
	startTogether  = "together"
	startStaggered = "staggered"
	startAlternate = "alternate"
)

// Timeouts shared by the scenarios. They are generous because the suite
// shares two cores with other tests; the assertions that matter (overlaps,
// fencing deadlines) do not depend on them. reconcileTimeout covers the
// outage scenario, where object caches reconnect only after client-go's
// informer backoff (up to 30s, doubled by jitter): 26–62s in local runs.
const (
	convergeTimeout   = 90 * time.Second
	reconcileTimeout  = 2 * time.Minute
	takeoverTolerance = 30 * time.Second
)

// The suite's scheduling allowance: the wall-clock bounds it asserts, and
// what each may be exceeded by on two cores shared with other tests under
// -race.
//   - Safety bounds get none: a replica stops reconciling and drains
//     within LeaseDuration of its last renewal (outage, slow reconciler),
//     because its peers may take its partitions then whatever the load;
//     its fence, at RenewDeadline by its own clock, keeps the margin.
//   - A fence's start may exceed RenewDeadline by schedulingSlack (the
//     coordinator's wake-up after the deadline and the record's write).
//   - A recovery by itself may exceed 2×LeaseDuration by recoverySlack (its
//     steps each wake on a timer or watch event, and each may wake late).
//   - Takeovers and convergence wait up to takeoverTolerance and
//     convergeTimeout: liveness, measured and reported, never a bound on
//     speed.
const recoverySlack = 2 * time.Second

// round is one run of a scenario, in a namespace and ring of its own.
type round struct {
	t    *testing.T
	cp   *controlplane.ControlPlane
	rng  *rand.Rand
	name string // the ring's name; the namespace is "chaos-"+name
	// index is the round's number, from 1.
	index int
	// faults counts the faults this round injected: signals to replicas,
	// API server outages and proxy blackholes.
	faults int
	// fenceExits are the processes that exited after a fence (see revive).
	fenceExits map[recorder.Process]bool
	// selfExits are processes that exited by themselves for another
	// reason, restarted by revive when restartAnyExit is set (a scenario
	// that reports a replica's failure to recover rather than stopping).
	selfExits      map[recorder.Process]int
	restartAnyExit bool
	// paused are the processes a scenario stopped with SIGSTOP: their
	// reconciles' intervals may span a peer's (time passed, the process
	// did not run), so finish checks their reconciles through the writes
	// they sent rather than through their intervals and windows.
	paused map[recorder.Process]bool
	// setup is how the replicas cache, and modeChecked whether the first
	// convergence has checked that they do (see converge).
	setup       cacheSetup
	modeChecked bool
}

// cacheSetup is how a round's replicas cache the objects, and on which
// control plane.
type cacheSetup int

const (
	// setupFull: key partitioning, every replica caches every object of
	// the round's namespace (the default).
	setupFull cacheSetup = iota
	// setupServer (-sharded): the API server's sharded list and watch
	// (feature gate ShardedListAndWatch), PartitionBy namespace, objects
	// spread over namespaces.
	setupServer
	// setupLabels (-labels): the gate-free sharded cache, CacheMode
	// labels under key partitioning, no feature gate, objects spread over
	// labelledNamespaces namespaces.
	setupLabels
)

// labelledNamespaces is how many namespaces hold the objects of a round on
// the gate-free sharded cache: under key partitioning the namespaces do
// not place the objects, they only make the replicas watch across them.
const labelledNamespaces = 6

// flagSetup is the setup the flags ask for.
func flagSetup() cacheSetup {
	switch {
	case *sharded:
		return setupServer
	case *labels:
		return setupLabels
	}
	return setupFull
}

// kindMode is the cache mode (cache.ModeReport) the replicas must report
// for ConfigMaps under the setup, "" when they report none (a full cache).
func (s cacheSetup) kindMode() string {
	switch s {
	case setupServer:
		return "sharded"
	case setupLabels:
		return "labels"
	}
	return ""
}

// scenario runs body once per round (-rounds) as subtests round-1, round-2…
// on a control plane of the test's own, in parallel with other scenarios,
// in the cache setup the flags ask for.
func scenario(t *testing.T, name string, body func(r *round)) {
	scenarioIn(t, name, flagSetup(), body)
}

// scenarioIn is scenario in the given cache setup, whatever the flags say.
func scenarioIn(t *testing.T, name string, setup cacheSetup, body func(r *round)) {
	if testing.Short() {
		t.Skip("e2e chaos: runs a control plane and replicas for about a minute per round")
	}
	t.Parallel()
	cp := controlplane.ForTest(t, controlplane.Options{ShardedListAndWatch: setup == setupServer})
	for i := range *rounds {
		s := *seed
		if s == 0 {
			s = rand.Uint64()
		}
		// A failed round keeps its files and the later rounds still run,
		// so a run of many rounds tells how often a scenario fails.
		t.Run(fmt.Sprintf("round-%d", i+1), func(t *testing.T) {
			t.Logf("seed %d (rerun this round's timing with -seed=%d)", s, s)
			body(&round{t: t, cp: cp, rng: rand.New(rand.NewPCG(s, 0)), name: fmt.Sprintf("%s-%d", name, i+1), index: i + 1, setup: setup})
		})
	}
}

// harness starts a harness for this round with opts, in the round's ring
// and namespace.
func (r *round) harness(opts harness.Options) *harness.Harness {
	r.t.Helper()
	opts.Ring, opts.Namespace = r.name, "chaos-"+r.name
	if opts.Verbosity == 0 {
		opts.Verbosity = *replicaV
	}
	switch r.setup {
	case setupServer:
		opts.PartitionBy, opts.Balance = "namespace", *balance
	case setupLabels:
		opts.CacheMode, opts.ObjectNamespaces = "labels", labelledNamespaces
	}
	return harness.New(r.t, r.cp, opts)
}

// staggered reports whether this round's first fleet starts one by one
// (-start).
func (r *round) staggered() bool {
	return *start == startStaggered || (*start == startAlternate && r.index%2 == 0)
}

// startFleet starts ids as the round's first fleet, together or one by one
// at random gaps as -start says, and waits until every one is ready.
func (r *round) startFleet(h *harness.Harness, ids ...string) {
	r.t.Helper()
	if !r.staggered() {
		h.StartReady(ids...)
		return
	}
	for i, id := range ids {
		if i > 0 {
			gap := r.between(300*time.Millisecond, 4*time.Second)
			r.t.Logf("starting %s %s after %s (staggered)", id, gap.Round(time.Millisecond), ids[i-1])
			time.Sleep(gap) // the gap is the fault's timing, not a wait for a condition
		}
		h.Start(id)
	}
	for _, id := range ids {
		h.WaitReady(id)
	}
}

// between draws a duration uniformly from [lo, hi).
func (r *round) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

// pause waits a random time in [lo, hi): the fault timing the scenario
// randomises, never a wait for a condition (those use harness.Await).
func (r *round) pause(lo, hi time.Duration) { time.Sleep(r.between(lo, hi)) }

// until waits until the wall clock reaches at: a fault lasting for a set time.
func until(at time.Time) { time.Sleep(time.Until(at)) }

// identities returns r-0…r-(n-1).
func identities(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = harness.Identity(i)
	}
	return ids
}
