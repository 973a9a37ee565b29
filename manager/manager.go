package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/kshard/kshard/controller"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
	"github.com/kshard/kshard/shard/cache"
	"github.com/kshard/kshard/shard/cache/cachemetrics"
	"github.com/kshard/kshard/shard/fence"
	"github.com/kshard/kshard/shard/ring"
)

// Runnable is anything the Manager starts with Start and stops by cancelling
// its context; Start blocks until then.
type Runnable = controller.Runnable

// RunnableFunc adapts a function to Runnable.
type RunnableFunc func(ctx context.Context) error

// Start calls f.
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// Manager runs one replica of a sharded operator.
type Manager struct {
	cfg         *rest.Config // the user's: see clientConfigs
	opts        Options
	log         logr.Logger
	client      kubernetes.Interface // the user's, from cfg
	own         kubernetes.Interface // kshard's own: Leases, pods, the API server's reachability
	mapper      meta.RESTMapper
	cache       *cache.Cache
	partitioner shard.Partitioner
	sharded     bool   // PartitionBy is ranged: the cache holds only the partitions needed
	fingerprint string // of the ring parameters, as written into the Lease
	member      *membership.Member
	replica     *ring.Replica           // the Lease membership and the handoff core's configuration Start builds the ring coordinator from
	cacheCounts *cachemetrics.Collector // the cache's object counts, for metrics and the Lease

	healthz, readyz checks
	coord           atomic.Pointer[ring.Coordinator] // set by Start
	apiWait         atomic.Pointer[string]           // why Start waits for the API server

	mu           sync.Mutex // guards the registrations and started
	runnables    []Runnable
	participants []ring.Participant
	started      bool

	addrMu      sync.Mutex // guards the bound addresses
	metricsAddr string
	probeAddr   string

	// exit ends the process when fenced reconciles outlive the stop
	// deadline; tests replace it.
	exit func(code int)
}

// New validates opts, applies defaults and prepares a Manager. Nothing talks
// to the API server until Start.
func New(cfg *rest.Config, opts Options) (*Manager, error) {
	if cfg == nil {
		return nil, errors.New("manager: rest config is nil; load one with manager.GetConfig (or LoadConfig for a --kubeconfig flag)")
	}
	opts.applyDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	writesRefused := fence.NewWritesRefused()
	if err := opts.Registerer.Register(writesRefused); err != nil {
		return nil, fmt.Errorf("manager: registering metrics: %w", err)
	}
	// Allocated first: the user's clients read its lease validity.
	m := &Manager{opts: opts, log: opts.Logger, exit: os.Exit}
	cfgs := clientConfigs(cfg, opts, fence.Transport(m.LeaseValidity, writesRefused))
	client, err := kubernetes.NewForConfig(protobuf(cfgs.user))
	if err != nil {
		return nil, fmt.Errorf("manager: building client: %w", err)
	}
	ringCfg := opts.ringConfig().WithDefaults()
	replica, err := ring.NewReplica(ring.ReplicaOptions{
		Config: cfgs.own, Namespace: opts.LeaseNamespace, Ring: opts.Ring, Identity: opts.Identity,
		RingConfig: ringCfg, Timing: opts.timing(), KeepPlaceOnLeave: opts.KeepPlaceOnLeave,
		Logger: opts.Logger, Registerer: opts.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	own := replica.Client
	// NewReplica's member is always a *membership.Member; the manager
	// reads why it cannot hold its Lease from it (notReadyReason).
	member, ok := replica.Member.(*membership.Member)
	if !ok {
		return nil, fmt.Errorf("manager: the replica's Lease member is a %T, not kshard's", replica.Member)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfgs.own)
	if err != nil {
		return nil, fmt.Errorf("manager: building discovery client: %w", err)
	}
	// Deferred: discovery runs on first use, so New works while the API
	// server is still unreachable, and a miss refreshes (a CRD installed
	// after start is found).
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	partitioner, err := shard.PartitionerFor(ringCfg)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	cacheOpts := cache.Options{Scheme: opts.Scheme, Mapper: mapper, Namespace: opts.WatchNamespace}
	if opts.CacheMode != CacheFull {
		cacheOpts.Sharding = &cache.Sharding{Full: opts.FullCacheKinds, SharedNamespaces: opts.SharedNamespaces, Logger: opts.Logger.WithName("cache")}
		if rp, ranged := partitioner.(shard.RangePartitioner); ranged {
			cacheOpts.Sharding.Partitioner = rp
		}
		if opts.CacheMode == CacheLabels {
			key, _ := shard.PartitionLabelKey(opts.Ring, ringCfg) // validated
			cacheOpts.Sharding.Labels = &cache.LabelSharding{Key: key, Partitioner: partitioner, WriteConfig: cfgs.labels, QPS: opts.LabelQPS, CheckInterval: opts.CacheCheckInterval}
		}
	}
	c, err := cache.New(cfgs.own, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	member.SetCacheStatus(string(opts.CacheMode), 0)
	m.cfg, m.client, m.own, m.mapper, m.cache = cfgs.user, client, own, mapper, c
	m.partitioner, m.sharded, m.fingerprint = partitioner, cacheOpts.Sharding != nil, ringCfg.Fingerprint()
	m.member, m.replica, m.cacheCounts = member, replica, cachemetrics.New(c)
	_ = m.healthz.add("ping", Ping)
	_ = m.readyz.add("joined", m.joinedCheck)
	if m.sharded {
		if err := opts.Registerer.Register(m.cacheCounts); err != nil {
			return nil, fmt.Errorf("manager: registering metrics: %w", err)
		}
		m.readyz.addInfo("cache", m.cacheModes)
		m.readyz.addInfo("cache-partitions", m.cachePartitions)
		_ = m.readyz.add("cache-complete", cacheComplete(m.cache.ModeReport))
	}
	return m, nil
}

// Add registers r to be started by Start (or at once if Start runs).
// Controllers and other runnables that implement ring.Participant also take
// part in handoff: they reconcile only while their partitions are active
// here.
func (m *Manager) Add(r Runnable) error {
	if r == nil {
		return errors.New("manager: Add(nil)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errors.New("manager: Add after Start is not supported; register every runnable before starting")
	}
	m.runnables = append(m.runnables, r)
	if p, ok := r.(ring.Participant); ok {
		m.participants = append(m.participants, p)
	}
	return nil
}

// AddSingleton registers r to run on exactly one replica of the ring: the one
// where the partition of the key "singleton/<name>" is active. It is started
// when that partition is activated here and cancelled, and waited for, when
// it is revoked — the ring's handoff guarantees it never runs on two replicas
// at once. Its context carries the replica's lease validity, like a
// reconcile's: the manager's clients refuse writes issued under it once the
// validity has passed (controller.ErrLeaseExpired), also after a pause that
// outran the revoke.
func (m *Manager) AddSingleton(name string, r Runnable) error {
	if name == "" || r == nil {
		return errors.New("manager: AddSingleton needs a name and a runnable")
	}
	s := &singleton{name: name, partition: m.partitioner.Partition(shard.SingletonKey(name)), runnable: r, validity: m.LeaseValidity}
	s.report = func(err error) { m.log.Error(err, "singleton failed; it restarts on its next activation") }
	return m.Add(s)
}

// AddHealthzCheck adds a liveness check served on /healthz.
func (m *Manager) AddHealthzCheck(name string, check Checker) error {
	return m.healthz.add(name, check)
}

// AddReadyzCheck adds a readiness check served on /readyz, next to the
// built-in "joined" check (caches synced and ring joined).
func (m *Manager) AddReadyzCheck(name string, check Checker) error { return m.readyz.add(name, check) }

// GetConfig returns the rest config for user code's clients (a copy per
// call), with the QPS and Burst the manager's clients use. Its clients
// refuse a write (controller.ErrLeaseExpired) issued under a reconcile
// whose lease validity has passed, and one issued without a reconcile
// context while this replica, once valid, has lost its validity (a pause,
// a fence) and not renewed since; see package fence. kshard's own clients
// are built from a config without that check.
func (m *Manager) GetConfig() *rest.Config { return rest.CopyConfig(m.cfg) }

// GetClient returns a typed clientset for writes and for reads the cache
// does not serve, built from GetConfig's config.
func (m *Manager) GetClient() kubernetes.Interface { return m.client }

// GetCache returns the shared informer cache; read objects from it in
// reconcilers (Get, List).
func (m *Manager) GetCache() *cache.Cache { return m.cache }

// GetInformers implements controller.Manager.
func (m *Manager) GetInformers() controller.Informers { return m.cache }

// GetScheme returns the scheme.
func (m *Manager) GetScheme() *runtime.Scheme { return m.opts.Scheme }

// GetRESTMapper returns the discovery-backed REST mapper.
func (m *Manager) GetRESTMapper() meta.RESTMapper { return m.mapper }

// GetLogger returns the root logger.
func (m *Manager) GetLogger() logr.Logger { return m.log }

// GetControllerOptions implements controller.Manager: controllers built for
// this manager use the ring's partitioner, start with no partition active,
// check the lease validity before every reconcile (and bound its context by
// it), report to the manager's registry and drain with its grace period.
func (m *Manager) GetControllerOptions() controller.Options {
	return controller.Options{
		Partitioner:      m.partitioner,
		StartInactive:    true,
		LeaseValidity:    m.LeaseValidity,
		Logger:           m.log,
		Registerer:       m.opts.Registerer,
		DrainGracePeriod: m.opts.DrainGracePeriod,
	}
}

// LeaseValidity returns this replica's lease validity: until when its lease
// is known valid (the sending time of its last successful renewal plus
// RenewDeadline, on the monotonic clock; none before the first renewal or
// while fenced) and the epoch it belongs to (a fence, or a renewal sent
// after the validity had passed, starts a new one). Its controllers check
// it before each reconcile and its clients before each write of a
// reconcile; see controller.Options.LeaseValidity.
func (m *Manager) LeaseValidity() shard.Validity {
	if c := m.coord.Load(); c != nil {
		return c.LeaseValidity()
	}
	return shard.Validity{}
}

// Identity returns this replica's identity.
func (m *Manager) Identity() string { return m.opts.Identity }

// MetricsAddr is the metrics server's bound address once Start has bound
// it ("" before, or when disabled).
func (m *Manager) MetricsAddr() string {
	m.addrMu.Lock()
	defer m.addrMu.Unlock()
	return m.metricsAddr
}

// ProbeAddr is the probe server's bound address once Start has bound it.
func (m *Manager) ProbeAddr() string { m.addrMu.Lock(); defer m.addrMu.Unlock(); return m.probeAddr }

func (m *Manager) joinedCheck(*http.Request) error {
	if m.isReady() {
		return nil
	}
	return errors.New(m.notReadyReason())
}

// notReadyReason says why the replica is not a working ring member ("" when
// it is): still starting, its Lease not held (naming the cause, such as a
// LeaseNamespace that does not exist), caches not synced, joining, fenced,
// or refusing to join a ring whose members run another configuration.
// /readyz reports it.
func (m *Manager) notReadyReason() string {
	if r := m.apiWait.Load(); r != nil {
		return *r
	}
	c := m.coord.Load()
	if c == nil {
		return "not started"
	}
	if c.Ready() {
		return ""
	}
	// The lease member knows why its own Lease is not held (a missing
	// namespace, a refused create); the coordinator sees only that it is not.
	if err := m.member.AcquireError(); err != nil {
		if nf := (*membership.NamespaceNotFoundError)(nil); errors.As(err, &nf) {
			return nf.Error()
		}
		return fmt.Sprintf("cannot hold this replica's Lease %s/%s: %v", m.opts.LeaseNamespace, m.member.Name(), err)
	}
	if r := c.NotReadyReason(); r != "" {
		return r
	}
	return "caches not synced yet"
}

// Start runs the replica until ctx is cancelled, then leaves the ring
// gracefully (bounded by GracefulShutdownTimeout) and stops everything it
// started, waiting for it. It returns the first fatal error (nil after a
// clean leave).
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errors.New("manager: Start called twice")
	}
	m.started = true
	runnables := append([]Runnable(nil), m.runnables...)
	participants := append([]ring.Participant(nil), m.participants...)
	m.mu.Unlock()
	var partitionCache ring.PartitionCache // nil, not a nil *cache.Cache, for a full cache
	if m.sharded {
		partitionCache = m.cache
	}
	coord, err := ring.New(ring.Options{
		Replica: m.replica, Participants: participants,
		Logger: m.log.WithName("ring"), Registerer: m.opts.Registerer, Exit: m.exit,
		Cache: partitionCache,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	m.coord.Store(coord)

	servers, err := m.listen()
	if err != nil {
		return err
	}
	for _, s := range servers {
		// The bound address, for whoever asked for port 0.
		m.log.Info("serving", "server", s.name, "address", s.Addr())
	}
	// Serve probes at once: while the API server is unreachable the
	// replica is live but not ready, and /readyz says why.
	var serversWG sync.WaitGroup
	for _, s := range servers {
		serversWG.Go(func() {
			if err := s.serve(); err != nil {
				m.log.Error(err, "server stopped", "server", s.name)
			}
		})
	}
	defer func() {
		for _, s := range servers {
			s.shutdown(5 * time.Second)
		}
		serversWG.Wait()
	}()
	if !m.waitForAPIServer(ctx) {
		return nil // stopped before the API server answered: nothing to leave
	}
	// runCtx outlives ctx: after ctx ends the controllers must keep running
	// to drain, and the cache and Lease must keep working to hand off.
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	var wg sync.WaitGroup
	fatal := make(chan error, len(runnables)+4)
	// goRun runs f and reports its error as fatal, prefixed "manager: "
	// and then by what, if anything: the cache's and the lease member's
	// errors name their own layer ("cache: …", "lease: …"), so that each
	// layer appears once in the message.
	goRun := func(what string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil && runCtx.Err() == nil {
				fatal <- fmt.Errorf("manager: %s%w", what, err)
			}
		}()
	}
	// Before the first write of the Lease, so that it carries the pod.
	coord.SetupProof(runCtx, ring.Proof{
		Pods: m.own.CoreV1().Pods(m.opts.PodNamespace), Namespace: m.opts.PodNamespace,
		TerminationMessagePath: m.opts.TerminationMessagePath, Incarnation: m.member.Incarnation(),
	})
	goRun("", m.cache.Start)
	goRun("", m.member.Run)
	goRun("", m.publishCacheStatus)
	for i, r := range runnables {
		goRun(fmt.Sprintf("runnable %d (%T): ", i, r), r.Start)
	}
	coordDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		coordDone <- coord.Run(runCtx, func(ctx context.Context) bool { return m.waitSynced(ctx, runnables) })
	}()

	var first error
	coordFinished := false
	select {
	case <-ctx.Done():
		m.log.Info("leaving the ring", "identity", m.opts.Identity)
	case first = <-fatal:
		m.log.Error(first, "stopping after a fatal error; leaving the ring")
	case first = <-coordDone:
		// The core finished on its own: another process took this
		// identity over, or a fenced reconcile forced an exit.
		coordFinished = true
	}
	if !coordFinished {
		coord.Leave()
		select {
		case err := <-coordDone:
			if first == nil {
				first = err
			}
		case <-time.After(m.opts.GracefulShutdownTimeout):
			m.log.Error(nil, "graceful leave did not finish in time; stopping anyway (peers take over once the Lease expires)", "timeout", m.opts.GracefulShutdownTimeout)
		}
	}
	stopRun()
	wg.Wait()
	return first
}

// waitForAPIServer returns true once the API server answers (any HTTP
// status: a 401 or 403 is reported by whatever it refuses), retrying with
// capped exponential backoff and saying so in the log and in /readyz; false
// if ctx ends first. Starting informers and controllers against an
// unreachable server would only fail their cache-sync timeouts.
func (m *Manager) waitForAPIServer(ctx context.Context) bool {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 16 * time.Second}
	for attempt := 1; ; attempt++ {
		err := m.own.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) {
			m.apiWait.Store(nil)
			if attempt > 1 {
				m.log.Info("API server reachable", "host", m.cfg.Host, "attempts", attempt)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		reason := fmt.Sprintf("waiting for the API server at %s to be reachable: %v", m.cfg.Host, err)
		m.apiWait.Store(&reason)
		delay := backoff.Step()
		m.log.Error(err, "API server unreachable; check the kubeconfig or in-cluster networking. Retrying", "host", m.cfg.Host, "attempt", attempt, "retryIn", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// syncWaiter is implemented by controllers: WaitForSync returns once their
// sources have synced (or fails when they cannot).
type syncWaiter interface {
	WaitForSync(ctx context.Context) error
}

// waitSynced reports whether every controller's sources and the shared cache
// have synced: a replica joins only when it can work the moment it owns
// partitions.
func (m *Manager) waitSynced(ctx context.Context, runnables []Runnable) bool {
	for _, r := range runnables {
		if s, ok := r.(syncWaiter); ok {
			if err := s.WaitForSync(ctx); err != nil {
				if ctx.Err() == nil {
					m.log.Error(err, "caches did not sync; this replica does not join the ring")
				}
				return false
			}
		}
	}
	return m.cache.WaitForCacheSync(ctx)
}

func (m *Manager) isReady() bool {
	c := m.coord.Load()
	return c != nil && c.Ready()
}

func (m *Manager) listen() ([]*httpServer, error) {
	var servers []*httpServer
	if m.opts.MetricsBindAddress != "0" {
		s, err := m.listenMetrics()
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		servers = append(servers, s)
		m.addrMu.Lock()
		m.metricsAddr = s.Addr()
		m.addrMu.Unlock()
	}
	if m.opts.HealthProbeBindAddress != "0" {
		s, err := listen("health probe", m.opts.HealthProbeBindAddress, probesHandler(&m.healthz, &m.readyz))
		if err != nil {
			for _, o := range servers {
				o.listener.Close()
			}
			return nil, fmt.Errorf("manager: %w", err)
		}
		servers = append(servers, s)
		m.addrMu.Lock()
		m.probeAddr = s.Addr()
		m.addrMu.Unlock()
	}
	return servers, nil
}

// listenMetrics binds the metrics server: plain HTTP, or with
// MetricsSecure HTTPS behind the API server's authentication and
// authorization.
func (m *Manager) listenMetrics() (*httpServer, error) {
	handler := metricsHandler(m.opts.gatherer())
	if !m.opts.MetricsSecure {
		return listen("metrics", m.opts.MetricsBindAddress, handler)
	}
	tlsCfg, err := metricsTLSConfig(m.opts.MetricsCertFile, m.opts.MetricsKeyFile, m.log)
	if err != nil {
		return nil, err
	}
	auth := newMetricsAuth(m.own.AuthenticationV1().TokenReviews(), m.own.AuthorizationV1().SubjectAccessReviews(), m.log)
	s, err := listen("metrics", m.opts.MetricsBindAddress, auth.wrap(handler))
	if err != nil {
		return nil, err
	}
	s.listener = tls.NewListener(s.listener, tlsCfg)
	// No HTTP/2 (see metricsTLSConfig): an empty map turns it off.
	s.server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	return s, nil
}

// The sharded cache is what the ring coordinator holds partitions in, on a
// balanced ring counts objects with and, sharded by labels, tells the
// active partitions to.
var (
	_ ring.PartitionCache = (*cache.Cache)(nil)
	// What the coordinator asks of a cache beside PartitionCache: the
	// object counts a balanced ring is placed by, and the active
	// partitions a labelled cache labels.
	_ interface{ ObjectsPerPartition() []int }   = (*cache.Cache)(nil)
	_ interface{ SetActive(shard.PartitionSet) } = (*cache.Cache)(nil)
)
