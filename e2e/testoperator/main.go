package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/logging"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// labelKey=labelValue marks the ConfigMaps the operator reconciles; others
// are ignored. genKey is the data key the e2e writer bumps on every update.
// e2e/harness mirrors them.
const (
	labelKey   = "kshard-e2e"
	labelValue = "1"
	genKey     = "gen"
	// writtenKey is the annotation a --blind-write reconcile writes:
	// recorder.WriteValue of the generation it saw.
	writtenKey = "kshard-e2e/written"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testoperator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig    = flag.String("kubeconfig", "", "kubeconfig file; empty means in-cluster")
		ring          = flag.String("ring", "e2e", "ring name")
		namespace     = flag.String("namespace", "default", "namespace of the ring's Leases and of the ConfigMaps reconciled")
		identity      = flag.String("identity", os.Getenv(lease.EnvPodName), "replica identity (defaults to $POD_NAME)")
		incarnation   = flag.String("incarnation", "", "id of this run of the replica in the records (defaults to a random one)")
		recordDir     = flag.String("record-dir", "", "directory for this process's recorder file (required)")
		work          = flag.Duration("work", 20*time.Millisecond, "simulated time each reconcile takes")
		workers       = flag.Int("workers", 4, "concurrent reconciles")
		ignoreCancel  = flag.Bool("ignore-cancel", false, "run every reconcile's full --work even after its context is cancelled, like a reconciler that ignores cancellation")
		partitions    = flag.Int("partitions", 0, "ring partitions (0: the manager's default)")
		balance       = flag.Float64("balance", 0, "the manager's Balance: with --partition-by=namespace, place partitions by object counts")
		keepPlace     = flag.Bool("keep-place-on-leave", false, "the manager's KeepPlaceOnLeave: on SIGTERM this replica's partitions wait for its identity's next process")
		partitionBy   = flag.String("partition-by", "", "the manager's PartitionBy: \"key\" (default; ConfigMaps of --namespace) or \"namespace\" (ConfigMaps of every namespace, sharded cache)")
		cacheMode     = flag.String("cache-mode", "", "the manager's CacheMode: \"full\", \"labels\" (the gate-free sharded cache) or \"server\" (empty: the manager's default for --partition-by)")
		allNamespaces = flag.Bool("all-namespaces", false, "reconcile the ConfigMaps of every namespace, not only --namespace's (always so with --partition-by=namespace)")
		leaseDuration = flag.Duration("lease-duration", 4*time.Second, "Lease duration")
		renewPeriod   = flag.Duration("renew-period", 500*time.Millisecond, "Lease renew period")
		renewDeadline = flag.Duration("renew-deadline", 2600*time.Millisecond, "fence after failing to renew for this long")
		drainGrace    = flag.Duration("drain-grace", 2*time.Second, "how long reconciles of a revoked partition may run before cancellation")
		probeAddr     = flag.String("probe-addr", ":0", "health probe address (\"0\" disables)")
		metricsAddr   = flag.String("metrics-addr", ":0", "metrics address (\"0\" disables)")
		termPath      = flag.String("termination-message-path", "", "the container's termination message file (default: the manager's, /dev/termination-log)")
		bgWrite       = flag.Duration("background-write", 0, "test only: patch ConfigMap background-<identity> in --namespace every this interval from "+strconv.Itoa(backgroundWriters)+" goroutines with context.Background() (no reconcile context), logging when they are refused; 0: off")
		cacheReport   = flag.String("cache-report-addr", "0", "test only: serve GET /cache, the ConfigMaps this replica's cache holds (for a sharded cache, those of the partitions it holds), on this address, logged in a \""+kshardtest.CacheReportServer+"\" serving line (\"0\": none)")
		verbosity     = flag.Int("v", 0, "log verbosity: 0 logs ring changes, warnings and errors; 1 adds partition activations and drains, why claimed partitions are not active yet, cache segments and views, cache self-checks (logr V levels)")
		blindWrite    = flag.Bool("blind-write", false, "end every reconcile that did its work with a merge patch of the object's "+writtenKey+" annotation, without a resourceVersion precondition, recording each write just before it is sent")
	)
	flag.Parse()
	if *verbosity < 0 {
		return fmt.Errorf("--v must not be negative, got %d", *verbosity)
	}
	if *recordDir == "" {
		return errors.New("--record-dir is required")
	}
	if *identity == "" {
		return errors.New("--identity (or $POD_NAME) is required: the records name the replica")
	}
	if *incarnation == "" {
		*incarnation = randomID()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	rec, err := recorder.Open(*recordDir, recorder.Process{Replica: *identity, Incarnation: *incarnation})
	if err != nil {
		return err
	}
	defer rec.Close()

	if *blindWrite {
		// Inside the manager's fencing transport (which wraps this config
		// again in New): a write it refuses is never recorded as sent.
		cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return &sendRecorder{next: next, rec: rec} })
	}

	watchNamespace := *namespace
	if *allNamespaces || *partitionBy == string(shard.SchemeNamespace) {
		watchNamespace = "" // the objects are spread over namespaces
	}
	ctx := manager.SetupSignalHandler()
	mgr, err := manager.New(cfg, manager.Options{
		Ring:                   *ring,
		LeaseNamespace:         *namespace,
		Identity:               *identity,
		Partitions:             *partitions,
		LeaseDuration:          *leaseDuration,
		RenewPeriod:            *renewPeriod,
		RenewDeadline:          *renewDeadline,
		DrainGracePeriod:       *drainGrace,
		HealthProbeBindAddress: *probeAddr,
		MetricsBindAddress:     *metricsAddr,
		WatchNamespace:         watchNamespace,
		PartitionBy:            shard.Scheme(*partitionBy),
		CacheMode:              manager.CacheMode(*cacheMode),
		Balance:                *balance,
		KeepPlaceOnLeave:       *keepPlace,
		TerminationMessagePath: *termPath,
		Logger:                 logging.New(*verbosity),
	})
	if err != nil {
		return err
	}
	if *bgWrite > 0 {
		bw := &backgroundWriter{client: mgr.GetClient(), namespace: *namespace, name: backgroundName(*identity), interval: *bgWrite, log: mgr.GetLogger().WithName("background")}
		if err := mgr.Add(bw); err != nil {
			return err
		}
	}
	if *cacheReport != "0" {
		c := mgr.GetCache()
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return kshardtest.ServeCacheReport(ctx, *cacheReport, func(ctx context.Context) ([]kshardtest.CachedObject, error) {
				return cachedConfigMaps(ctx, c)
			})
		}))
		if err != nil {
			return err
		}
	}
	r := &reconciler{cache: mgr.GetCache(), rec: rec, work: *work, ignoreCancel: *ignoreCancel}
	if *blindWrite {
		r.client = mgr.GetClient()
	}
	b := controller.NewControllerManagedBy(recorder.RecordRing(mgr, rec)).
		For(&corev1.ConfigMap{}).
		Named("testoperator").
		WithEventFilter(controller.NewPredicateFuncs(func(o controller.Object) bool {
			return o.GetLabels()[labelKey] == labelValue
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers})
	if *blindWrite {
		// Only the writer's updates (data) trigger reconciles, not the
		// operator's own annotation writes: a stale write is then not
		// repaired by the event it causes, and stays visible in the final
		// state unless a later replay reconciles the key again.
		b = b.WithEventFilter(controller.Funcs{UpdateFunc: func(e controller.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*corev1.ConfigMap)
			n, okNew := e.ObjectNew.(*corev1.ConfigMap)
			return !okOld || !okNew || o.Data[genKey] != n.Data[genKey]
		}})
	}
	err = b.Complete(r)
	if err != nil {
		return err
	}
	// Start returns nil after a graceful leave (drained, empty claim
	// published, Lease deleted), which is what exit code 0 promises.
	return mgr.Start(ctx)
}

// cachedConfigMaps lists the ConfigMaps c holds, for --cache-report-addr.
func cachedConfigMaps(ctx context.Context, c *cache.Cache) ([]kshardtest.CachedObject, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, metav1.NamespaceAll); err != nil {
		return nil, err
	}
	out := make([]kshardtest.CachedObject, len(list.Items))
	for i, cm := range list.Items {
		out[i] = kshardtest.CachedObject{Key: shard.KeyOf(cm.Namespace, cm.Name), ResourceVersion: cm.ResourceVersion}
	}
	return out, nil
}

// reconciler simulates work on a ConfigMap and records its interval.
type reconciler struct {
	cache *cache.Cache
	rec   *recorder.Writer
	work  time.Duration
	// ignoreCancel keeps working after ctx ends, so that only a drain that
	// waits for the reconcile to return keeps its key safe.
	ignoreCancel bool
	// client, when set, makes every reconcile that did its work write the
	// object back blindly (--blind-write).
	client kubernetes.Interface
}

func (r *reconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	// Taken before the read, so the recorded interval covers everything
	// this reconcile did with the object.
	start := time.Now()
	var cm corev1.ConfigMap
	if err := r.cache.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			// The suite never deletes an object while replicas run:
			// the checker compares this read with the object's creation.
			return controller.Result{}, r.rec.NotFound(req.Key(), start)
		}
		return controller.Result{}, err
	}
	// A missing or malformed gen reads as 0: the checker only compares it
	// with generations the writer wrote.
	gen, _ := strconv.ParseInt(cm.Data[genKey], 10, 64)
	rc, err := r.rec.Started(req.Key(), gen, start)
	if err != nil {
		return controller.Result{}, err
	}
	timer := time.NewTimer(r.work)
	defer timer.Stop()
	done := ctx.Done()
	if r.ignoreCancel {
		done = nil // never ready: the work runs to its end
	}
	var failure error
	select {
	case <-timer.C:
	case <-done:
		failure = ctx.Err()
	}
	if failure == nil && r.client != nil {
		failure = r.write(ctx, rc, req, gen)
	}
	if err := r.rec.Ended(rc, failure); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{}, failure
}

// write patches the writtenKey annotation of req's object with no
// resourceVersion precondition, so the API server accepts it whatever was
// written since: only kshard's exclusion keeps it from landing stale. The
// sendRecorder records it just before it is sent.
func (r *reconciler) write(ctx context.Context, rc recorder.Reconcile, req controller.Request, gen int64) error {
	value := recorder.WriteValue(gen, r.rec.Process(), rc.Seq())
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{writtenKey: value}}})
	if err != nil {
		return err
	}
	ctx = context.WithValue(ctx, sendKey{}, send{seq: rc.Seq(), key: req.Key(), gen: gen, value: value})
	_, err = r.client.CoreV1().ConfigMaps(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// send describes a reconcile's write, carried in the request's context to
// the sendRecorder.
type send struct {
	seq   uint64
	key   string
	gen   int64
	value string
}

type sendKey struct{}

// sendRecorder records each write that carries a send just before passing
// it to the connection, with the reconcile's lease validity and whether it
// had passed by the monotonic clock.
type sendRecorder struct {
	next http.RoundTripper
	rec  *recorder.Writer
}

func (t *sendRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if s, ok := req.Context().Value(sendKey{}).(send); ok {
		until, hasValidity := controller.ValidUntil(req.Context())
		late := hasValidity && !time.Now().Before(until)
		if err := t.rec.Sent(s.seq, s.key, s.gen, s.value, until, late); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
