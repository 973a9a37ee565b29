package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// run measures the phases p selects and writes results.json and
// RESULTS.md into out: it prepares out and a control plane, then runs the
// steps of phaseSteps in order. Whatever ends the run, the results
// measured so far are written (benchRun.finish), and the operators' and
// control plane's files are kept when it failed or keep is set.
func run(p params, out string, keep, merge bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	out, earlier, err := prepareOut(p, out, merge)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kshard-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil || keep {
			progress("operator logs and binaries kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}

	cp, bins, err := startControlPlane(ctx, root, dir, keep)
	if cp == nil {
		return err
	}
	defer func() {
		if err != nil {
			cp.KeepFiles()
			progress("control-plane files kept in %s", cp.Dir())
		}
		_ = cp.Stop()
	}()
	if err != nil {
		return err
	}
	progress("control plane at %s; operators built", cp.Host())

	b, err := newBench(ctx, p, cp, dir)
	if err != nil {
		return err
	}
	stopObserver, err := b.startObserver(ctx)
	defer stopObserver()
	if err != nil {
		return err
	}
	r := newBenchRun(ctx, b, root, bins)
	defer func() { err = r.finish(earlier, out, err) }()
	return r.runSteps(ctx, out)
}

// prepareOut resolves -out, creates it and reads the results.json a
// partial run merges into, before spending minutes on the run, so that a
// file that cannot be merged fails at once.
func prepareOut(p params, out string, merge bool) (dir string, earlier *results, err error) {
	if dir, err = outDir(out); err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	target := mergeTarget(p, dir, merge)
	if target == "" {
		return dir, nil, nil
	}
	if earlier, err = loadResults(target); err != nil {
		return "", nil, err
	}
	if earlier != nil && quickOf(earlier) != p.Quick {
		return "", nil, fmt.Errorf("%s is from a run with -quick=%t and this run has -quick=%t: use another -out or -merge=false", target, quickOf(earlier), p.Quick)
	}
	return dir, earlier, nil
}

// operatorBins are the paths of the three operators' binaries.
type operatorBins struct {
	kshard, baseline, adapter string
}

// startControlPlane builds the operators into dir while it starts the
// control plane. cp is nil when the control plane did not start; a build
// error comes with the started control plane, which the caller stops.
func startControlPlane(ctx context.Context, root, dir string, keep bool) (cp *controlplane.ControlPlane, bins operatorBins, err error) {
	progress("building the operators and starting the control plane")
	type built struct {
		bins operatorBins
		err  error
	}
	builds := make(chan built, 1)
	go func() {
		k, bl, ad, err := buildOperators(ctx, root, dir)
		builds <- built{operatorBins{k, bl, ad}, err}
	}()
	cp, err = controlplane.Start(ctx, controlplane.Options{Progress: os.Stderr, KeepDir: keep})
	bl := <-builds
	if err != nil {
		return nil, operatorBins{}, fmt.Errorf("starting the control plane: %w", err)
	}
	return cp, bl.bins, bl.err
}

// newBench makes the run's bench on cp, writing ConfigMaps into its
// namespace, which it creates.
func newBench(ctx context.Context, p params, cp *controlplane.ControlPlane, dir string) (*bench, error) {
	client, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	b := &bench{p: p, cp: cp, client: client, objs: objectClient{kind: configMaps, typed: client}, obs: newObserver(), dir: dir, ns: "kshard-bench"}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return b, nil
}

// startObserver starts b's observer of the objects; stop stops it and
// waits for it, and is to be called even when err is not nil.
func (b *bench) startObserver(ctx context.Context) (stop func(), err error) {
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone, err := b.obs.run(obsCtx, b.cp.Config(), b.objs.kind, b.ns)
	return func() { stopObs(); <-obsDone }, err
}

// benchRun is what the phases of one run share: the bench, the systems
// they compare and the results they fill in.
type benchRun struct {
	b *bench
	// p is the run's parameters with the latency chosen before the first
	// round; phases that change b.p for a while do not change it.
	p                         params
	res                       *results
	baseline, kshard, adapter *system
	// systems are the systems phases 3-5 measure: the adapter beside the
	// other two in full runs.
	systems []*system
}

// newBenchRun describes the systems and starts the results with the
// environment and the adapter conversions' sizes.
func newBenchRun(ctx context.Context, b *bench, root string, bins operatorBins) *benchRun {
	r := &benchRun{
		b:        b,
		p:        b.p,
		baseline: &system{name: baselineName, short: "cr", bin: bins.baseline},
		kshard:   &system{name: nativeName, short: "ks", bin: bins.kshard, kshard: true},
		adapter:  &system{name: adapterName, short: "ad", bin: bins.adapter, kshard: true},
	}
	r.systems = []*system{r.baseline, r.kshard, r.adapter}
	if r.p.Quick {
		r.systems = r.systems[:2]
	}
	res := &results{Params: r.p, Env: environment(ctx, b.cp, b.client, bins.baseline), Command: strings.Join(append([]string{"go run ./e2e/bench"}, os.Args[1:]...), " ")}
	res.Env.Commit = gitCommit(ctx, root)
	r.res = res
	b.warnIfNiced()
	if n, err := changedLines(ctx, root); err != nil {
		b.warn("counting the adapter conversion's changed lines: %v", err)
	} else {
		res.ChangedLines = &n
	}
	if n, err := changedLinesKubebuilder(ctx, root); err != nil {
		b.warn("counting the kubebuilder-layout conversion's changed lines: %v", err)
	} else {
		res.ChangedLinesKubebuilder = &n
	}
	return r
}

// phaseStep is a step of a run: it runs when -phases names any of its
// phases (always, when it names none).
type phaseStep struct {
	phases []int
	run    func(context.Context) error
}

// phaseSteps are a run's steps in the order they run: the objects and the
// latency first; phases 1 and 2 in rounds together; phase 5 last, since it
// creates more objects.
func (r *benchRun) phaseSteps() []phaseStep {
	return []phaseStep{
		{nil, r.createObjects},
		{nil, r.chooseLatency},
		{[]int{1, 2}, r.rounds},
		{[]int{3}, r.handoff},
		{[]int{4}, r.failover},
		{[]int{6}, r.restartFailover},
		{[]int{7}, r.sharded},
		{[]int{8}, r.shardedHandoff},
		{[]int{9}, r.scale},
		{[]int{10}, r.labels},
		{[]int{5}, r.resources},
	}
}

// runSteps runs the steps -phases selects, in order, and stops at the
// first that fails.
func (r *benchRun) runSteps(ctx context.Context, out string) error {
	for _, s := range r.phaseSteps() {
		if !r.selects(s.phases) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return err
		}
	}
	r.res.Seconds = time.Since(started).Seconds()
	progress("done in %.0fs; results in %s", r.res.Seconds, out)
	return nil
}

// selects is whether -phases names any of phases, or phases is empty.
func (r *benchRun) selects(phases []int) bool {
	for _, ph := range phases {
		if r.p.Phases[ph] {
			return true
		}
	}
	return len(phases) == 0
}

// finish records how the run ended, keeps the earlier run's figures of the
// phases this one left out, and writes results.json and RESULTS.md into
// out; it returns err, or the first error of its own when err is nil.
func (r *benchRun) finish(earlier *results, out string, err error) error {
	res := r.res
	res.Warnings = r.b.warnings
	if kept, kerr := res.keepEarlier(earlier); kerr != nil && err == nil {
		err = kerr
	} else if len(kept) > 0 {
		progress("phases %v kept from the earlier results.json in %s", kept, out)
	}
	res.Failed = err != nil
	if err != nil {
		res.Error = err.Error()
		res.Seconds = time.Since(started).Seconds() // a run cut short took this long too
	}
	if werr := res.write(out); werr != nil && err == nil {
		err = werr
	}
	return err
}

// createObjects creates the -objects objects and waits until the
// observer has seen them all.
func (r *benchRun) createObjects(ctx context.Context) error {
	progress("creating %d objects", r.p.Objects)
	return r.b.ensureObserved(ctx, r.p.Objects)
}

// ensureObserved creates objects up to n and waits until the observer
// has seen n.
func (b *bench) ensureObserved(ctx context.Context, n int) error {
	if err := b.ensureObjects(ctx, n); err != nil {
		return err
	}
	return b.obs.wait(ctx, func() bool { return len(b.obs.objs) >= n })
}

// chooseLatency chooses the latency-bound phases' latency from the
// machine's capacity when the run is to (latency.go), and records how it
// was chosen.
func (r *benchRun) chooseLatency(ctx context.Context) error {
	choice, err := r.b.chooseLatency(ctx, r.baseline)
	if err != nil {
		return fmt.Errorf("choosing the latency: %w", err)
	}
	if r.res.LatencyChoice = choice; choice != nil && choice.Source == latencyFromCapacity {
		r.p.Latency = r.b.p.Latency
		r.res.Params.Latency = r.b.p.Latency
	}
	return nil
}
