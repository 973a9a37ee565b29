package manager

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
)

// Options configure a Manager. Every field has a default, applied in
// applyDefaults; the zero value runs a replica of a ring named after the
// binary, in the pod's namespace, identified by the pod's name.
type Options struct {
	// Scheme maps Go types to API kinds for the cache and controllers.
	// Defaults to client-go's scheme (all built-in types); add your custom
	// resources to a copy of it.
	Scheme *runtime.Scheme

	// Ring names the ring: every replica of one operator uses the same name,
	// and its Leases carry the label kshard.io/ring=<Ring>. Defaults to the
	// binary's name.
	Ring string
	// LeaseNamespace holds the ring's Leases (not the objects the
	// controllers watch: that is WatchNamespace). It must exist: a replica
	// cannot create its Lease in a missing namespace, and /readyz says so.
	// Defaults to $POD_NAMESPACE, then the service account's namespace file,
	// then "default".
	LeaseNamespace string
	// Namespace is the former name of LeaseNamespace, used only when
	// LeaseNamespace is empty; setting both to different values is an error.
	//
	// Deprecated: use LeaseNamespace. "Namespace" read like the namespace
	// the cache watches, which is WatchNamespace.
	Namespace string
	// Identity names this replica; it must be unique in the ring and stable
	// across restarts (a StatefulSet pod name): a DNS-1123 subdomain that
	// keeps the Lease name <Ring>-<Identity> valid (lease.ValidateIdentity).
	// Defaults to $POD_NAME, then the hostname.
	Identity string

	// Partitions is the number of partitions P keys hash into; every replica
	// of a ring must agree. Defaults to 271.
	Partitions int
	// Load is the bounded-load factor: no replica owns more than
	// ceil(Load × P / members) partitions. Defaults to 1.05.
	Load float64

	// LeaseDuration, RenewPeriod, RenewDeadline, DrainGracePeriod and
	// GracefulShutdownTimeout are the replica's timings; shard.Timing
	// holds their rules and defaults, shared by every runtime of a ring.
	//
	// LeaseDuration is how long a replica's Lease stays live without renewal,
	// as observed by its peers; a crashed replica's partitions move after it.
	// Defaults to shard.DefaultLeaseDuration (10s).
	LeaseDuration time.Duration
	// RenewPeriod is how often a replica renews its Lease. Defaults to
	// LeaseDuration/5, at most RenewDeadline/2 (2s with the other defaults).
	RenewPeriod time.Duration
	// RenewDeadline is how long a replica keeps reconciling without a
	// successful renewal before it fences itself (stops every reconcile).
	// Must be below LeaseDuration. Defaults to 2/3 of LeaseDuration.
	RenewDeadline time.Duration

	// DrainGracePeriod is how long in-flight reconciles of a partition that
	// moves away may run before their contexts are cancelled. Defaults to
	// shard.DefaultDrainGracePeriod (5s).
	DrainGracePeriod time.Duration
	// GracefulShutdownTimeout bounds the leave on SIGTERM: draining,
	// handing over, publishing an empty claim and deleting the Lease; a
	// third of it, at most LeaseDuration, goes to handovers to a sharded
	// cache (shard.Timing.HandoverTimeout). Defaults to
	// shard.DefaultGracefulShutdownTimeout (30s).
	GracefulShutdownTimeout time.Duration
	// KeepPlaceOnLeave: on SIGTERM an active replica keeps its place in the
	// ring for the next process of its identity (a StatefulSet's rolling
	// update) instead of handing its partitions to its peers, who would
	// hand them back once it returns. Its partitions are then not
	// reconciled while it restarts (events are not lost: the next process
	// lists and replays them), for at most LeaseDuration after it stopped
	// if none returns (a scale-down), after which they move as usual. With
	// a sharded cache this keeps every replica's memory at its own share
	// through a rolling update, where peers otherwise cache the leaver's
	// share while it is away (handoff.Config.KeepPlaceOnLeave). Off by
	// default. Replicas of one ring may differ in it.
	KeepPlaceOnLeave bool

	// MetricsBindAddress serves Prometheus metrics on /metrics. "0"
	// disables it. Defaults to ":8080".
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS, and only to callers the API
	// server vouches for: their bearer token passes a TokenReview
	// (authentication.k8s.io/v1) and a SubjectAccessReview
	// (authorization.k8s.io/v1) allows them verb get on the non-resource
	// URL /metrics, as controller-runtime's metrics filters do. The
	// replica's service account needs create on tokenreviews and
	// subjectaccessreviews; a scraper needs a ClusterRole with
	// nonResourceURLs ["/metrics"] and verbs ["get"]. Answers are kept a
	// minute (refusals 10s), so a scrape rarely costs an API call. Off by
	// default: plain HTTP, readable by anyone who reaches the port.
	MetricsSecure bool
	// MetricsCertFile and MetricsKeyFile are the PEM certificate and key
	// of the secure metrics server, re-read when the files change. Both or
	// neither; without them a self-signed certificate is generated at
	// start (scrapers then skip verification). Used only with
	// MetricsSecure.
	MetricsCertFile, MetricsKeyFile string
	// HealthProbeBindAddress serves /healthz and /readyz (ready = caches
	// synced and joined the ring). "0" disables it. Defaults to ":8081".
	//
	// With port 0 in either address (e.g. "127.0.0.1:0") the kernel picks a
	// free port: Start logs the bound address in a "serving" line (read by
	// kshardtest.Env.ServingAddr) and MetricsAddr/ProbeAddr return it.
	HealthProbeBindAddress string

	// WatchNamespace restricts the cache to one namespace. Defaults to all.
	WatchNamespace string

	// PartitionBy is how objects map to partitions; every replica of a
	// ring must agree (the Lease fingerprint carries it). Defaults to
	// shard.SchemeKey: xxhash64 of "namespace/name", every kind cached
	// whole on every replica. shard.SchemeNamespace makes the partitions
	// ranges of the API server's hash of metadata.namespace and turns on
	// the sharded cache: each namespaced kind holds only the namespaces of
	// the partitions this replica needs, listed and watched with
	// Kubernetes 1.36's shard selector (feature gate ShardedListAndWatch;
	// where the server ignores it, the kind is listed whole and filtered
	// on the client: the fallback, named by the kshard_cache_mode metric
	// and /readyz?verbose). A partition activates only once every sharded
	// kind has listed it. Reading an object of a namespace this replica
	// does not hold fails with cache.ErrPartitionNotHeld: list such kinds
	// in FullCacheKinds. shard.SchemeUID is refused: requests carry no UID,
	// so the gate could not place them (shard/README.md).
	PartitionBy shard.Scheme
	// CacheMode says how the kinds the controllers watch are cached:
	//
	//   - CacheFull: every replica caches every object.
	//   - CacheLabels: the gate-free sharded cache. Each object carries
	//     the ring's partition label (shard.PartitionLabelKey, e.g.
	//     "my-operator.kshard.io/xx1-key-p271"), written once in its life
	//     by its partition's owner, and a replica lists and watches only
	//     the labels of the partitions it holds, on any Kubernetes version
	//     and for custom resources alike. Moves write nothing. Kinds a
	//     controller maps with a function (under PartitionBy key), kinds
	//     the replica may not patch, and cluster-scoped kinds are cached
	//     whole, each with its reason in kshard_cache_mode and
	//     /readyz?verbose. Needs RBAC patch on the labelled kinds.
	//   - CacheServer: Kubernetes 1.36's sharded list and watch (feature
	//     gate ShardedListAndWatch), PartitionBy namespace only; kinds the
	//     server does not filter are listed whole and filtered on the
	//     client (the fallback).
	//
	// With PartitionBy namespace and CacheLabels, a kind the server
	// filters by a shard selector is cached that way (no labels needed),
	// and by labels otherwise. Replicas of one ring may differ in
	// CacheMode: it changes what a replica caches, not which partitions it
	// owns, so a ring moves from one mode to another by a rolling update.
	// Defaults to CacheFull with PartitionBy key, CacheServer with
	// PartitionBy namespace.
	CacheMode CacheMode
	// LabelQPS bounds the partition-label patches a replica sends per
	// second per kind (CacheLabels). They go through a client of their own,
	// exempt from the fencing transport and from QPS. Defaults to
	// cache.DefaultLabelQPS (200).
	LabelQPS float64
	// CacheCheckInterval is how often each kind cached by labels checks
	// that the cache holds every object of the partitions it reports
	// synced (CacheLabels): a paged metadata-only LIST of the replica's
	// share, and of the unlabelled objects, compared with its stores. An
	// object missing for at least an interval is a bug of the cache: it
	// is logged, counted in kshard_cache_missing_objects, fails /readyz
	// ("cache-complete") until a check finds nothing missing, and the
	// kind is listed again once. Defaults to cache.DefaultCheckInterval
	// (5 minutes); negative turns the check off; at least a second.
	CacheCheckInterval time.Duration
	// FullCacheKinds are kinds cached whole even with a sharded cache:
	// those reconcilers read in partitions they do not own.
	// Cluster-scoped kinds are always cached whole.
	FullCacheKinds []cache.Object
	// SharedNamespaces are namespaces every replica caches whole, for every
	// kind, with PartitionBy namespace: where reconcilers read objects
	// shared by all partitions (a settings ConfigMap in the operator's
	// namespace, say) of kinds that stay sharded elsewhere. Each costs its
	// partition on every replica (the other namespaces of that partition,
	// about 1/Partitions of them, come along), and the shared objects'
	// events reach every replica's sources, where mapped requests pass the
	// gate as usual. Reconciles of keys in a shared namespace still run on
	// its partition's owner only.
	SharedNamespaces []string
	// Balance, with PartitionBy namespace, places partitions by the
	// objects they hold as well as by number (shard.Config.Balance): each
	// replica reports its partitions' object counts in its Lease, and
	// partitions move from the busiest replica to the idlest until none
	// holds more than Balance (0.05: 5 %) above the mean, so that memory
	// and work even out when namespaces differ in size. Every replica of a
	// ring must agree (the Lease fingerprint carries it). Defaults to 0:
	// partitions are placed by number, and a replica's share of the
	// objects follows the namespaces hashed into its partitions.
	Balance float64

	// PodNamespace is the namespace of the pod this replica runs in, whose
	// name is Identity. The replica reads its pod (RBAC: get on pods) so
	// that the kubelet can prove its death after a crash: restarted in
	// place, its next incarnation then takes over at once instead of
	// waiting LeaseDuration. Defaults to $POD_NAMESPACE, then the service
	// account's namespace; empty (outside a pod) turns the proof off.
	PodNamespace string
	// TerminationMessagePath is the container's termination message file
	// (its terminationMessagePath), into which the replica writes its
	// incarnation at start for the kubelet to report when the container
	// ends. The file must exist (the kubelet mounts it). Defaults to
	// /dev/termination-log.
	TerminationMessagePath string

	// QPS is the sustained rate, in requests per second, at which the
	// manager's clients (writes, status patches, lists, discovery) may call
	// the API server. It applies only when the rest config given to New
	// leaves QPS zero: client-go's own default of 5 would cap a replica at
	// about five reconciles a second. A negative value disables client-side
	// rate limiting, as it does in rest.Config. Defaults to DefaultQPS (50).
	QPS float32
	// Burst is how many requests may exceed QPS in a burst. It applies only
	// when the rest config given to New leaves Burst zero. Defaults to
	// DefaultBurst (100).
	Burst int

	// Logger is the root logger. Defaults to JSON lines on stderr.
	Logger logr.Logger
	// Registerer receives every metric, and the metrics server serves
	// what it gathers, so it must also be a prometheus.Gatherer (a
	// *prometheus.Registry is) unless MetricsBindAddress is "0". The same
	// option, with the same name and type, as crshard.Options.Registerer.
	// Defaults to a new registry with the Go and process collectors.
	Registerer prometheus.Registerer
	// Registry is the former name of Registerer, used only when Registerer
	// is nil; setting both to different registries is an error.
	//
	// Deprecated: use Registerer, as the controller-runtime adapter does.
	Registry *prometheus.Registry
}

// CacheMode is how a replica caches the kinds its controllers watch
// (Options.CacheMode).
type CacheMode string

// Cache modes.
const (
	CacheFull   CacheMode = "full"
	CacheLabels CacheMode = "labels"
	CacheServer CacheMode = "server"
)

// Client rate limits applied when neither Options nor the rest config set
// them: ten times client-go's 5 QPS and burst of 10, which a replica outgrows
// at once (a reconcile reads from the cache but costs one or two writes),
// yet low enough that a fleet of replicas stays a polite API server client.
const (
	DefaultQPS   float32 = 50
	DefaultBurst int     = 100
)

// applyDefaults fills every unset field; it is the only place defaults live.
func (o *Options) applyDefaults() {
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if o.Ring == "" {
		o.Ring = lease.DefaultRing()
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = o.Namespace
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = lease.DefaultNamespace()
	}
	if o.Identity == "" {
		o.Identity = lease.DefaultIdentity()
	}
	if o.PodNamespace == "" {
		o.PodNamespace = lease.PodNamespace()
	}
	if o.TerminationMessagePath == "" {
		o.TerminationMessagePath = lease.DefaultTerminationMessagePath
	}
	if o.Partitions == 0 {
		o.Partitions = shard.DefaultPartitions
	}
	if o.Load == 0 {
		o.Load = shard.DefaultLoad
	}
	if o.CacheMode == "" {
		o.CacheMode = CacheFull
		if o.PartitionBy == shard.SchemeNamespace {
			o.CacheMode = CacheServer
		}
	}
	t := o.timing().WithDefaults()
	o.LeaseDuration, o.RenewDeadline, o.RenewPeriod = t.LeaseDuration, t.RenewDeadline, t.RenewPeriod
	o.DrainGracePeriod, o.GracefulShutdownTimeout = t.DrainGracePeriod, t.GracefulShutdownTimeout
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = ":8080"
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = ":8081"
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Logger.GetSink() == nil {
		o.Logger = defaultLogger()
	}
	if o.Registerer == nil && o.Registry != nil {
		o.Registerer = o.Registry
	}
	if o.Registerer == nil {
		o.Registerer = newDefaultRegistry()
	}
}

// validate reports every problem at once, each naming the option to fix.
func (o *Options) validate() error {
	var errs []error
	if err := lease.ValidateRing(o.Ring); err != nil {
		errs = append(errs, fmt.Errorf("Ring %w", err))
	}
	if err := lease.ValidateIdentity(o.Ring, o.Identity); err != nil {
		errs = append(errs, fmt.Errorf("Identity %w", err))
	}
	if err := lease.ValidateNamespace(o.LeaseNamespace); err != nil {
		errs = append(errs, fmt.Errorf("LeaseNamespace %w", err))
	}
	if o.Namespace != "" && o.Namespace != o.LeaseNamespace {
		errs = append(errs, fmt.Errorf("Namespace %q (deprecated) and LeaseNamespace %q differ; set only LeaseNamespace", o.Namespace, o.LeaseNamespace))
	}
	if err := o.ringConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.PartitionBy == shard.SchemeNamespace && o.WatchNamespace != "" {
		errs = append(errs, fmt.Errorf("PartitionBy %q with WatchNamespace %q puts every object in one partition, so one replica would reconcile everything; leave WatchNamespace empty (every namespace) or use PartitionBy %q", shard.SchemeNamespace, o.WatchNamespace, shard.SchemeKey))
	}
	if len(o.SharedNamespaces) > 0 && (o.PartitionBy != shard.SchemeNamespace || o.CacheMode == CacheFull) {
		errs = append(errs, fmt.Errorf("SharedNamespaces %v needs PartitionBy %q: with PartitionBy %q every replica already caches every namespace", o.SharedNamespaces, shard.SchemeNamespace, o.ringConfig().WithDefaults().Scheme))
	}
	for _, ns := range o.SharedNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("SharedNamespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	switch o.CacheMode {
	case CacheFull, CacheLabels:
	case CacheServer:
		if o.PartitionBy != shard.SchemeNamespace {
			errs = append(errs, fmt.Errorf("CacheMode %q needs PartitionBy %q: the API server shards lists by namespace hash, not by kshard's key hash; use CacheMode %q for a sharded cache under PartitionBy %q", CacheServer, shard.SchemeNamespace, CacheLabels, o.ringConfig().WithDefaults().Scheme))
		}
	default:
		errs = append(errs, fmt.Errorf("CacheMode %q is not one of %q, %q, %q", o.CacheMode, CacheFull, CacheLabels, CacheServer))
	}
	if o.CacheMode == CacheLabels {
		if _, err := shard.PartitionLabelKey(o.Ring, o.ringConfig()); err != nil {
			errs = append(errs, fmt.Errorf("CacheMode %q: %w", CacheLabels, err))
		} else if p := o.ringConfig().WithDefaults().Partitions; p > shard.MaxLabelPartitions {
			errs = append(errs, fmt.Errorf("CacheMode %q supports at most %d Partitions, not %d: a replica's selector of unlabelled objects names every partition", CacheLabels, shard.MaxLabelPartitions, p))
		}
	}
	if o.Registry != nil && o.Registerer != prometheus.Registerer(o.Registry) {
		errs = append(errs, errors.New("Registry (deprecated) and Registerer are different registries; set only Registerer"))
	}
	if _, ok := o.Registerer.(prometheus.Gatherer); !ok && o.MetricsBindAddress != "0" {
		errs = append(errs, fmt.Errorf("Registerer %T is not a prometheus.Gatherer, so the metrics server at MetricsBindAddress %q could not serve it: pass a *prometheus.Registry (or anything that gathers), or set MetricsBindAddress to \"0\" and serve the metrics yourself", o.Registerer, o.MetricsBindAddress))
	}
	if (o.MetricsCertFile == "") != (o.MetricsKeyFile == "") {
		errs = append(errs, fmt.Errorf("MetricsCertFile %q and MetricsKeyFile %q: set both, or neither for a self-signed certificate", o.MetricsCertFile, o.MetricsKeyFile))
	}
	if o.MetricsCertFile != "" && !o.MetricsSecure {
		errs = append(errs, fmt.Errorf("MetricsCertFile %q is set but MetricsSecure is off: set MetricsSecure to serve metrics over HTTPS, or drop the certificate", o.MetricsCertFile))
	}
	if o.CacheCheckInterval > 0 && o.CacheCheckInterval < time.Second {
		errs = append(errs, fmt.Errorf("CacheCheckInterval %v is below a second: each check lists the replica's share; leave it 0 for the default (%v), or negative to turn the check off", o.CacheCheckInterval, cache.DefaultCheckInterval))
	}
	if o.LabelQPS < 0 || math.IsNaN(o.LabelQPS) || math.IsInf(o.LabelQPS, 0) {
		errs = append(errs, fmt.Errorf("LabelQPS %v must be a positive number; leave it 0 for the default", o.LabelQPS))
	}
	if o.PartitionBy == shard.SchemeUID {
		errs = append(errs, errors.New("PartitionBy \"uid\" is not supported by the Manager: a request names an object by namespace and name, not UID, so the shard gate could not place it; use \"namespace\" (shard/README.md)"))
	}
	if err := o.timing().Validate(); err != nil {
		errs = append(errs, err)
	}
	if math.IsNaN(float64(o.QPS)) || math.IsInf(float64(o.QPS), 0) {
		errs = append(errs, fmt.Errorf("QPS %v is not a finite number; leave it 0 for the default %v", o.QPS, DefaultQPS))
	}
	if o.Burst < 0 {
		errs = append(errs, fmt.Errorf("Burst %d must not be negative; leave it 0 for the default %d", o.Burst, DefaultBurst))
	}
	if len(errs) > 0 {
		return fmt.Errorf("manager: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// ringConfig is the ring's shard configuration.
func (o *Options) ringConfig() shard.Config {
	return shard.Config{Partitions: o.Partitions, Load: o.Load, Scheme: o.PartitionBy, Balance: o.Balance}
}

// timing returns the replica's timings; shard.Timing holds their defaults
// and rules.
func (o *Options) timing() shard.Timing {
	return shard.Timing{LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RenewPeriod: o.RenewPeriod,
		DrainGracePeriod: o.DrainGracePeriod, GracefulShutdownTimeout: o.GracefulShutdownTimeout}
}

// gatherer is what the metrics server serves: Registerer, which validate
// made sure gathers whenever the server runs.
func (o *Options) gatherer() prometheus.Gatherer {
	g, _ := o.Registerer.(prometheus.Gatherer)
	return g
}
