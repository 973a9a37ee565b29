package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/kshard/kshard/e2e/bench/benchkit"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The object contract shared with e2e/bench and e2e/bench/kshardop.
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
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		name          = flag.String("name", "bench", "leader election Lease name")
		namespace     = flag.String("namespace", "kshard-bench", "namespace of the objects and of the leader election Lease")
		identity      = flag.String("identity", "", "replica identity")
		latency       = flag.Duration("latency", 20*time.Millisecond, "simulated latency of each reconcile that has work to do")
		workers       = flag.Int("workers", 4, "concurrent reconciles")
		qps           = flag.Float64("qps", 1000, "client QPS")
		burst         = flag.Int("burst", 2000, "client burst")
		leaseDuration = flag.Duration("lease-duration", 10*time.Second, "Lease duration")
		renewDeadline = flag.Duration("renew-deadline", 6666*time.Millisecond, "renew deadline")
		renewPeriod   = flag.Duration("renew-period", 2*time.Second, "retry period")
		_             = flag.Duration("drain-grace", 0, "ignored (kshard only)")
		metricsAddr   = flag.String("metrics-addr", "127.0.0.1:0", "metrics address (port 0: the kernel picks one; the bound address is logged)")
		probeAddr     = flag.String("probe-addr", "127.0.0.1:0", "health probe address (port 0: the kernel picks one; the bound address is logged)")
		allNamespaces = flag.Bool("all-namespaces", false, "cache and reconcile the objects of every namespace (phase 7), not only --namespace")
		watchEpoch    = flag.Bool("watch-epoch", true, "watch the epoch ConfigMaps through a map function (phase 8); false lets --cache-mode=labels shard the ConfigMaps it reconciles, which that map function over their kind keeps whole (the chaos suite)")
		epochNS       = flag.String("epoch-namespace", "", "namespace of the one epoch ConfigMap every object reads (phase 8); default: each object's own namespace")
		kind          = flag.String("kind", "ConfigMap", "the kind of the benchmark objects: ConfigMap, or BenchObject (bench.kshard.io/v1, the custom resource of phases 7 and 10)")
		debugAddr     = flag.String("debug-addr", "0", "address of the bench debug server, whose /heap reports the live heap after a forced collection (\"0\": none)")
	)
	flag.Parse()
	if *identity == "" {
		return errors.New("--identity is required")
	}
	log.SetLogger(zap.New())
	// controller-runtime registers --kubeconfig itself.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := benchkit.AddToScheme(scheme); err != nil {
		return err
	}
	objects, err := benchkit.KindFor(*kind)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOptions(*namespace, *allNamespaces),
		LeaderElection:                true,
		LeaderElectionID:              *name,
		LeaderElectionNamespace:       *namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 leaseDuration,
		RenewDeadline:                 renewDeadline,
		RetryPeriod:                   renewPeriod,
		// The servers are bound below instead: controller-runtime does not
		// report the port it got for a metrics address with port 0.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	r := &reconciler{client: mgr.GetClient(), kind: objects, identity: *identity, latency: *latency, epochNS: *epochNS, readEpoch: *watchEpoch}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("bench").
		For(objects.NewObject(), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return isObject(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return isObject(e.ObjectNew) && r.dataChanged(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(e event.GenericEvent) bool { return isObject(e.Object) },
		}))
	if *watchEpoch {
		b = b.Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allObjects), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return r.isEpoch(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return r.isEpoch(e.ObjectNew) && epochChanged(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
	}
	err = b.WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).Complete(r)
	if err != nil {
		return err
	}
	stopServers, err := serve(*metricsAddr, *probeAddr)
	if err != nil {
		return err
	}
	defer stopServers()
	stopDebug, err := benchkit.ServeDebug(*debugAddr)
	if err != nil {
		return err
	}
	defer stopDebug()
	defer writeHeapProfile(*identity)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// serve binds the metrics server (controller-runtime's registry, as its own
// server would serve) and the probe server (/readyz always 200, as
// controller-runtime's with a ping check), and logs each bound address in
// the "serving" line a kshard manager logs, which the bench reads. The
// returned function shuts both down and waits for them.
func serve(metricsAddr, probeAddr string) (func(), error) {
	probes := http.NewServeMux()
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	var servers []*http.Server
	var wg sync.WaitGroup
	stop := func() {
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Shutdown(ctx)
			cancel()
		}
		wg.Wait()
	}
	for _, srv := range []struct {
		name, addr string
		h          http.Handler
	}{{"metrics", metricsAddr, mux}, {"health probe", probeAddr, probes}} {
		l, err := net.Listen("tcp", srv.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s server cannot listen on %q: %w", srv.name, srv.addr, err)
		}
		line, _ := json.Marshal(map[string]string{"msg": "serving", "server": srv.name, "address": l.Addr().String()})
		fmt.Fprintln(os.Stderr, string(line))
		s := &http.Server{Handler: srv.h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		wg.Go(func() { _ = s.Serve(l) })
	}
	return stop, nil
}

func isObject(o client.Object) bool { return o != nil && o.GetLabels()[labelKey] == labelObject }

// isEpoch reports whether o is the epoch ConfigMap this operator reads: with
// --epoch-namespace only that namespace's, whose change maps to every object.
func (r *reconciler) isEpoch(o client.Object) bool {
	return o != nil && o.GetLabels()[labelKey] == labelEpoch && (r.epochNS == "" || o.GetNamespace() == r.epochNS)
}

// dataChanged reports whether an object's data changed (an update that
// only annotates it needs no reconcile).
func (r *reconciler) dataChanged(a, b client.Object) bool {
	da, ok1 := r.kind.Data(a)
	db, ok2 := r.kind.Data(b)
	return !ok1 || !ok2 || !maps.Equal(da, db)
}

// epochChanged reports whether an epoch ConfigMap's data changed.
func epochChanged(a, b client.Object) bool {
	ca, ok1 := a.(*corev1.ConfigMap)
	cb, ok2 := b.(*corev1.ConfigMap)
	return !ok1 || !ok2 || !maps.Equal(ca.Data, cb.Data)
}

type reconciler struct {
	client   client.Client
	kind     benchkit.Kind
	identity string
	latency  time.Duration
	epochNS  string // --epoch-namespace; "": each object's own
	// readEpoch: the epoch is watched (--watch-epoch) and read. Without
	// the watch the reconciler must not read it either: under
	// --cache-mode=labels the epoch ConfigMap is in some other replica's
	// partition, and a sharded cache refuses reads of a partition it does
	// not hold (cache.ErrPartitionNotHeld).
	readEpoch bool
}

// allObjects maps the epoch ConfigMap to every benchmark object.
func (r *reconciler) allObjects(ctx context.Context, epoch client.Object) []reconcile.Request {
	list := r.kind.NewList()
	ns := epoch.GetNamespace()
	if r.epochNS != "" {
		ns = "" // one epoch for the objects of every namespace
	}
	if err := r.client.List(ctx, list, client.InNamespace(ns)); err != nil {
		log.FromContext(ctx).Error(err, "listing objects for a new epoch")
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		if o, ok := item.(client.Object); ok && isObject(o) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
		return nil
	})
	return reqs
}

// Reconcile records "<gen>/<epoch>" in the object's annotation after the
// simulated latency, unless it is already there.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.kind.NewObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	data, _ := r.kind.Data(obj)
	epoch := "0"
	if r.readEpoch {
		var ep corev1.ConfigMap
		epochNS := cmp.Or(r.epochNS, req.Namespace)
		switch err := r.client.Get(ctx, types.NamespacedName{Namespace: epochNS, Name: epochName}, &ep); {
		case err == nil:
			epoch = ep.Data[epochKey]
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, err
		}
	}
	want := data[genKey] + "/" + epoch
	if obj.GetAnnotations()[annObserved] == want {
		return reconcile.Result{}, nil
	}
	if r.latency > 0 {
		t := time.NewTimer(r.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return reconcile.Result{}, ctx.Err()
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annObserved: want, annReconciler: r.identity}}})
	err := r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	return reconcile.Result{}, client.IgnoreNotFound(err)
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
	goruntime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "heap profile:", err)
	}
}

// cacheOptions caches namespace, or every namespace.
func cacheOptions(namespace string, all bool) cache.Options {
	if all {
		return cache.Options{}
	}
	return cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
}
