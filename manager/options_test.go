package manager

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// TestClientRateLimits: the manager raises client-go's 5 QPS / burst 10 only
// where the caller's rest config left a limit unset, field by field.
func TestClientRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cfg            rest.Config
		opts           Options
		wantQPS        float32
		wantBurst      int
		wantErrContain string
	}{
		{name: "defaults", wantQPS: DefaultQPS, wantBurst: DefaultBurst},
		{name: "options", opts: Options{QPS: 20, Burst: 30}, wantQPS: 20, wantBurst: 30},
		{name: "rest config wins", cfg: rest.Config{QPS: 7, Burst: 9}, opts: Options{QPS: 20, Burst: 30}, wantQPS: 7, wantBurst: 9},
		{name: "per field", cfg: rest.Config{QPS: 7}, wantQPS: 7, wantBurst: DefaultBurst},
		{name: "negative QPS disables limiting", opts: Options{QPS: -1}, wantQPS: -1, wantBurst: DefaultBurst},
		{name: "negative burst", opts: Options{Burst: -1}, wantErrContain: "Burst -1 must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Host = "https://127.0.0.1:1" // never contacted: New does no I/O
			opts := tc.opts
			opts.Ring, opts.LeaseNamespace, opts.Identity = "ring", "default", "r-0"
			m, err := New(&cfg, opts)
			if tc.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) {
					t.Fatalf("New: error %v, want one containing %q", err, tc.wantErrContain)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := m.GetConfig()
			if got.QPS != tc.wantQPS || got.Burst != tc.wantBurst {
				t.Errorf("client limits QPS %v burst %d, want %v and %d", got.QPS, got.Burst, tc.wantQPS, tc.wantBurst)
			}
			if cfg.QPS != tc.cfg.QPS || cfg.Burst != tc.cfg.Burst {
				t.Errorf("New modified the caller's rest config: QPS %v burst %d", cfg.QPS, cfg.Burst)
			}
		})
	}
}

// TestLeaseNamespace: LeaseNamespace names where the Leases live; the
// deprecated Namespace still works alone, conflicts are refused, and the pod
// namespace is the default.
func TestLeaseNamespace(t *testing.T) {
	t.Setenv(lease.EnvPodNamespace, "from-pod")
	for _, tc := range []struct {
		name           string
		opts           Options
		want           string
		wantErrContain string
	}{
		{name: "LeaseNamespace", opts: Options{LeaseNamespace: "leases", WatchNamespace: "apps"}, want: "leases"},
		{name: "deprecated Namespace alone", opts: Options{Namespace: "old"}, want: "old"},
		{name: "both agree", opts: Options{Namespace: "same", LeaseNamespace: "same"}, want: "same"},
		{name: "both differ", opts: Options{Namespace: "old", LeaseNamespace: "new"}, wantErrContain: `Namespace "old" (deprecated) and LeaseNamespace "new" differ`},
		{name: "default from the pod", want: "from-pod"},
		{name: "invalid", opts: Options{LeaseNamespace: "Not_A_Label"}, wantErrContain: `LeaseNamespace "Not_A_Label" is not a namespace name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Ring, opts.Identity = "ring", "r-0"
			m, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, opts)
			if tc.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) {
					t.Fatalf("New: error %v, want one containing %q", err, tc.wantErrContain)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.opts.LeaseNamespace; got != tc.want {
				t.Errorf("LeaseNamespace %q, want %q", got, tc.want)
			}
			if tc.opts.WatchNamespace != "" && m.opts.WatchNamespace != tc.opts.WatchNamespace {
				t.Errorf("WatchNamespace %q, want %q untouched", m.opts.WatchNamespace, tc.opts.WatchNamespace)
			}
		})
	}
}

// registererOnly registers but cannot be gathered from.
type registererOnly struct{ prometheus.Registerer }

// TestRegisterer: Registerer is the metrics option (crshard's name and
// type); the deprecated Registry is used when Registerer is unset and
// refused when it names another registry; a Registerer the metrics server
// cannot gather from is refused unless that server is off.
func TestRegisterer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// opts builds the case's options on fresh registries (a manager
		// registers its metrics in them); want is the Registerer to end up.
		opts           func() (opts Options, want prometheus.Registerer)
		wantErrContain string
	}{
		{name: "Registerer", opts: func() (Options, prometheus.Registerer) {
			reg := prometheus.NewRegistry()
			return Options{Registerer: reg}, reg
		}},
		{name: "deprecated Registry alone", opts: func() (Options, prometheus.Registerer) {
			reg := prometheus.NewRegistry()
			return Options{Registry: reg}, reg
		}},
		{name: "both the same", opts: func() (Options, prometheus.Registerer) {
			reg := prometheus.NewRegistry()
			return Options{Registry: reg, Registerer: reg}, reg
		}},
		{name: "both differ", opts: func() (Options, prometheus.Registerer) {
			return Options{Registry: prometheus.NewRegistry(), Registerer: prometheus.NewRegistry()}, nil
		}, wantErrContain: "Registry (deprecated) and Registerer are different registries"},
		{name: "cannot gather", opts: func() (Options, prometheus.Registerer) {
			return Options{Registerer: registererOnly{prometheus.NewRegistry()}}, nil
		}, wantErrContain: "is not a prometheus.Gatherer"},
		{name: "cannot gather, metrics off", opts: func() (Options, prometheus.Registerer) {
			only := registererOnly{prometheus.NewRegistry()}
			return Options{Registerer: only, MetricsBindAddress: "0"}, only
		}},
		{name: "default", opts: func() (Options, prometheus.Registerer) { return Options{}, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, want := tc.opts()
			opts.Ring, opts.Identity = "ring", "r-0"
			m, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, opts)
			if tc.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) {
					t.Fatalf("New: error %v, want one containing %q", err, tc.wantErrContain)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				if _, ok := m.opts.Registerer.(*prometheus.Registry); !ok {
					t.Errorf("default Registerer %T, want a new *prometheus.Registry", m.opts.Registerer)
				}
				return
			}
			if m.opts.Registerer != want {
				t.Errorf("Registerer %v, want %v", m.opts.Registerer, want)
			}
		})
	}
}

// TestPartitionByValidation: key and namespace are accepted; uid is refused
// naming why, and an unknown scheme naming the field; a namespace ring has
// the sharded cache on and another fingerprint than a key ring.
func TestPartitionByValidation(t *testing.T) {
	base := Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns"}
	for _, tc := range []struct {
		by   shard.Scheme
		want string // "" for valid
	}{
		{"", ""},
		{shard.SchemeKey, ""},
		{shard.SchemeNamespace, ""},
		{shard.SchemeUID, "not UID"},
		{"name", "Scheme"},
	} {
		o := base
		o.PartitionBy = tc.by
		o.applyDefaults()
		err := o.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("PartitionBy %q: %v", tc.by, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("PartitionBy %q: %v, want an error naming %q", tc.by, err, tc.want)
		}
	}
	for _, tc := range []struct {
		by      shard.Scheme
		balance float64
		want    string
	}{
		{shard.SchemeNamespace, 0.05, ""},
		{shard.SchemeKey, 0.05, "Balance"},
		{shard.SchemeNamespace, -1, "Balance"},
	} {
		o := base
		o.PartitionBy, o.Balance = tc.by, tc.balance
		o.applyDefaults()
		err := o.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("PartitionBy %q, Balance %g: %v", tc.by, tc.balance, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("PartitionBy %q, Balance %g: %v, want an error naming %q", tc.by, tc.balance, err, tc.want)
		}
	}
	balanced := base
	balanced.PartitionBy, balanced.Balance = shard.SchemeNamespace, 0.05
	balanced.applyDefaults()
	key, ns := base, base
	ns.PartitionBy = shard.SchemeNamespace
	key.applyDefaults()
	ns.applyDefaults()
	if key.ringConfig().WithDefaults().Fingerprint() == ns.ringConfig().WithDefaults().Fingerprint() {
		t.Error("a namespace ring has the fingerprint of a key ring: replicas that differ would form one ring")
	}
	if balanced.ringConfig().WithDefaults().Fingerprint() == ns.ringConfig().WithDefaults().Fingerprint() {
		t.Error("a balanced ring has the fingerprint of an unbalanced one: replicas that differ would form one ring")
	}
	m, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns", PartitionBy: shard.SchemeNamespace,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if !m.sharded || m.partitioner.Count() != shard.DefaultPartitions {
		t.Errorf("namespace ring: sharded %v, %d partitions", m.sharded, m.partitioner.Count())
	}
	if _, ok := m.partitioner.(shard.RangePartitioner); !ok {
		t.Errorf("namespace ring partitions with %T, want the RangePartitioner", m.partitioner)
	}
}

// With PartitionBy namespace, a WatchNamespace would put every object in
// one partition: refused, naming the way out.
func TestPartitionByNamespaceRefusesWatchNamespace(t *testing.T) {
	o := Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns", PartitionBy: shard.SchemeNamespace, WatchNamespace: "apps"}
	o.applyDefaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), `WatchNamespace "apps" puts every object in one partition`) {
		t.Fatalf("validate: %v, want an error about WatchNamespace", err)
	}
	// The cache mode defaulted for the namespace scheme; default it again.
	o.PartitionBy, o.CacheMode = shard.SchemeKey, ""
	o.applyDefaults()
	if err := o.validate(); err != nil {
		t.Fatalf("PartitionBy key with WatchNamespace: %v", err)
	}
}

func TestSharedNamespacesValidation(t *testing.T) {
	for _, tc := range []struct {
		by     shard.Scheme
		shared []string
		want   string // "" for valid
	}{
		{shard.SchemeNamespace, []string{"operator-system", "kube-system"}, ""},
		{"", []string{"operator-system"}, `needs PartitionBy "namespace"`},
		{shard.SchemeNamespace, []string{"Operator_System"}, `"Operator_System" is not a namespace name`},
		{shard.SchemeNamespace, []string{""}, `"" is not a namespace name`},
	} {
		o := Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns", PartitionBy: tc.by, SharedNamespaces: tc.shared}
		o.applyDefaults()
		err := o.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("SharedNamespaces %q with PartitionBy %q: %v", tc.shared, tc.by, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("SharedNamespaces %q with PartitionBy %q: %v, want an error naming %q", tc.shared, tc.by, err, tc.want)
		}
	}
}

// The manager's timings are shard.Timing's: its defaults (RenewPeriod
// LeaseDuration/5 but at most RenewDeadline/2, the drain grace and the
// shutdown timeout) and the HandoverTimeout it derives, which the core gets.
// An identity is a pod's name, dots included.
func TestTimingsAndIdentityFromTheOneHome(t *testing.T) {
	m, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Ring: "ring", Identity: "web.v2-0", LeaseNamespace: "ns",
		RenewDeadline: time.Second, GracefulShutdownTimeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	o := m.opts
	if o.LeaseDuration != shard.DefaultLeaseDuration || o.RenewPeriod != 500*time.Millisecond || o.DrainGracePeriod != shard.DefaultDrainGracePeriod {
		t.Errorf("LeaseDuration %v, RenewPeriod %v, DrainGracePeriod %v; want %v, 500ms (RenewDeadline/2), %v",
			o.LeaseDuration, o.RenewPeriod, o.DrainGracePeriod, shard.DefaultLeaseDuration, shard.DefaultDrainGracePeriod)
	}
	if got := m.opts.timing().WithDefaults().HandoverTimeout; got != 5*time.Second {
		t.Errorf("the core's HandoverTimeout %v; want a third of GracefulShutdownTimeout (5s)", got)
	}
}
