package membership

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kshard/kshard/internal/logging"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// Options configure a Member.
type Options struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface

	// Namespace holds the ring's Leases. Required; a DNS-1123 label
	// (ValidateNamespace).
	Namespace string

	// Ring names the ring. Required; a DNS-1123 label, since it is both a
	// label value and the prefix of every member's Lease name
	// (ValidateRing).
	Ring string

	// Identity names this replica, unique within the ring and stable across
	// restarts: the pod name in a StatefulSet. Required; a DNS-1123
	// subdomain, and "<Ring>-<Identity>" a valid object name
	// (ValidateIdentity).
	Identity string

	// Incarnation identifies this process in its Lease, so that a restart and
	// a duplicate identity can be told apart. Defaults to NewIncarnation; set
	// it only in tests.
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
	// from a silent process. Defaults to shard.DefaultLeaseDuration (10s).
	LeaseDuration time.Duration

	// RenewPeriod is the interval between writes of the own Lease at steady
	// state. Defaults to LeaseDuration/5, at most RenewDeadline/2 (2s with
	// the other defaults); must be shorter than RenewDeadline.
	// shard.Timing holds the defaults and rules of all four timings.
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

	// Logger receives the Member's logs. Defaults to kshard's one default
	// logger, JSON lines on stderr, as in manager (a zero Logger, including
	// logr.Discard(), selects the default).
	Logger logr.Logger

	// Registerer receives kshard_lease_renews_total,
	// kshard_lease_renew_errors_total and kshard_lease_invalid_total{reason},
	// labelled with the ring. Defaults to none: metrics are not registered.
	Registerer prometheus.Registerer
}

// applyDefaults fills every unset field; it is the one place defaults live.
func (o *Options) applyDefaults() {
	if o.Incarnation == "" {
		o.Incarnation = NewIncarnation()
	}
	t := o.timing().WithDefaults()
	o.LeaseDuration, o.RenewDeadline, o.RenewPeriod, o.RenewTimeout = t.LeaseDuration, t.RenewDeadline, t.RenewPeriod, t.RenewTimeout
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logging.Default()
	}
}

func (o *Options) timing() shard.Timing {
	return shard.Timing{LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RenewPeriod: o.RenewPeriod, RenewTimeout: o.RenewTimeout}
}

// validate reports every problem of defaulted options at once, after one
// ErrInvalidOptions prefix.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if o.Client == nil {
		bad("Options.Client is required: pass a kubernetes.Interface (e.g. kubernetes.NewForConfig)")
	}
	if err := lease.ValidateNamespace(o.Namespace); err != nil {
		bad("Options.Namespace %w", err)
	}
	if err := lease.ValidateRing(o.Ring); err != nil {
		bad("Options.Ring %w", err)
	}
	if err := lease.ValidateIdentity(o.Ring, o.Identity); err != nil {
		bad("Options.Identity %w", err)
	}
	if msgs := validation.IsValidLabelValue(o.Incarnation); len(msgs) > 0 {
		bad("Options.Incarnation %q is not a valid label value (%s): leave it empty for a random id", o.Incarnation, strings.Join(msgs, "; "))
	}
	if o.Partitions < 1 || o.Partitions > shard.MaxPartitions {
		bad("Options.Partitions %d is outside [1, %d]: pass the ring's partition count", o.Partitions, shard.MaxPartitions)
	}

	if o.LeaseDuration > math.MaxInt32*time.Second {
		bad("Options.LeaseDuration %s does not fit spec.leaseDurationSeconds", o.LeaseDuration)
	} else if err := o.timing().Validate(); err != nil {
		bad("Options: %v", err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", lease.ErrInvalidOptions, errors.Join(errs...))
}
