package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/e2e/bench/benchkit"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// The object contract shared with e2e/bench and e2e/bench/baseline (each
// module keeps its own copy: the baseline must not import kshard).
const (
	labelKey      = "kshard-bench"
	labelObject   = "obj"
	labelEpoch    = "epoch"
	epochName     = "bench-epoch"
	genKey        = "gen"
	epochKey      = "epoch"
	annObserved   = "bench.kshard.io/observed"
	annReconciler = "bench.kshard.io/by"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kshardop:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig    = flag.String("kubeconfig", "", "kubeconfig file")
		name          = flag.String("name", "bench", "ring name")
		namespace     = flag.String("namespace", "kshard-bench", "namespace of the objects and of the ring's Leases")
		identity      = flag.String("identity", "", "replica identity")
		latency       = flag.Duration("latency", 20*time.Millisecond, "simulated latency of each reconcile that has work to do")
		workers       = flag.Int("workers", 4, "concurrent reconciles")
		qps           = flag.Float64("qps", 1000, "client QPS")
		burst         = flag.Int("burst", 2000, "client burst")
		leaseDuration = flag.Duration("lease-duration", 10*time.Second, "Lease duration")
		renewDeadline = flag.Duration("renew-deadline", 6666*time.Millisecond, "renew deadline")
		renewPeriod   = flag.Duration("renew-period", 2*time.Second, "renew period")
		drainGrace    = flag.Duration("drain-grace", 5*time.Second, "drain grace period")
		metricsAddr   = flag.String("metrics-addr", "127.0.0.1:0", "metrics address")
		probeAddr     = flag.String("probe-addr", "127.0.0.1:0", "health probe address")
		termPath      = flag.String("termination-message-path", "", "the container's termination message file (phase 6; default the manager's)")
		podNamespace  = flag.String("pod-namespace", "", "namespace of this replica's Pod (phase 6; default the manager's)")
		allNamespaces = flag.Bool("all-namespaces", false, "cache and reconcile the objects of every namespace (phase 7), not only --namespace")
		partitionBy   = flag.String("partition-by", "", "the manager's PartitionBy: key (default) or namespace (the sharded cache, phase 7)")
		partitions    = flag.Int("partitions", 0, "the ring's partition count (default the manager's; phase 9 uses 1021)")
		epochNS       = flag.String("epoch-namespace", "", "namespace of the one epoch ConfigMap every object reads (phase 8); default: each object's own namespace")
		balance       = flag.Float64("balance", 0, "the manager's Balance: with --partition-by=namespace, place partitions by object counts (phase 8)")
		sharedNS      = flag.String("shared-namespaces", "", "the manager's SharedNamespaces, comma-separated: namespaces every replica caches whole (phase 8: the epoch's)")
		recordDir     = flag.String("record-dir", "", "record every reconcile's interval and every partition activation and revoke in this directory, for the recorder's overlap check (phase 9)")
		kind          = flag.String("kind", "ConfigMap", "the kind of the benchmark objects: ConfigMap, or BenchObject (bench.kshard.io/v1, the custom resource of phases 7 and 10)")
		cacheMode     = flag.String("cache-mode", "", "the manager's CacheMode: full, labels (the gate-free sharded cache, phase 10) or server (default: the manager's for --partition-by)")
		labelQPS      = flag.Float64("label-qps", 0, "the manager's LabelQPS: partition-label patches per second per kind with --cache-mode=labels (default the manager's)")
		keepPlace     = flag.Bool("keep-place-on-leave", false, "the manager's KeepPlaceOnLeave: on SIGTERM this replica's partitions wait for its next process (phase 10's rolling restart)")
		debugAddr     = flag.String("debug-addr", "0", "address of the bench debug server, whose /heap reports the live heap after a forced collection (\"0\": none)")
	)
	flag.Parse()
	if *identity == "" {
		return errors.New("--identity is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := benchkit.AddToScheme(scheme); err != nil {
		return err
	}
	watch := *namespace
	if *allNamespaces {
		watch = ""
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme: scheme, CacheMode: manager.CacheMode(*cacheMode), LabelQPS: *labelQPS,
		Ring: *name, LeaseNamespace: *namespace, Identity: *identity, WatchNamespace: watch, PartitionBy: shard.Scheme(*partitionBy), Partitions: *partitions,
		LeaseDuration: *leaseDuration, RenewDeadline: *renewDeadline, RenewPeriod: *renewPeriod,
		DrainGracePeriod: *drainGrace, MetricsBindAddress: *metricsAddr, HealthProbeBindAddress: *probeAddr,
		TerminationMessagePath: *termPath, PodNamespace: *podNamespace, SharedNamespaces: splitList(*sharedNS), Balance: *balance,
		KeepPlaceOnLeave: *keepPlace,
	})
	if err != nil {
		return err
	}
	objects, err := kindFor(*kind, mgr.GetConfig(), mgr.GetClient(), scheme)
	if err != nil {
		return err
	}
	stopDebug, err := benchkit.ServeDebug(*debugAddr)
	if err != nil {
		return err
	}
	defer stopDebug()
	r := &reconciler{cache: mgr.GetCache(), kind: objects, identity: *identity, latency: *latency, epochNS: *epochNS}
	var built controller.Manager = mgr
	if *recordDir != "" {
		// The process's own incarnation in the records: a restarted
		// replica is another process to the checker.
		rec, err := recorder.Open(*recordDir, recorder.Process{Replica: *identity, Incarnation: randomID()})
		if err != nil {
			return err
		}
		defer rec.Close()
		r.rec, built = rec, recorder.RecordRing(mgr, rec)
	}
	err = controller.NewControllerManagedBy(built).
		Named("bench").
		For(objects.example, controller.Funcs{
			CreateFunc: func(e controller.CreateEvent) bool { return isObject(e.Object) },
			UpdateFunc: func(e controller.UpdateEvent) bool {
				return isObject(e.ObjectNew) && r.dataChanged(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(controller.DeleteEvent) bool { return false },
			GenericFunc: func(e controller.GenericEvent) bool { return isObject(e.Object) },
		}).
		Watches(&corev1.ConfigMap{}, controller.EnqueueRequestsFromMapFunc(r.allObjects), controller.Funcs{
			CreateFunc: func(e controller.CreateEvent) bool { return r.isEpoch(e.Object) },
			UpdateFunc: func(e controller.UpdateEvent) bool {
				return r.isEpoch(e.ObjectNew) && epochChanged(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(controller.DeleteEvent) bool { return false },
			GenericFunc: func(controller.GenericEvent) bool { return false },
		}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(r)
	if err != nil {
		return err
	}
	defer writeHeapProfile(*identity)
	return mgr.Start(manager.SetupSignalHandler())
}

func isObject(o controller.Object) bool { return o != nil && o.GetLabels()[labelKey] == labelObject }

// isEpoch reports whether o is the epoch ConfigMap this operator reads: with
// --epoch-namespace only that namespace's, whose change maps to every object.
func (r *reconciler) isEpoch(o controller.Object) bool {
	return o != nil && o.GetLabels()[labelKey] == labelEpoch && (r.epochNS == "" || o.GetNamespace() == r.epochNS)
}

// dataChanged reports whether an object's data changed (an update that
// only relabels or annotates it needs no reconcile).
func (r *reconciler) dataChanged(a, b controller.Object) bool {
	da, ok1 := r.kind.data(a)
	db, ok2 := r.kind.data(b)
	return !ok1 || !ok2 || !maps.Equal(da, db)
}

// epochChanged reports whether an epoch ConfigMap's data changed.
func epochChanged(a, b controller.Object) bool {
	ca, ok1 := a.(*corev1.ConfigMap)
	cb, ok2 := b.(*corev1.ConfigMap)
	return !ok1 || !ok2 || !maps.Equal(ca.Data, cb.Data)
}

type reconciler struct {
	cache    *cache.Cache
	kind     objectKind
	identity string
	latency  time.Duration
	epochNS  string           // --epoch-namespace; "": each object's own
	rec      *recorder.Writer // --record-dir; nil records nothing
}

// splitList splits a comma-separated flag value; "" is no element.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// allObjects maps the epoch ConfigMap to every benchmark object.
func (r *reconciler) allObjects(ctx context.Context, epoch controller.Object) []controller.Request {
	list := r.kind.newList()
	ns := epoch.GetNamespace()
	if r.epochNS != "" {
		ns = "" // one epoch for the objects of every namespace (held ones, when sharded)
	}
	if err := r.cache.List(ctx, list, ns); err != nil {
		controller.LoggerFrom(ctx).Error(err, "listing objects for a new epoch")
		return nil
	}
	var reqs []controller.Request
	_ = meta.EachListItem(list, func(item k8sruntime.Object) error {
		if o, ok := item.(controller.Object); ok && isObject(o) {
			reqs = append(reqs, controller.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
		return nil
	})
	return reqs
}

// Reconcile records "<gen>/<epoch>" in the object's annotation after the
// simulated latency, unless it is already there.
func (r *reconciler) Reconcile(ctx context.Context, req controller.Request) (res controller.Result, err error) {
	// Taken before the read, so a recorded interval covers everything the
	// reconcile did with the object.
	start := time.Now()
	obj := r.kind.newObject()
	if err := r.cache.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return controller.Result{}, nil
		}
		return controller.Result{}, err
	}
	data, _ := r.kind.data(obj)
	if r.rec != nil {
		gen, _ := strconv.ParseInt(data[genKey], 10, 64)
		rc, err := r.rec.Started(req.Key(), gen, start)
		if err != nil {
			return controller.Result{}, err
		}
		defer func() {
			if recErr := r.rec.Ended(rc, err); recErr != nil && err == nil {
				err = recErr
			}
		}()
	}
	epoch := "0"
	var ep corev1.ConfigMap
	epochNS := cmp.Or(r.epochNS, req.Namespace)
	switch err := r.cache.Get(ctx, types.NamespacedName{Namespace: epochNS, Name: epochName}, &ep); {
	case err == nil:
		epoch = ep.Data[epochKey]
	case !apierrors.IsNotFound(err):
		return controller.Result{}, err
	}
	want := data[genKey] + "/" + epoch
	if obj.GetAnnotations()[annObserved] == want {
		return controller.Result{}, nil
	}
	if r.latency > 0 {
		t := time.NewTimer(r.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return controller.Result{}, ctx.Err()
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annObserved: want, annReconciler: r.identity}}})
	err = r.kind.patch(ctx, req.Namespace, req.Name, patch)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	return controller.Result{}, err
}

// writeHeapProfile writes a heap profile to $KSHARD_BENCH_HEAP_PROFILE/<binary>-<identity>.heap
// when that variable is set, for comparing what the two operators retain.
func writeHeapProfile(identity string) {
	dir := os.Getenv("KSHARD_BENCH_HEAP_PROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, filepath.Base(os.Args[0])+"-"+identity+".heap"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "heap profile:", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "heap profile:", err)
	}
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
