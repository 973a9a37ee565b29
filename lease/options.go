package lease

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/shard"
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("lease: invalid options")

// Options configure a Member.
type Options struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface

	// Namespace holds the ring's Leases. Required; a DNS-1123 label.
	Namespace string

	// Ring names the ring. Required; a DNS-1123 label, since it is both a
	// label value and the prefix of every member's Lease name.
	Ring string

	// Identity names this replica, unique within the ring and stable across
	// restarts: the pod name in a StatefulSet. Required; "<Ring>-<Identity>"
	// must be a valid object name (a DNS-1123 subdomain).
	Identity string

	// Incarnation identifies this process in its Lease, so that a restart and
	// a duplicate identity can be told apart. Defaults to a random id; set it
	// only in tests.
	Incarnation string

	// Partitions is the ring's partition count P, for decoding claims.
	// Required, in [1, shard.MaxPartitions].
	Partitions int

	// Params is the fingerprint of this replica's ring parameters, written
	// into its Lease for peers to compare. Defaults to empty.
	Params string

	// LeaseDuration is how long peers wait, on their own clocks, after
	// observing the Lease's last change before they may judge it expired; it
	// is also how long Run waits before taking over its identity's Lease
	// from a silent process. Defaults to 10s.
	LeaseDuration time.Duration

	// RenewPeriod is the interval between writes of the own Lease at steady
	// state. Defaults to LeaseDuration/5 (2s for the default LeaseDuration);
	// must be shorter than RenewDeadline.
	RenewPeriod time.Duration

	// RenewDeadline is how long after the last successful renew was sent the
	// caller must have stopped all work (fencing); Member only validates it
	// and bounds RenewTimeout with it. Defaults to LeaseDuration*2/3; must be
	// shorter than LeaseDuration.
	RenewDeadline time.Duration

	// RenewTimeout is the client-side timeout of each write of the own Lease.
	// A write whose response arrives later is not counted as a renew, because
	// it may have landed after peers' expiry judgement. Defaults to, and may
	// not exceed, LeaseDuration − RenewDeadline.
	RenewTimeout time.Duration

	// Clock measures local time. Defaults to the real clock.
	Clock clock.WithTicker

	// Logger receives the Member's logs. Defaults to klog.Background() (a
	// zero Logger, including logr.Discard(), selects the default).
	Logger logr.Logger

	// Registerer receives kshard_lease_renews_total,
	// kshard_lease_renew_errors_total and kshard_lease_invalid_total{reason},
	// labelled with the ring. Defaults to none: metrics are not registered.
	Registerer prometheus.Registerer
}

// Defaults, see Options.
const (
	DefaultLeaseDuration = 10 * time.Second
)

// applyDefaults fills every unset field; it is the one place defaults live.
func (o *Options) applyDefaults() {
	if o.Incarnation == "" {
		o.Incarnation = randomIncarnation()
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewPeriod == 0 {
		o.RenewPeriod = o.LeaseDuration / 5
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = o.LeaseDuration * 2 / 3
	}
	if o.RenewTimeout == 0 {
		o.RenewTimeout = o.LeaseDuration - o.RenewDeadline
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = klog.Background()
	}
}

func randomIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// validate reports every problem of defaulted options at once.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.Client == nil {
		bad("Options.Client is required: pass a kubernetes.Interface (e.g. kubernetes.NewForConfig)")
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		bad("Options.Namespace %q is not a valid namespace name (%s): use the pod's namespace", o.Namespace, strings.Join(msgs, "; "))
	}
	ringOK := len(validation.IsDNS1123Label(o.Ring)) == 0
	if !ringOK {
		bad("Options.Ring %q must be a DNS-1123 label (lower-case alphanumerics and '-', at most 63 characters): it is a label value and a Lease name prefix", o.Ring)
	}
	if msgs := validation.IsDNS1123Subdomain(o.Identity); len(msgs) > 0 {
		bad("Options.Identity %q is not a valid DNS-1123 subdomain (%s): use the pod name (POD_NAME)", o.Identity, strings.Join(msgs, "; "))
	} else if name := LeaseName(o.Ring, o.Identity); ringOK {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			bad("Lease name %q (<Ring>-<Identity>) is not a valid object name (%s): shorten Ring or Identity", name, strings.Join(msgs, "; "))
		}
	}
	if msgs := validation.IsValidLabelValue(o.Incarnation); len(msgs) > 0 {
		bad("Options.Incarnation %q is not a valid label value (%s): leave it empty for a random id", o.Incarnation, strings.Join(msgs, "; "))
	}
	if o.Partitions < 1 || o.Partitions > shard.MaxPartitions {
		bad("Options.Partitions %d is outside [1, %d]: pass the ring's partition count", o.Partitions, shard.MaxPartitions)
	}

	switch {
	case o.LeaseDuration < 0:
		bad("Options.LeaseDuration %s is negative", o.LeaseDuration)
	case o.LeaseDuration > math.MaxInt32*time.Second:
		bad("Options.LeaseDuration %s does not fit spec.leaseDurationSeconds", o.LeaseDuration)
	case o.RenewDeadline <= 0:
		bad("Options.RenewDeadline %s must be positive", o.RenewDeadline)
	case o.RenewDeadline >= o.LeaseDuration:
		bad("Options.RenewDeadline %s must be shorter than LeaseDuration %s: a replica must stop its work before peers may judge its Lease expired; lower RenewDeadline or raise LeaseDuration", o.RenewDeadline, o.LeaseDuration)
	case o.RenewPeriod <= 0:
		bad("Options.RenewPeriod %s must be positive", o.RenewPeriod)
	case o.RenewPeriod >= o.RenewDeadline:
		bad("Options.RenewPeriod %s must be shorter than RenewDeadline %s, or a single failed renew fences the replica; lower RenewPeriod", o.RenewPeriod, o.RenewDeadline)
	case o.RenewTimeout <= 0:
		bad("Options.RenewTimeout %s must be positive", o.RenewTimeout)
	case o.RenewTimeout > o.LeaseDuration-o.RenewDeadline:
		bad("Options.RenewTimeout %s exceeds LeaseDuration − RenewDeadline = %s: a renew landing that late could outlive peers' expiry judgement; lower RenewTimeout or RenewDeadline", o.RenewTimeout, o.LeaseDuration-o.RenewDeadline)
	}
	return errors.Join(errs...)
}
