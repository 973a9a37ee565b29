package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kshard/kshard/cmd/example-operator/api/v1alpha1"
	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/manager"
)

type config struct {
	kubeconfig      string
	mgr             manager.Options
	workers         int
	workDelay       time.Duration
	reconcileTimout time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("example-operator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: example-operator [flags]\n\nReconciles Widgets (demo.kshard.io/v1alpha1) into ConfigMaps, sharded across replicas with kshard.\nEvery flag has a default suited to a StatefulSet with POD_NAME and POD_NAMESPACE from the downward API.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster service account")
	fs.StringVar(&c.mgr.Ring, "ring", "example-operator", "ring name: every replica of this operator uses the same one (Lease label kshard.io/ring)")
	fs.StringVar(&c.mgr.Namespace, "lease-namespace", "", "namespace of the ring's Leases (default $POD_NAMESPACE, then the service account's namespace, then \"default\")")
	fs.StringVar(&c.mgr.Identity, "identity", "", "this replica's unique, stable identity (default $POD_NAME, then the hostname)")
	fs.StringVar(&c.mgr.WatchNamespace, "watch-namespace", "", "reconcile Widgets of this namespace only (default: all namespaces)")
	fs.IntVar(&c.mgr.Partitions, "partitions", 271, "number of partitions keys hash into; all replicas must agree")
	fs.DurationVar(&c.mgr.LeaseDuration, "lease-duration", 10*time.Second, "how long a replica's Lease stays live without renewal; a crashed replica's partitions move after it")
	fs.DurationVar(&c.mgr.RenewPeriod, "renew-period", 2*time.Second, "how often a replica renews its Lease")
	fs.DurationVar(&c.mgr.RenewDeadline, "renew-deadline", 0, "how long a replica may fail to renew before it stops reconciling (default 2/3 of --lease-duration)")
	fs.DurationVar(&c.mgr.DrainGracePeriod, "drain-grace", 5*time.Second, "how long reconciles of a partition that moves away may finish before they are cancelled")
	fs.DurationVar(&c.mgr.GracefulShutdownTimeout, "shutdown-timeout", 30*time.Second, "bound on the graceful leave after SIGTERM (keep terminationGracePeriodSeconds above it)")
	fs.StringVar(&c.mgr.MetricsBindAddress, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; \"0\" disables it")
	fs.StringVar(&c.mgr.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; \"0\" disables it")
	fs.IntVar(&c.workers, "workers", 4, "concurrent reconciles per replica")
	fs.DurationVar(&c.workDelay, "work-delay", 0, "simulated latency added to each reconcile (for demos and benchmarks)")
	fs.DurationVar(&c.reconcileTimout, "reconcile-timeout", time.Minute, "bound on one reconcile")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q; see --help", fs.Args())
	}
	if c.workers < 1 {
		return nil, fmt.Errorf("--workers must be at least 1, got %d", c.workers)
	}
	if c.workDelay < 0 {
		return nil, fmt.Errorf("--work-delay must not be negative, got %s", c.workDelay)
	}
	return c, nil
}

// Main runs the operator with command-line args (without the program name)
// until SIGTERM or SIGINT, and returns the process exit code: 0 after a clean
// leave, 2 for bad flags, 1 for any other failure (printed on stderr).
func Main(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "example-operator: %v\n", err)
		return 2
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(stderr, "example-operator: %v\n", err)
		return 1
	}
	return 0
}

func run(c *config) error {
	restCfg, err := loadConfig(c.kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c.mgr.Scheme = scheme
	mgr, err := manager.New(restCfg, c.mgr)
	if err != nil {
		return err
	}
	widgets, err := widgetClient(restCfg, scheme)
	if err != nil {
		return err
	}
	r := &widgetReconciler{cache: mgr.GetCache(), client: mgr.GetClient(), widgets: widgets, identity: mgr.Identity(), workDelay: c.workDelay}
	err = controller.NewControllerManagedBy(mgr).
		Named("widget").
		For(&v1alpha1.Widget{}, controller.GenerationChangedPredicate{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: c.workers, ReconcileTimeout: c.reconcileTimout}).
		Complete(r)
	if err != nil {
		return err
	}
	return mgr.Start(manager.SetupSignalHandler())
}

// loadConfig follows kubectl's rules: --kubeconfig, $KUBECONFIG,
// ~/.kube/config, then the in-cluster service account.
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
		}
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w (pass --kubeconfig, set KUBECONFIG, or run in a cluster)", err)
	}
	return cfg, nil
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
