package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/logging"
	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/shard"
)

// Exit codes of Main.
const (
	exitOK    = 0
	exitError = 1 // the operator could not start or failed while running
	exitUsage = 2 // bad command line
)

type config struct {
	kubeconfig       string
	mgr              manager.Options
	workers          int
	workDelay        time.Duration
	reconcileTimeout time.Duration
	qps              float64
	burst            int
	apiServerWait    time.Duration
	installCRD       bool
	verbosity        int
}

// newFlagSet binds every flag to c. Parse errors are returned, not printed:
// Main prints them as one line.
func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("example-operator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; without it $KUBECONFIG, then the in-cluster service account, then ~/.kube/config (manager.GetConfig's order)")
	fs.StringVar(&c.mgr.Ring, "ring", "example-operator", "ring name: every replica of this operator uses the same one (Lease label kshard.io/ring)")
	fs.StringVar(&c.mgr.LeaseNamespace, "lease-namespace", "", "namespace of the ring's Leases (default $POD_NAMESPACE, then the service account's namespace, then \"default\")")
	fs.StringVar(&c.mgr.Identity, "identity", "", "this replica's unique, stable identity (default $POD_NAME, then the hostname)")
	fs.StringVar(&c.mgr.WatchNamespace, "watch-namespace", "", "reconcile Widgets of this namespace only (default: all namespaces)")
	fs.IntVar(&c.mgr.Partitions, "partitions", 271, "number of partitions keys hash into; all replicas must agree")
	fs.StringVar((*string)(&c.mgr.PartitionBy), "partition-by", "key", "how objects map to partitions: \"key\" (namespace/name), or \"namespace\" (the API server's hash of the namespace: each replica caches only its namespaces, with Kubernetes 1.36 sharded list/watch where the server has it); all replicas must agree")
	fs.StringVar((*string)(&c.mgr.CacheMode), "cache-mode", "", "how each replica caches Widgets and ConfigMaps: \"full\" (every object on every replica), \"labels\" (only its partitions' objects, selected by a partition label it writes once per object: any Kubernetes version, no feature gate; needs RBAC patch on both kinds) or \"server\" (Kubernetes 1.36 sharded list/watch, --partition-by=namespace only); replicas of one ring may differ, so a rolling update changes it (default \"full\" with --partition-by=key, \"server\" with namespace)")
	fs.Float64Var(&c.mgr.LabelQPS, "label-qps", 0, "with --cache-mode=labels, the partition-label patches a replica sends per second per kind at most (default 200)")
	fs.DurationVar(&c.mgr.CacheCheckInterval, "cache-check-interval", 0, "with --cache-mode=labels, how often each kind's cache checks that it holds every object of the partitions it reports synced (a paged metadata LIST of its share); an object missing is logged, counted in kshard_cache_missing_objects and fails /readyz until found again; negative turns it off (default 5m)")
	fs.Float64Var(&c.mgr.Balance, "balance", 0, "with --partition-by=namespace, place partitions by the objects they hold: no replica holds more than this fraction above the mean (0.05: 5 %) where a move can help; 0 places by number; all replicas must agree")
	fs.DurationVar(&c.mgr.LeaseDuration, "lease-duration", shard.DefaultLeaseDuration, "how long a replica's Lease stays live without renewal; a crashed replica's partitions move after it")
	fs.DurationVar(&c.mgr.RenewPeriod, "renew-period", 0, "how often a replica renews its Lease; must be below --renew-deadline (default --lease-duration/5, at most half of --renew-deadline: 2s with the default --lease-duration)")
	fs.DurationVar(&c.mgr.RenewDeadline, "renew-deadline", 0, "how long a replica may fail to renew before it stops reconciling; must be below --lease-duration (default 2/3 of --lease-duration)")
	fs.DurationVar(&c.mgr.DrainGracePeriod, "drain-grace", shard.DefaultDrainGracePeriod, "how long reconciles of a partition that moves away may finish before they are cancelled")
	fs.DurationVar(&c.mgr.GracefulShutdownTimeout, "shutdown-timeout", shard.DefaultGracefulShutdownTimeout, "bound on the graceful leave after SIGTERM (keep terminationGracePeriodSeconds above it)")
	fs.BoolVar(&c.mgr.KeepPlaceOnLeave, "keep-place-on-leave", false, "on SIGTERM keep this replica's partitions placed on it for its identity's next process (a rolling update) instead of moving them to peers and back; they wait unreconciled while it restarts, at most --lease-duration after it stopped if none returns")
	fs.StringVar(&c.mgr.MetricsBindAddress, "metrics-bind-address", ":8443", "address of the Prometheus /metrics endpoint; \"0\" disables it")
	fs.BoolVar(&c.mgr.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes for get on the non-resource URL /metrics (SubjectAccessReview; RBAC create on both reviews for this replica); false serves plain HTTP to anyone who reaches the port")
	fs.StringVar(&c.mgr.MetricsCertFile, "metrics-cert-file", "", "PEM certificate of the secure metrics server, re-read when it changes, with --metrics-key-file (default: a self-signed certificate made at start)")
	fs.StringVar(&c.mgr.MetricsKeyFile, "metrics-key-file", "", "PEM private key of --metrics-cert-file")
	fs.IntVar(&c.verbosity, "v", 0, "log verbosity: 0 logs ring changes, warnings and errors; 1 adds retried API calls, partition activations and drains, cache self-checks and refused metrics scrapes (logr V levels; JSON lines with ISO 8601 timestamps)")
	fs.StringVar(&c.mgr.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; \"0\" disables it")
	fs.Float64Var(&c.qps, "kube-api-qps", float64(manager.DefaultQPS), "sustained requests per second to the API server (client-go's own default of 5 caps a replica at about 5 reconciles/s)")
	fs.IntVar(&c.burst, "kube-api-burst", manager.DefaultBurst, "requests that may exceed --kube-api-qps in a burst")
	fs.DurationVar(&c.apiServerWait, "api-server-wait", time.Minute, "how long to retry, with backoff, reaching the API server at start before exiting with an error; 0 retries forever")
	fs.BoolVar(&c.installCRD, "install-crd", false, "create the Widget CustomResourceDefinition if the API server does not serve it (needs RBAC to create CRDs); without it a missing CRD is an error")
	fs.IntVar(&c.workers, "workers", 4, "concurrent reconciles per replica")
	fs.DurationVar(&c.workDelay, "work-delay", 0, "simulated latency added to each reconcile (for demos and benchmarks)")
	fs.DurationVar(&c.reconcileTimeout, "reconcile-timeout", time.Minute, "bound on one reconcile")
	return fs
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: example-operator [flags]\n\nReconciles Widgets (demo.kshard.io/v1alpha1) into ConfigMaps, sharded across replicas with kshard.\nEvery flag has a default suited to a StatefulSet with POD_NAME and POD_NAMESPACE from the downward API.\n\nExit codes: 0 after a clean leave (SIGTERM or SIGINT), 1 when it cannot start or fails, 2 for a bad command line.\n\nFlags:\n")
	printFlags(fs, w)
}

// printFlags lists fs's flags as the docs write them, with two dashes
// (--name), which the flag package accepts as well as one: its own
// PrintDefaults writes -name.
func printFlags(fs *flag.FlagSet, w io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if !isZeroDefault(f) {
			if _, ok := f.Value.(flag.Getter).Get().(string); ok {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
}

// isZeroDefault reports whether f's default is its type's zero value, which
// the help leaves unsaid (as PrintDefaults does).
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return true
	}
	return false
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := newFlagSet(c)
	if err := fs.Parse(args); err != nil {
		return nil, explainFlagError(fs, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: this command takes flags only", fs.Args())
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.mgr.QPS, c.mgr.Burst = float32(c.qps), c.burst
	return c, nil
}

// validate checks what the flags can get wrong, naming the flags; the
// manager validates the rest again.
func (c *config) validate() error {
	switch {
	case c.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", c.workers)
	case c.workDelay < 0:
		return fmt.Errorf("--work-delay must not be negative, got %s", c.workDelay)
	case c.reconcileTimeout <= 0:
		return fmt.Errorf("--reconcile-timeout must be positive, got %s", c.reconcileTimeout)
	case c.apiServerWait < 0:
		return fmt.Errorf("--api-server-wait must not be negative, got %s (0 retries forever)", c.apiServerWait)
	case !(c.qps > 0) || c.qps > 1e6:
		return fmt.Errorf("--kube-api-qps must be a positive number of requests per second, got %v", c.qps)
	case c.verbosity < 0:
		return fmt.Errorf("--v must not be negative, got %d", c.verbosity)
	case (c.mgr.MetricsCertFile == "") != (c.mgr.MetricsKeyFile == ""):
		return fmt.Errorf("--metrics-cert-file and --metrics-key-file go together: give both, or neither for a self-signed certificate")
	case c.mgr.MetricsCertFile != "" && !c.mgr.MetricsSecure:
		return fmt.Errorf("--metrics-cert-file needs --metrics-secure: drop --metrics-secure=false, or the certificate flags")
	case c.burst < 1:
		return fmt.Errorf("--kube-api-burst must be at least 1, got %d", c.burst)
	case c.mgr.Partitions < 1:
		return fmt.Errorf("--partitions must be at least 1, got %d", c.mgr.Partitions)
	case c.mgr.PartitionBy != shard.SchemeKey && c.mgr.PartitionBy != shard.SchemeNamespace:
		return fmt.Errorf("--partition-by must be \"key\" or \"namespace\", got %q", c.mgr.PartitionBy)
	case c.mgr.CacheMode != "" && c.mgr.CacheMode != manager.CacheFull && c.mgr.CacheMode != manager.CacheLabels && c.mgr.CacheMode != manager.CacheServer:
		return fmt.Errorf("--cache-mode must be \"full\", \"labels\" or \"server\", got %q", c.mgr.CacheMode)
	case c.mgr.CacheMode == manager.CacheServer && c.mgr.PartitionBy != shard.SchemeNamespace:
		return fmt.Errorf("--cache-mode=server needs --partition-by=namespace: the API server shards lists by namespace hash; use --cache-mode=labels for a sharded cache under --partition-by=%s", c.mgr.PartitionBy)
	case !(c.mgr.LabelQPS >= 0) || c.mgr.LabelQPS > 1e6:
		return fmt.Errorf("--label-qps must be a positive number of patches per second (0 for the default), got %v", c.mgr.LabelQPS)
	case c.mgr.LabelQPS > 0 && c.mgr.CacheMode != manager.CacheLabels:
		return fmt.Errorf("--label-qps applies only with --cache-mode=labels; drop it or add --cache-mode=labels")
	case c.mgr.CacheCheckInterval != 0 && c.mgr.CacheMode != manager.CacheLabels:
		return fmt.Errorf("--cache-check-interval applies only with --cache-mode=labels; drop it or add --cache-mode=labels")
	case c.mgr.CacheCheckInterval > 0 && c.mgr.CacheCheckInterval < time.Second:
		return fmt.Errorf("--cache-check-interval must be at least 1s (each check lists the replica's share), 0 for the default or negative to turn the check off, got %v", c.mgr.CacheCheckInterval)
	case c.mgr.PartitionBy == shard.SchemeNamespace && c.mgr.WatchNamespace != "":
		return fmt.Errorf("--partition-by=namespace with --watch-namespace=%s puts every Widget in one partition, so one replica would reconcile them all; drop --watch-namespace or use --partition-by=key", c.mgr.WatchNamespace)
	case c.mgr.LeaseDuration <= 0 || c.mgr.RenewPeriod < 0 || c.mgr.RenewDeadline < 0:
		return fmt.Errorf("--lease-duration (%s) must be positive, --renew-period (%s) and --renew-deadline (%s) positive or 0 for the default",
			c.mgr.LeaseDuration, c.mgr.RenewPeriod, c.mgr.RenewDeadline)
	}
	timing := shard.Timing{LeaseDuration: c.mgr.LeaseDuration, RenewDeadline: c.mgr.RenewDeadline, RenewPeriod: c.mgr.RenewPeriod,
		DrainGracePeriod: c.mgr.DrainGracePeriod, GracefulShutdownTimeout: c.mgr.GracefulShutdownTimeout}
	flags := shard.TimingNames{LeaseDuration: "--lease-duration", RenewDeadline: "--renew-deadline", RenewPeriod: "--renew-period", RenewTimeout: "the renew timeout",
		DrainGracePeriod: "--drain-grace", GracefulShutdownTimeout: "--shutdown-timeout"}
	return timing.ValidateNamed(flags)
}

// invalidFlagValue matches the flag package's message for a value its flag
// cannot parse.
var invalidFlagValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:]+): `)

// explainFlagError turns the flag package's error into one line that says
// what to do, naming flags with two dashes as the help and the docs do.
func explainFlagError(fs *flag.FlagSet, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	// "flag provided but not defined: -frob"
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return fmt.Errorf("unknown flag --%s; run example-operator --help for the flags", strings.TrimLeft(name, "-"))
	}
	// "flag needs an argument: -ring"
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return fmt.Errorf("flag --%s needs a value; run example-operator --help for the flags", strings.TrimLeft(name, "-"))
	}
	// "invalid value "abc" for flag -lease-duration: parse error", and for
	// a bool "invalid boolean value "x" for -install-crd: parse error".
	if m := invalidFlagValue.FindStringSubmatch(msg); m != nil {
		value, name := m[1], m[2]
		want := "see example-operator --help"
		if f := fs.Lookup(name); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				switch g.Get().(type) {
				case time.Duration:
					want = "want a duration such as 10s, 1m30s or 500ms"
				case int, float64:
					want = "want a number"
				case bool:
					want = "want true or false"
				}
			}
		}
		return fmt.Errorf("invalid value %s for --%s: %s", value, name, want)
	}
	return fmt.Errorf("%s; run example-operator --help for the flags", msg)
}

// Main runs the operator with command-line args (without the program name)
// until SIGTERM or SIGINT, and returns the process exit code: 0 after a clean
// leave, 2 for a bad command line, 1 for any other failure. Every failure is
// reported as one line on stderr saying what is wrong and what to do; logs
// (JSON lines) also go to stderr.
func Main(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(newFlagSet(&config{}), stderr)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "example-operator: %s\n", oneLine(err))
		return exitUsage
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(stderr, "example-operator: %s\n", oneLine(err))
		return exitError
	}
	return exitOK
}

// oneLine flattens joined or wrapped multi-line errors for the final message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

func run(c *config) error {
	ctx := manager.SetupSignalHandler()
	restCfg, err := loadConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	// The flags decide the client rate limits, through the manager's
	// options, which apply only where the rest config leaves them zero.
	restCfg.QPS, restCfg.Burst = 0, 0
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c.mgr.Scheme = scheme
	c.mgr.Logger = logging.New(c.verbosity)
	mgr, err := manager.New(restCfg, c.mgr)
	if err != nil {
		return err
	}
	log := mgr.GetLogger()
	// client-go reports some failures through klog as well as returning
	// them; keep them, but as structured lines like every other log line.
	klog.SetLogger(log.WithName("client-go"))

	if err := preflight(ctx, mgr.GetConfig(), c, log); err != nil {
		if errors.Is(err, errStopped) {
			return nil
		}
		return err
	}
	widgets, err := widgetClient(mgr.GetConfig(), scheme)
	if err != nil {
		return err
	}
	r := &widgetReconciler{cache: mgr.GetCache(), client: mgr.GetClient(), widgets: widgets, identity: mgr.Identity(), workDelay: c.workDelay}
	err = controller.NewControllerManagedBy(mgr).
		Named("widget").
		For(&v1alpha1.Widget{}, controller.GenerationChangedPredicate{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: c.workers, ReconcileTimeout: c.reconcileTimeout}).
		Complete(r)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// loadConfig finds the API server as the library documents it
// (manager.LoadConfig): --kubeconfig when given; otherwise $KUBECONFIG,
// then the in-cluster service account, then ~/.kube/config, so that a
// kubeconfig left in an image does not override the pod's own identity. A
// --kubeconfig that cannot be used is named as the flag.
func loadConfig(path string) (*rest.Config, error) {
	if path != "" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--kubeconfig %s does not exist: pass the path of a kubeconfig file, or leave the flag out to use $KUBECONFIG, the in-cluster service account or ~/.kube/config", path)
		}
	}
	cfg, err := manager.LoadConfig(path)
	switch {
	case err == nil:
		return cfg, nil
	case path != "":
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // LoadConfig's error names the file; so does this one
		}
		return nil, fmt.Errorf("cannot use --kubeconfig %s: %w: fix the file or pass another one", path, err)
	default:
		return nil, err
	}
}

// widgetClient is a REST client for demo.kshard.io/v1alpha1, for status
// patches (reads come from the manager's cache).
func widgetClient(cfg *rest.Config, scheme *runtime.Scheme) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// errStopped: a signal arrived before the operator started; nothing to do.
var errStopped = errors.New("stopped before the operator started")
