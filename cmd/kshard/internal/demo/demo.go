package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/kittools"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager/kshardtest/controlplane"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/ringstatus"
)

// Names the demo uses in its private control plane.
const (
	Namespace = "kshard-demo"
	Ring      = "example-operator"
	// identityPrefix + index is a replica's identity, as in a StatefulSet.
	identityPrefix = "example-operator-"
)

// Options configure Run.
type Options struct {
	// Replicas is how many example-operator replicas run at first.
	Replicas int
	// Objects is how many Widgets are created.
	Objects int
	// CacheMode is the replicas' --cache-mode: "labels" (each caches only
	// its partitions' objects, found by a partition label it writes once
	// per object; the demo's control plane has no feature gate) or "full".
	// Defaults to "labels".
	CacheMode string
	// Keep keeps everything running after the demo until ctx is done.
	Keep bool
	// Timeout bounds the demo from when the control plane is up: not the
	// one-time build of its binaries, nor the wait of Keep.
	Timeout time.Duration
	// Executable is the example-operator binary the replicas run.
	Executable string
	// Prog is how to spell this command in printed examples.
	Prog string
	// Stdout receives the table and results; Stderr the control-plane
	// progress.
	Stdout, Stderr io.Writer
	// TTY redraws the table in place; otherwise plain tables are printed.
	TTY bool
	// Hurry, when closed, makes shutdown kill replicas instead of waiting
	// for their graceful leave (a second Ctrl-C).
	Hurry <-chan struct{}

	// ensureBinaries and startControlPlane replace kittools.Ensure and
	// controlplane.Start in tests.
	ensureBinaries    func(context.Context, io.Writer) (kittools.Binaries, error)
	startControlPlane func(context.Context, controlplane.Options) (*controlplane.ControlPlane, error)
}

// Results are the demo's measurements.
type Results struct {
	Converged    time.Duration // creating the Widgets → all reconciled
	HandoffGap   time.Duration // SIGTERM → all the leaver's partitions claimed by active others
	ActiveAfter  time.Duration // SIGTERM → all partitions active again (metrics)
	Moved        int           // partitions the leaver held
	JoinMoved    int           // partitions that moved to the new replica
	JoinDuration time.Duration // new replica started → ring converged
	ReconciledBy map[string]int
	// Cached is how many objects each replica's cache held once the
	// Widgets were reconciled, as its Lease published it, and Watched how
	// many objects (Widgets and ConfigMaps) the replicas watch.
	Cached  map[string]int
	Watched int
}

// Cache modes the demo runs (Options.CacheMode).
const (
	CacheLabels = "labels"
	CacheFull   = "full"
)

// cacheSettle bounds the wait for the replicas' published object counts to
// agree with the objects there are: they ride on the Lease renewals every
// few seconds, and a replica labels what it owns at its own pace.
const cacheSettle = 30 * time.Second

// replicaLeaveGrace bounds a replica's graceful leave at shutdown; the
// operator's own --shutdown-timeout is 30s.
const replicaLeaveGrace = 35 * time.Second

type demo struct {
	opts   Options
	start  time.Time
	client kubernetes.Interface
	dyn    dynamic.Interface
	fleet  *fleet
	scr    *screen
	http   *http.Client

	leases  cache.Indexer
	widgets cache.Indexer
	watch   leaseWatch

	phase    string
	stats    map[string]*replicaStats // by identity
	stopping map[string]bool          // replicas the demo signalled
	next     int                      // index of the next identity
}

// replicaStats is what the table shows of a replica's metrics.
type replicaStats struct {
	last     sample
	rate     rateMeter // reconciles/s over the last rateWindow
	scrapeOK bool
}

// explainTimeout turns an error caused by --timeout running out into one
// that says so and names the phase the demo was in.
func (d *demo) explainTimeout(ctx, runCtx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && runCtx.Err() != nil {
		return fmt.Errorf("the demo did not finish within --timeout %s, counted from when the control plane was up (it was %s): raise --timeout or lower --objects", d.opts.Timeout, d.phase)
	}
	return err
}

// startControlPlane builds the control-plane binaries if they are not
// cached (the first run; the build reports its own progress) and starts the
// control plane. Only ctx bounds it: a first build takes minutes on a small
// machine and must not eat into --timeout.
func (d *demo) startControlPlane(ctx context.Context) (*controlplane.ControlPlane, error) {
	o := d.opts
	ensure, start := o.ensureBinaries, o.startControlPlane
	if ensure == nil {
		ensure = kittools.Ensure
	}
	if start == nil {
		start = controlplane.Start
	}
	d.phase = "building the control-plane binaries"
	fmt.Fprintf(o.Stderr, "%s: looking for the control-plane binaries (the first run builds etcd, kube-apiserver and kube-controller-manager from source, about 10 minutes on 2 idle cores and 30 or more on busy ones, then caches them; --timeout does not count it; Ctrl-C stops it)\n", o.Prog)
	bins, err := ensure(ctx, o.Stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("building the control-plane binaries: %w", err)
	}
	d.phase = "starting the control plane"
	fmt.Fprintf(o.Stderr, "%s: starting a local control plane (etcd, kube-apiserver, kube-controller-manager)\n", o.Prog)
	cp, err := start(ctx, controlplane.Options{BinDir: bins.Dir(), Progress: o.Stderr, ControllerManager: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	return cp, nil
}

// Run runs the demo. It returns nil when every step succeeded, ctx's error
// when ctx ended first, and otherwise what failed. Everything it started is
// stopped before it returns.
func Run(ctx context.Context, o Options) (res Results, err error) {
	if o.CacheMode == "" {
		o.CacheMode = CacheLabels
	}
	d := &demo{opts: o, start: time.Now(), stats: map[string]*replicaStats{}, stopping: map[string]bool{},
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	d.scr = &screen{w: o.Stdout, tty: o.TTY, plainEvery: 5 * time.Second}
	// Neither the one-time build nor the start counts against --timeout:
	// the build has its own progress, the start its own bounds, and Ctrl-C
	// stops either.
	cp, err := d.startControlPlane(ctx)
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			cp.KeepFiles()
			fmt.Fprintf(o.Stderr, "%s: control-plane and replica logs kept in %s\n", o.Prog, cp.Dir())
		}
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the control plane: %w", stopErr)
		}
	}()
	runCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	defer func() { err = d.explainTimeout(ctx, runCtx, err) }()
	fmt.Fprintf(o.Stderr, "%s: control plane up at %s in %s (files in %s)\n", o.Prog, cp.Host(), time.Since(d.start).Round(100*time.Millisecond), cp.Dir())

	cfg := rest.CopyConfig(cp.Config())
	cfg.QPS, cfg.Burst = 200, 400 // one private API server: no need to throttle the demo's writes
	cfg.WarningHandler = rest.NoWarnings{}
	if d.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return res, err
	}
	if d.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return res, err
	}
	d.phase = "installing the Widget CRD"
	if err := installCRD(runCtx, d.dyn); err != nil {
		return res, err
	}
	if err := createNamespace(runCtx, d.client, Namespace); err != nil {
		return res, err
	}

	// Informers: Leases for the ring and handoff timing, Widgets for
	// progress. They stop before the control plane does.
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = lease.LabelRing + "=" + Ring }))
	leaseInf := leaseFactory.Coordination().V1().Leases().Informer()
	notify := func(any) { d.watch.changed() }
	if _, err := leaseInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, DeleteFunc: notify, UpdateFunc: func(_, n any) { notify(n) },
	}); err != nil {
		return res, err
	}
	widgetFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(d.dyn, 0, Namespace, nil)
	widgetInf := widgetFactory.ForResource(widgetGVR).Informer()
	informerStop := make(chan struct{})
	leaseFactory.Start(informerStop)
	widgetFactory.Start(informerStop)
	defer func() {
		close(informerStop)
		leaseFactory.Shutdown()
		widgetFactory.Shutdown()
	}()
	if !cache.WaitForCacheSync(runCtx.Done(), leaseInf.HasSynced, widgetInf.HasSynced) {
		return res, runCtx.Err()
	}
	d.leases, d.widgets = leaseInf.GetIndexer(), widgetInf.GetIndexer()

	logDir := filepath.Join(cp.Dir(), "replicas")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return res, err
	}
	d.fleet = &fleet{executable: o.Executable, logDir: logDir, baseArgs: []string{
		"--kubeconfig", cp.KubeconfigPath(), "--ring", Ring, "--lease-namespace", Namespace, "--watch-namespace", Namespace,
		"--cache-mode", o.CacheMode,
	}}
	// Registered after the informers' stop, so it runs before it: replicas
	// leave while the demo still watches, and before the API server goes.
	defer d.fleet.stopAll(replicaLeaveGrace, o.Hurry)

	if res, err = d.script(runCtx); err != nil {
		return res, err
	}
	if o.Keep {
		d.keep(ctx, cp)
	}
	return res, nil
}

// script is the demo proper: form the ring, reconcile, leave, join.
func (d *demo) script(ctx context.Context) (res Results, err error) {
	o := d.opts
	d.phase = fmt.Sprintf("starting %d replicas", o.Replicas)
	d.scr.say("Starting %d example-operator replicas (ring %q, %d partitions, namespace %s, cache mode %s)...", o.Replicas, Ring, shard.DefaultPartitions, Namespace, o.CacheMode)
	t0 := time.Now()
	for range o.Replicas {
		if _, err := d.startReplica(ctx); err != nil {
			return res, err
		}
	}
	if err := d.until(ctx, time.Second, d.converged); err != nil {
		return res, err
	}
	d.scr.say("Ring formed in %s: %s", since(t0), d.claimSummary())

	d.phase = fmt.Sprintf("creating and reconciling %d Widgets", o.Objects)
	d.scr.say("Creating %d Widgets...", o.Objects)
	t0 = time.Now()
	created := make(chan error, 1)
	go func() { created <- createWidgets(ctx, d.dyn, Namespace, o.Objects) }() // waited for below, on every path
	var createErr error
	createDone := false
	err = d.until(ctx, time.Second, func() (bool, error) {
		if !createDone {
			select {
			case createErr = <-created:
				createDone = true
			default:
			}
		}
		if createErr != nil {
			return false, createErr
		}
		done, _ := widgetProgress(d.widgets.List())
		return createDone && done >= o.Objects, nil
	})
	if !createDone {
		<-created
	}
	if err != nil {
		return res, err
	}
	res.Converged = time.Since(t0)
	_, res.ReconciledBy = widgetProgress(d.widgets.List())
	d.scr.say("All %d Widgets reconciled (status.observedGeneration == metadata.generation) in %s; last reconciled by: %s",
		o.Objects, since(t0), countSummary(res.ReconciledBy))
	if err := d.reportCaches(ctx, &res); err != nil {
		return res, err
	}

	if err := d.leave(ctx, &res); err != nil {
		return res, err
	}
	if err := d.join(ctx, &res); err != nil {
		return res, err
	}
	// Not waiting for the queues to empty: new owners re-reconcile the
	// Widgets of partitions they took over (resync on activation), which
	// the last table shows as queue depth.
	d.phase = "done"
	d.refresh(ctx, true)
	d.scr.release()
	d.scr.say("Demo finished in %s: handoff gap %s, %d partitions moved on leave, %d on join.",
		since(d.start), res.HandoffGap.Round(time.Millisecond), res.Moved, res.JoinMoved)
	return res, nil
}

// leave SIGTERMs the first running replica and times the handoff of its
// partitions through the Lease watch.
func (d *demo) leave(ctx context.Context, res *Results) error {
	var leaver *replica
	for _, r := range d.fleet.list() {
		if r.running() {
			leaver = r
			break
		}
	}
	if leaver == nil {
		return errors.New("no replica is running to send SIGTERM to")
	}
	ring := d.ring()
	held := shard.NewPartitionSet(ring.Partitions)
	for _, m := range ring.Members {
		if m.Identity == leaver.identity {
			held = m.Claim()
		}
	}
	res.Moved = held.Len()
	d.phase = fmt.Sprintf("%s leaving", leaver.identity)
	d.scr.say("Sending SIGTERM to %s (it holds %d partitions); watching the Leases for the handoff...", leaver.identity, held.Len())

	// Handed off: the leaver's Lease is gone or claims nothing, and every
	// partition it held is claimed by a live active other member. A
	// replica activates a partition as soon as it observes the empty claim,
	// so this is the gap in which those keys had no owner.
	handedOff := func() bool {
		r := d.ring()
		claimedByOthers := shard.NewPartitionSet(r.Partitions)
		for _, m := range r.Members {
			if m.Identity == leaver.identity {
				if m.Partitions > 0 {
					return false
				}
				continue
			}
			if m.Live() && m.State == string(handoff.StateActive) && m.Problem == "" {
				claimedByOthers = claimedByOthers.Union(m.Claim())
			}
		}
		return held.Difference(claimedByOthers).IsEmpty()
	}
	d.stopping[leaver.identity] = true
	t0 := time.Now()
	fired := d.watch.arm(handedOff)
	_ = leaver.proc.Signal(syscall.SIGTERM)

	var activeAt time.Time
	err := d.until(ctx, 100*time.Millisecond, func() (bool, error) {
		if activeAt.IsZero() && d.allActive(leaver.identity) {
			activeAt = time.Now()
		}
		select {
		case <-fired:
		default:
			return false, nil
		}
		return !activeAt.IsZero() && !leaver.running(), nil
	})
	if err != nil {
		return err
	}
	res.HandoffGap = d.watch.firedAt().Sub(t0)
	res.ActiveAfter = activeAt.Sub(t0)
	if leaver.exitStatus() != "exited 0" {
		return d.replicaFailed(leaver, "did not leave cleanly")
	}
	takers := map[string]int{}
	for _, m := range d.ring().Members {
		if m.Identity != leaver.identity {
			if n := m.Claim().Intersect(held).Len(); n > 0 {
				takers[m.Identity] = n
			}
		}
	}
	d.scr.say("Handoff gap: %s from SIGTERM until the other replicas claimed all %d partitions of %s (Lease watch); all %d partitions active again after %s (metrics, polled every 100ms); %s %s after %s.",
		res.HandoffGap.Round(time.Millisecond), held.Len(), leaver.identity, d.ring().Partitions,
		res.ActiveAfter.Round(time.Millisecond), leaver.identity, leaver.exitStatus(), leaver.exitedAt().Sub(t0).Round(time.Millisecond))
	d.scr.say("Partitions moved: %d (%s).", res.Moved, countSummary(takers))
	return nil
}

// join starts the next replica and times until the ring has converged on it.
func (d *demo) join(ctx context.Context, res *Results) error {
	before := d.ring()
	r, err := d.startReplica(ctx)
	if err != nil {
		return err
	}
	d.phase = r.identity + " joining"
	d.scr.say("Starting %s...", r.identity)
	if err := d.until(ctx, 200*time.Millisecond, d.converged); err != nil {
		return err
	}
	res.JoinDuration = time.Since(r.proc.Started())
	var gained shard.PartitionSet
	for _, m := range d.ring().Members {
		if m.Identity == r.identity {
			gained = m.Claim()
		}
	}
	res.JoinMoved = gained.Len()
	from := map[string]int{}
	for _, m := range before.Members {
		if n := m.Claim().Intersect(gained).Len(); n > 0 {
			from[m.Identity] = n
		}
	}
	d.scr.say("%s joined: %d partitions moved to it (%s) in %s from process start (includes its cache sync); %s",
		r.identity, res.JoinMoved, countSummary(from), since(r.proc.Started()), d.claimSummary())
	return nil
}

// reportCaches waits (at most cacheSettle) until the object counts the
// running replicas publish in their Leases agree with the objects they
// watch, and says what each caches: with labels, each replica holds only
// its partitions' share and together they hold every object once; with
// full caches, each holds everything.
func (d *demo) reportCaches(ctx context.Context, res *Results) error {
	cms, err := d.client.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the ConfigMaps of namespace %s: %w", Namespace, err)
	}
	res.Watched = len(d.widgets.List()) + len(cms.Items)
	replicas := 0
	for _, r := range d.fleet.list() {
		if r.running() && !d.stopping[r.identity] {
			replicas++
		}
	}
	settled := func() (bool, error) {
		res.Cached = d.cachedObjects()
		return cachesAgree(d.opts.CacheMode, res.Cached, replicas, res.Watched), nil
	}
	d.phase = "waiting for the replicas' cache counts"
	wctx, cancel := context.WithTimeout(ctx, cacheSettle)
	defer cancel()
	// Counts that do not settle in time are reported as they are; a
	// replica that failed, or the demo's own end, stops the demo.
	if err := d.until(wctx, time.Second, settled); err != nil && (ctx.Err() != nil || wctx.Err() == nil) {
		return err
	}
	total := 0
	for _, n := range res.Cached {
		total += n
	}
	switch agree := cachesAgree(d.opts.CacheMode, res.Cached, replicas, res.Watched); {
	case d.opts.CacheMode == CacheLabels && agree:
		d.scr.say("Cached objects (Lease annotation %s): %s; together %d = each of the %d Widgets and ConfigMaps once: every replica holds only its partitions' share.",
			membership.AnnotationCachedObjects, countSummary(res.Cached), total, res.Watched)
	case agree:
		d.scr.say("Cached objects (Lease annotation %s): %s: every replica holds all %d Widgets and ConfigMaps (--cache-mode %s).",
			membership.AnnotationCachedObjects, countSummary(res.Cached), res.Watched, d.opts.CacheMode)
	default:
		d.scr.say("Cached objects (Lease annotation %s): %s of %d Widgets and ConfigMaps; the counts had not settled within %s.",
			membership.AnnotationCachedObjects, countSummary(res.Cached), res.Watched, cacheSettle)
	}
	return nil
}

// cachedObjects returns the object counts the running replicas publish in
// their Leases.
func (d *demo) cachedObjects() map[string]int {
	running := map[string]bool{}
	for _, r := range d.fleet.list() {
		running[r.identity] = r.running() && !d.stopping[r.identity]
	}
	out := map[string]int{}
	for _, m := range d.ring().Members {
		if running[m.Identity] && m.CachedObjects != nil {
			out[m.Identity] = *m.CachedObjects
		}
	}
	return out
}

// cachesAgree reports whether the counts the replicas published fit the
// objects there are: every one of the replicas published one; under labels
// they add up to every object once, each replica holding some; under full
// caches each holds them all.
func cachesAgree(mode string, cached map[string]int, replicas, watched int) bool {
	if len(cached) != replicas || replicas == 0 {
		return false
	}
	total := 0
	for _, n := range cached {
		if mode != CacheLabels && n != watched {
			return false
		}
		if n == 0 {
			return false
		}
		total += n
	}
	return mode != CacheLabels || total == watched
}

// keep leaves everything running until ctx is done, and says how to look.
func (d *demo) keep(ctx context.Context, cp *controlplane.ControlPlane) {
	kc := cp.KubeconfigPath()
	d.scr.say(`
The control plane and replicas keep running until Ctrl-C. Try:
  export KUBECONFIG=%[1]s
  kubectl get leases -n %[2]s -l %[3]s=%[4]s -L %[5]s,%[6]s
  kubectl get widgets -n %[2]s -o custom-columns=NAME:.metadata.name,RECONCILED-BY:.status.reconciledBy
  %[7]s status --kubeconfig %[1]s -n %[2]s
  %[7]s owner widgets %[8]s --kubeconfig %[1]s -n %[2]s
Replica logs: %[9]s`, kc, Namespace, lease.LabelRing, Ring, membership.LabelState, membership.LabelPartitions,
		d.opts.Prog, widgetName(0), filepath.Join(cp.Dir(), "replicas"))
	<-ctx.Done()
}

func (d *demo) startReplica(ctx context.Context) (*replica, error) {
	id := identityPrefix + strconv.Itoa(d.next)
	d.next++
	return d.fleet.start(ctx, id)
}

// until refreshes the table every second, and evaluates done on every
// Lease change and every poll, until it reports true, fails, or ctx ends.
// A replica that exits without being asked to fails the wait.
func (d *demo) until(ctx context.Context, poll time.Duration, done func() (bool, error)) error {
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	check := time.NewTicker(poll)
	defer check.Stop()
	d.refresh(ctx, true)
	for {
		for _, r := range d.fleet.list() {
			if !r.running() && !d.stopping[r.identity] {
				return d.replicaFailed(r, "exited unexpectedly")
			}
		}
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			d.refresh(ctx, true)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-refresh.C:
			d.refresh(ctx, false)
		case <-check.C:
		case <-d.watch.changes():
		}
	}
}

// replicaFailed prints the end of a replica's log and returns why it failed.
func (d *demo) replicaFailed(r *replica, what string) error {
	d.scr.release()
	fmt.Fprintf(d.opts.Stderr, "--- last lines of %s ---\n%s\n---\n", r.proc.LogPath(), r.proc.Tail(15))
	return fmt.Errorf("replica %s %s (%s) while %s; its log is %s", r.identity, what, r.exitStatus(), d.phase, r.proc.LogPath())
}

// ring reads the ring from the Lease cache.
func (d *demo) ring() ringstatus.Ring {
	objs := d.leases.List()
	ls := make([]coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			ls = append(ls, *l)
		}
	}
	for _, r := range ringstatus.Analyze(Namespace, ls, time.Now()) {
		if r.Name == Ring {
			return r
		}
	}
	return ringstatus.Empty(Namespace, Ring)
}

// converged reports whether the ring's members are exactly the running
// replicas, each claims exactly what the ring assigns it, and every
// replica's metrics say it reconciles all it claims.
func (d *demo) converged() (bool, error) {
	var want []string
	for _, r := range d.fleet.list() {
		if r.running() && !d.stopping[r.identity] {
			want = append(want, r.identity)
		}
	}
	r := d.ring()
	if r.Converged(want...) != nil {
		return false, nil
	}
	return d.allActive(""), nil
}

// allActive reports whether the running replicas other than except have all
// partitions active between them, as their metrics say.
func (d *demo) allActive(except string) bool {
	total := 0.0
	for _, r := range d.fleet.list() {
		if !r.running() || r.identity == except {
			continue
		}
		s, err := scrape(context.Background(), d.http, r.metricsAddr)
		if err != nil || s.active != s.claimed {
			return false
		}
		total += s.active
	}
	return int(total) == d.ring().Partitions
}

// refresh scrapes every replica and redraws the table.
//
// The columns about partitions come from one read of the ring's Leases (the
// informer's store, a state of the API server at one resourceVersion), so
// the table never shows two replicas on one partition unless the Leases
// said so at that moment: CLAIMED is the claim in each replica's Lease,
// HANDOFF the part of it that another live replica claims too (a handoff
// under way: the new owner claims first and activates only once the old
// one has released). The replicas' own metrics are scraped one after the
// other, at different moments, so only per-replica counters (reconciles,
// their rate, queue depth) come from them: partitions active per replica,
// scraped so, once showed one replica with all 271 and another with 90.
func (d *demo) refresh(ctx context.Context, force bool) {
	ring := d.ring()
	members := map[string]ringstatus.Member{}
	for _, m := range ring.Members {
		members[m.Identity] = m
	}
	parts := partitionColumns(ring)
	done, _ := widgetProgress(d.widgets.List())
	lines := []string{fmt.Sprintf("[%6s] %s — Widgets reconciled: %d/%d", since(d.start), d.phase, done, d.opts.Objects)}
	// Short enough not to wrap: a wrapped line would throw the in-place
	// redraw off by a row.
	lines = append(lines, "LEASE to HANDOFF: one read of the Leases; RECONCILES, PER SEC ("+rateWindow.String()+"), QUEUE: /metrics")
	rows := [][]string{{"REPLICA", "PROCESS", "LEASE", "CACHED", "CLAIMED", "HANDOFF", "RECONCILES", "PER SEC", "QUEUE"}}
	for _, r := range d.fleet.list() {
		st := d.stats[r.identity]
		if st == nil {
			st = &replicaStats{rate: rateMeter{window: rateWindow}}
			d.stats[r.identity] = st
		}
		process := r.exitStatus()
		if r.running() && d.stopping[r.identity] {
			process = "leaving"
		}
		leaseState, cached, claimed, handoff := "-", "-", "-", "-"
		if m, ok := members[r.identity]; ok {
			leaseState = m.State
			if !m.Live() {
				leaseState += " (expired)"
			}
			if m.CachedObjects != nil {
				cached = strconv.Itoa(*m.CachedObjects)
			}
			claimed, handoff = strconv.Itoa(parts[r.identity].claimed), strconv.Itoa(parts[r.identity].handoff)
		}
		total, rate, queue := "-", "-", "-"
		if r.running() {
			if s, err := scrape(ctx, d.http, r.metricsAddr); err == nil {
				st.rate.add(s.at, s.reconciles)
				st.last, st.scrapeOK = s, true
			} else {
				st.scrapeOK = false
			}
		}
		if st.scrapeOK || !st.last.at.IsZero() {
			total = strconv.Itoa(int(st.last.reconciles))
		}
		if r.running() && st.scrapeOK {
			rate = strconv.Itoa(int(st.rate.rate(time.Now()) + 0.5))
			queue = strconv.Itoa(int(st.last.queue))
		}
		rows = append(rows, []string{r.identity, process, leaseState, cached, claimed, handoff, total, rate, queue})
	}
	lines = append(lines, align(rows)...)
	d.scr.frame(lines, force)
}

// partitionCounts are a member's partition columns in the demo's table.
type partitionCounts struct {
	claimed int // partitions its Lease claims
	handoff int // of those, claimed by another live member too
}

// partitionColumns counts, from one read of the ring, each member's claimed
// partitions and those another live member claims too. An expired member's
// claim counts, but never as a handoff: the live claimants of its
// partitions no longer wait for it.
func partitionColumns(r ringstatus.Ring) map[string]partitionCounts {
	shared := shard.NewPartitionSet(r.Partitions, r.OverlappingPartitions...)
	out := map[string]partitionCounts{}
	for _, m := range r.Members {
		claim := m.Claim()
		c := partitionCounts{claimed: claim.Len()}
		if m.Live() && claim.Size() == shared.Size() {
			c.handoff = claim.Intersect(shared).Len()
		}
		out[m.Identity] = c
	}
	return out
}

// align lays rows out in columns two spaces apart.
func align(rows [][]string) []string {
	var width []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	out := make([]string, len(rows))
	for j, row := range rows {
		var b strings.Builder
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))+2))
			}
		}
		out[j] = b.String()
	}
	return out
}

// claimSummary says how many partitions each live member claims.
func (d *demo) claimSummary() string {
	counts := map[string]int{}
	for _, m := range d.ring().Members {
		if m.Live() {
			counts[m.Identity] = m.Partitions
		}
	}
	return "partitions claimed: " + countSummary(counts)
}

func countSummary(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		name := k
		if name == "" {
			name = "(nobody)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// leaseWatch evaluates an armed condition on every Lease change the
// informer delivers, so a handoff is timed at the event that completes it,
// not at the next poll.
type leaseWatch struct {
	mu     sync.Mutex
	cond   func() bool
	fired  chan struct{}
	at     time.Time
	notify chan struct{} // buffered 1: "something changed", for until
}

// arm sets cond and returns a channel closed once cond held after a change
// (or right away).
func (w *leaseWatch) arm(cond func() bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cond, w.fired, w.at = cond, make(chan struct{}), time.Time{}
	w.evaluate()
	return w.fired
}

func (w *leaseWatch) firedAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// changed is called by the informer for every Lease event.
func (w *leaseWatch) changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evaluate()
	select {
	case w.changesLocked() <- struct{}{}:
	default:
	}
}

func (w *leaseWatch) changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changesLocked()
}

func (w *leaseWatch) changesLocked() chan struct{} {
	if w.notify == nil {
		w.notify = make(chan struct{}, 1)
	}
	return w.notify
}

func (w *leaseWatch) evaluate() {
	if w.cond != nil && w.cond() {
		w.at = time.Now()
		close(w.fired)
		w.cond = nil
	}
}
