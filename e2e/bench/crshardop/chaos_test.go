package main

import (
	"context"
	"debug/buildinfo"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/internal/kitwriter"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
)

// rounds is how many rounds of every chaos scenario run (make
// chaos-crshard ROUNDS=N); each round has its own control plane.
var rounds = flag.Int("rounds", 1, "rounds of each chaos scenario of the converted operator")

// cacheMode is the operator's --cache-mode (make chaos-crshard
// CACHE_MODE=labels runs the scenarios on the ring's sharded cache).
var cacheMode = flag.String("cache-mode", "full", "the converted operator's --cache-mode: full or labels")

// start is how each round's first fleet starts (make chaos-crshard
// START=…), as the native suite's -start: all at once, one by one at
// random gaps, or alternating by round (odd rounds together, even
// staggered). A replica starting while its peers form the ring may start
// its caches before its first ring update (issue 41).
var start = flag.String("start", "together", "how each round's first replicas start: together, staggered (one by one, 0.3-4s apart) or alternate (odd rounds together, even staggered)")

// operators is a directory of operators built elsewhere, named as go build
// -o DIR/ names them (crshardop for ".", mapped for "./mapped"), used
// instead of building them here: make compat-cr024 builds them with
// -tags kshardtest in e2e/crshard-cr024, against controller-runtime v0.24.
var operators = flag.String("operators", "", "a directory of prebuilt operators (crshardop, mapped) to run instead of building them")

// summaryEnv names a file the chaos summary line is appended to, as the
// native chaos suite's (e2e/chaos) does.
const summaryEnv = "KSHARD_CHAOS_SUMMARY"

// binaries holds the operators built once per test binary with -tags
// kshardtest (their reconciles and ring events are recorded), or taken
// from -operators, by package, and the controller-runtime versions they
// were built with (for the summary line).
var binaries struct {
	sync.Mutex
	dir   string
	built map[string]string
	crs   []string
}

// operatorBinary builds the operator in pkg ("." for the converted
// benchmark operator, "./mapped") once, or takes it from -operators.
func operatorBinary(t *testing.T, pkg string) string {
	t.Helper()
	binaries.Lock()
	defer binaries.Unlock()
	if bin, ok := binaries.built[pkg]; ok {
		return bin
	}
	if binaries.built == nil {
		binaries.built = map[string]string{}
	}
	var bin string
	if *operators != "" {
		name := filepath.Base(pkg)
		if pkg == "." {
			name = "crshardop"
		}
		bin = filepath.Join(*operators, name)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("-operators %s: no operator for %s: %v (build it with go build -tags kshardtest -o %s/)", *operators, pkg, err, *operators)
		}
	} else {
		if binaries.dir == "" {
			dir, err := os.MkdirTemp("", "crshardop-bin-")
			if err != nil {
				t.Fatal(err)
			}
			binaries.dir = dir
		}
		bin = filepath.Join(binaries.dir, fmt.Sprintf("op-%d", len(binaries.built)))
		if out, err := exec.Command("go", "build", "-tags", "kshardtest", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("building the operator %s: %v\n%s", pkg, err, out)
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("reading the operator %s's build information: %v", bin, err)
	}
	versions := map[string]string{}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		versions[d.Path] = d.Version
	}
	if !slices.Contains(bi.Settings, debug.BuildSetting{Key: "-tags", Value: "kshardtest"}) {
		t.Fatalf("the operator %s was built without -tags kshardtest: it records no reconcile", bin)
	}
	cr := versions["sigs.k8s.io/controller-runtime"]
	t.Logf("operator %s: %s, controller-runtime %s, client-go %s", pkg, bin, cr, versions["k8s.io/client-go"])
	if !slices.Contains(binaries.crs, cr) {
		binaries.crs = append(binaries.crs, cr)
	}
	binaries.built[pkg] = bin
	return bin
}

// fleet is one round: a control plane, the converted operator's replicas
// and the kit's writer bumping generations in ConfigMaps.
type fleet struct {
	env    *kshardtest.Env
	writer *kitwriter.Writer
	bin    string
	// mapped: the operator is ./mapped, which has controller-runtime's
	// own cache and no --cache-mode.
	mapped bool
}

// staggered reports whether round's first fleet starts one by one (-start),
// failing the test on a -start it does not know.
func staggered(t *testing.T, round int) bool {
	switch *start {
	case "together":
		return false
	case "staggered":
		return true
	case "alternate":
		return round%2 == 0
	}
	t.Fatalf("-start=%q: want together, staggered or alternate", *start)
	return false
}

// newFleet starts the operator in pkg as replicas ids — one by one at random
// gaps of 0.3-4 s when stagger is set — and 60 ConfigMaps under a writer.
func newFleet(t *testing.T, ring, pkg string, stagger bool, ids ...string) *fleet {
	f := &fleet{bin: operatorBinary(t, pkg), env: kshardtest.New(t, kshardtest.Options{Ring: ring, Namespace: ring}), mapped: pkg != "."}
	for i, id := range ids {
		if stagger && i > 0 {
			gap := 300*time.Millisecond + rand.N(3700*time.Millisecond)
			t.Logf("starting %s %s after %s (staggered)", id, gap.Round(time.Millisecond), ids[i-1])
			time.Sleep(gap) // the gap is the fault's timing, not a wait for a condition
		}
		f.start(id)
	}
	f.env.AwaitConverged(2*time.Minute, ids...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := kitwriter.CreateConfigMaps(ctx, f.env.Client(), ring,
		map[string]string{kitwriter.Label: kitwriter.LabelValue, labelKey: labelObject}, 60, f.env.RecordDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.writer, err = kitwriter.Start(f.env.Client(), ring, names, 40, f.env.RecordDir()); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs a new incarnation of identity with the kit's lease timings.
// Only the converted benchmark operator has --cache-mode: the mapped one
// exits on a flag it does not define.
func (f *fleet) start(id string) {
	o := f.env.Options()
	args := []string{
		"--name", o.Ring, "--namespace", o.Namespace, "--identity", id,
		"--lease-duration", o.LeaseDuration.String(), "--renew-deadline", o.RenewDeadline.String(),
		"--renew-period", o.RenewPeriod.String(), "--drain-grace", o.DrainGracePeriod.String(),
		"--latency", "5ms",
	}
	if !f.mapped {
		// No epoch watch: a map function over ConfigMaps would keep the
		// kind whole (see checkCaches), and the chaos rounds write no
		// epoch. So under --cache-mode=labels the adapter caches the
		// ConfigMaps it reconciles by partition label, as issue 41 asks.
		args = append(args, "--cache-mode", *cacheMode, "--watch-epoch=false")
	}
	f.env.StartProcess(id, kshardtest.Command{Path: f.bin, Args: args})
}

// check stops the writer, waits for every update's reconcile, checks the
// caches of the live replicas ids, and fails the test on any overlap, lost
// update, update reconciled later than the kit's liveness bound
// (kshardtest.Options.LivenessBound: LeaseDuration + DrainGracePeriod +
// kshardtest.LivenessAllowance, extended by an outage), existing object
// read as NotFound, or object not cached as the cache mode says.
func (f *fleet) check(t *testing.T, scenario string, ids []string) kshardtest.Report {
	t.Helper()
	writes, failures, lastErr := f.writer.Stop()
	report := f.env.Check(time.Minute)
	t.Logf("%s: %d writes (%d failed, last error %v); %s", scenario, writes, failures, lastErr, report)
	misplaced := f.checkCaches(t, ids)
	f.count(report, misplaced)
	if !report.OK() {
		t.Fatal(report)
	}
	if report.Completed == 0 {
		t.Fatalf("%s: no reconcile of the kit's objects completed", scenario)
	}
	return report
}

// cacheTimeout bounds how long after the last update the replicas' caches
// may take to agree with the API server.
const cacheTimeout = 30 * time.Second

// checkCaches checks that every ConfigMap of the fleet's namespace (the
// kinds and namespace the operator watches) is in exactly one of the live
// replicas' caches where the replicas cache ConfigMaps by partition label
// (kshard_cache_mode), in every one's where they cache them whole, at the
// API server's resourceVersion, and by labels carries its own partition's
// label. It waits up to cacheTimeout for them to agree, fails the test
// otherwise, and returns how many objects disagreed.
//
// The converted operator runs without its epoch watch here
// (--watch-epoch=false): that map function over ConfigMaps would make the
// adapter cache them whole, since it cannot tell their partition
// (shard/cache's labelRoute). Its mapped sibling has only a map function,
// and controller-runtime's cache.
func (f *fleet) checkCaches(t *testing.T, ids []string) int {
	t.Helper()
	mode, err := f.configMapMode(ids)
	if err != nil {
		t.Errorf("reading the replicas' cache mode: %v", err)
		return 0
	}
	sharded := mode == "labels"
	if *cacheMode == "labels" && !sharded {
		t.Logf("the replicas cache ConfigMaps in mode %q under --cache-mode=labels (see checkCaches): each object must be in every replica's cache", mode)
	}
	o := f.env.Options()
	cfg := shard.Config{}.WithDefaults() // the adapter's ring: default partitions, key scheme
	labelKey, err := shard.PartitionLabelKey(o.Ring, cfg)
	if err != nil {
		t.Fatal(err)
	}
	partitioner, err := shard.PartitionerFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var objects int
	var readErr error
	began := time.Now()
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, cacheTimeout, true, func(context.Context) (bool, error) {
		problems = nil
		readErr = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			list, err := f.env.Client().CoreV1().ConfigMaps(o.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			objects = len(list.Items)
			server := make([]kshardtest.CachedObject, len(list.Items))
			for i, cm := range list.Items {
				key := shard.KeyOf(cm.Namespace, cm.Name)
				server[i] = kshardtest.CachedObject{Key: key, ResourceVersion: cm.ResourceVersion}
				if want := shard.PartitionLabelValue(partitioner.Partition(key)); sharded && cm.Labels[labelKey] != want {
					problems = append(problems, fmt.Sprintf("%s: label %s=%q, want %q", key, labelKey, cm.Labels[labelKey], want))
				}
			}
			caches := map[string][]kshardtest.CachedObject{}
			for _, id := range ids {
				if caches[id], err = f.env.CacheReport(ctx, id); err != nil {
					return fmt.Errorf("reading %s's cache: %w", id, err)
				}
			}
			problems = append(problems, kshardtest.CheckCaches(server, caches, sharded)...)
			return nil
		}()
		return readErr == nil && len(problems) == 0, nil
	})
	if err == nil {
		t.Logf("caches: each of the %d ConfigMaps is in %s at its resourceVersion%s (%s after the check began)", objects,
			map[bool]string{true: "exactly one live replica's cache", false: "every live replica's cache"}[sharded],
			map[bool]string{true: " and carries its partition's label", false: ""}[sharded], time.Since(began).Round(time.Millisecond))
		return 0
	}
	if readErr != nil {
		t.Errorf("checking the replicas' caches: %v", readErr)
		return objects
	}
	keys := map[string]bool{}
	for _, p := range problems {
		k, _, _ := strings.Cut(p, ": ")
		keys[k] = true
	}
	if len(problems) > 20 {
		problems = append(problems[:20:20], fmt.Sprintf("… and %d more", len(problems)-20))
	}
	t.Errorf("%d of %d ConfigMaps are not cached as the replicas' cache mode %q says, or lack their partition label, %s after the last update:\n  %s",
		len(keys), objects, mode, cacheTimeout, strings.Join(problems, "\n  "))
	return len(keys)
}

// configMapKind is how the adapter's kshard_cache_mode metric names
// ConfigMaps.
const configMapKind = `kind="/v1, Kind=ConfigMap"`

// configMapMode reads the mode the replicas ids cache ConfigMaps in from
// their kshard_cache_mode metric ("full" where the metric is absent: a full
// cache is controller-runtime's own), and fails when they differ. The
// mapped operator serves no metrics and has controller-runtime's cache.
func (f *fleet) configMapMode(ids []string) (string, error) {
	if f.mapped {
		return "full", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	modes := map[string]string{}
	for _, id := range ids {
		addr, err := f.env.ServingAddr(ctx, id, kshardtest.MetricsServer)
		if err != nil {
			return "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", fmt.Errorf("reading %s's metrics: %w", id, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("reading %s's metrics: %w", id, err)
		}
		modes[id] = "full"
		for line := range strings.Lines(string(body)) {
			// kshard_cache_mode{kind="/v1, Kind=ConfigMap",mode="labels"} 1
			if !strings.HasPrefix(line, "kshard_cache_mode{") || !strings.Contains(line, configMapKind) || !strings.HasSuffix(strings.TrimSpace(line), " 1") {
				continue
			}
			if _, rest, ok := strings.Cut(line, `mode="`); ok {
				modes[id], _, _ = strings.Cut(rest, `"`)
			}
		}
	}
	mode := modes[ids[0]]
	for id, m := range modes {
		if m != mode {
			return "", fmt.Errorf("the replicas cache ConfigMaps in different modes: %v (%s: %s)", modes, id, m)
		}
	}
	return mode, nil
}

// totals sums the checked rounds for the summary line.
var totals struct {
	sync.Mutex
	rounds, reconciles, writes, overlaps, lost, vanished, overdue, misplaced int
	worstWait, worstNet                                                      time.Duration
}

func (f *fleet) count(r kshardtest.Report, misplaced int) {
	totals.Lock()
	defer totals.Unlock()
	totals.rounds++
	totals.reconciles += r.Reconciles
	totals.writes += r.Writes
	totals.overlaps += r.Overlaps
	totals.lost += r.Lost
	totals.vanished += r.NotFound
	totals.overdue += r.Late
	totals.misplaced += misplaced
	totals.worstWait = max(totals.worstWait, r.LongestWait)
	totals.worstNet = max(totals.worstNet, r.LongestNetWait)
}

type scenario struct {
	name  string
	fault func(t *testing.T, f *fleet)
}

// kill, rolling and scaling are the chaos scenarios that move partitions
// between live replicas, on a fleet of ids.
func moves(ids []string) []scenario {
	return []scenario{
		{"kill", func(t *testing.T, f *fleet) {
			f.env.Crash("r-1")
			f.env.AwaitConverged(time.Minute, "r-0", "r-2")
			f.start("r-1")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
		{"rolling", func(t *testing.T, f *fleet) {
			f.env.RollingRestart(2*time.Minute, f.start, ids...)
		}},
		{"scaling", func(t *testing.T, f *fleet) {
			f.start("r-3")
			f.start("r-4")
			f.env.AwaitConverged(2*time.Minute, append(ids, "r-3", "r-4")...)
			f.env.Stop("r-4")
			f.env.Stop("r-3")
			f.env.Stop("r-2")
			f.env.AwaitConverged(time.Minute, "r-0", "r-1")
			f.start("r-2")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
	}
}

// runChaos runs *rounds rounds of scenarios on fresh fleets of the
// operator in pkg, checking each.
func runChaos(t *testing.T, pkg string, ids []string, scenarios []scenario) {
	for round := 1; round <= *rounds; round++ {
		for _, sc := range scenarios {
			t.Run(fmt.Sprintf("%s/round-%d", sc.name, round), func(t *testing.T) {
				f := newFleet(t, "crshardop", pkg, staggered(t, round), ids...)
				sc.fault(t, f)
				f.check(t, sc.name, ids)
			})
		}
	}
}

// TestConvertedOperatorChaos runs the converted controller-runtime
// operator through the native chaos suite's fault kinds — a SIGKILL, a
// rolling restart, scaling out and in, an API-server outage longer than
// the LeaseDuration — under a stream of updates, each round on a fresh
// control plane, and checks every round with the kit's checker: no key
// reconciled by two replicas at once, no update left unreconciled.
func TestConvertedOperatorChaos(t *testing.T) {
	ids := []string{"r-0", "r-1", "r-2"}
	runChaos(t, ".", ids, append(moves(ids), scenario{"outage", func(t *testing.T, f *fleet) {
		down := f.env.StopAPIServer()
		// Past LeaseDuration: every replica fences itself, and must
		// rejoin on its own once the API server is back.
		// The outage's length is the fault itself, not a wait for a
		// condition.
		time.Sleep(time.Until(down.Add(f.env.Options().LeaseDuration + time.Second)))
		f.env.StartAPIServer()
		f.env.AwaitConverged(2*time.Minute, ids...)
	}}))
}

// TestMappedOperatorChaos runs a SIGKILL, a rolling restart and scaling on
// an operator whose only source maps the kit's ConfigMaps to its keys with
// EnqueueRequestsFromMapFunc (./mapped): with no For objects, an update
// whose event every replica dropped while its partition moved is
// reconciled only if the new owner's activation replays the Watches
// handler. The kill and scaling scenarios stop the writer before the moves
// end, so no later update of a key hides a lost one.
func TestMappedOperatorChaos(t *testing.T) {
	if *cacheMode != "full" {
		t.Fatalf("-cache-mode=%s: the mapped operator has only controller-runtime's cache (no --cache-mode)", *cacheMode)
	}
	ids := []string{"r-0", "r-1", "r-2"}
	all := moves(ids)
	runChaos(t, "./mapped", ids, []scenario{
		{"kill", func(t *testing.T, f *fleet) {
			f.env.Crash("r-1")
			// Updates while r-1's partitions are owned by no live replica
			// (until its Lease expires, at least LeaseDuration-RenewPeriod
			// from now), then none: their events are dropped everywhere.
			// The length of the writes is the fault itself, not a wait
			// for a condition.
			o := f.env.Options()
			time.Sleep((o.LeaseDuration - o.RenewPeriod) / 2)
			f.writer.Stop()
			f.env.AwaitConverged(time.Minute, "r-0", "r-2")
			f.start("r-1")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
		all[1], // rolling
		{"scaling", func(t *testing.T, f *fleet) {
			f.start("r-3")
			f.start("r-4")
			f.env.AwaitConverged(2*time.Minute, append(ids, "r-3", "r-4")...)
			f.writer.Stop() // updates only while partitions moved to r-3 and r-4
			f.env.Stop("r-4")
			f.env.Stop("r-3")
			f.env.Stop("r-2")
			f.env.AwaitConverged(time.Minute, "r-0", "r-1")
			f.start("r-2")
			f.env.AwaitConverged(2*time.Minute, ids...)
		}},
	})
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
	if path := os.Getenv(summaryEnv); path != "" && totals.rounds > 0 {
		line := fmt.Sprintf("crshard chaos summary: controller-runtime=%s cache=%s start=%s rounds=%d reconciles=%d writes=%d overlaps=%d lost=%d notfound_existing=%d overdue=%d worst_wait=%.3f worst_wait_net=%.3f misplaced=%d\n",
			strings.Join(binaries.crs, ","), *cacheMode, *start, totals.rounds, totals.reconciles, totals.writes, totals.overlaps, totals.lost, totals.vanished, totals.overdue,
			totals.worstWait.Seconds(), totals.worstNet.Seconds(), totals.misplaced)
		if fh, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			_, _ = fh.WriteString(line)
			_ = fh.Close()
		}
	}
	os.Exit(code)
}
