package ring

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/shard"
)

// ReplicaOptions are what one replica's place in a ring is assembled from.
// kshard's manager and the controller-runtime adapter each fill them from
// their own Options and call NewReplica, so that both build a replica the
// same way.
type ReplicaOptions struct {
	// Config is the replica's own rest config: Leases and pods are read
	// and written with it. It must not carry the fencing transport: a
	// replica whose validity has passed must still renew its Lease to get
	// it back. Required.
	Config *rest.Config
	// Namespace holds the ring's Leases; Ring names the ring; Identity is
	// the replica's (the pod name). Validated by membership.New.
	Namespace, Ring, Identity string
	// RingConfig is the ring's configuration; zero fields take shard's
	// defaults.
	RingConfig shard.Config
	// Timing holds the lease timings, used by both the Lease member and
	// the handoff core; zero fields take Timing's defaults.
	Timing shard.Timing
	// KeepPlaceOnLeave: see handoff.Config.KeepPlaceOnLeave.
	KeepPlaceOnLeave bool
	// Logger receives the Lease member's logs (under "lease").
	Logger logr.Logger
	// Registerer receives the Lease member's metrics.
	Registerer prometheus.Registerer
}

// Replica is one replica's Lease membership and the configuration of its
// handoff core, matched to each other (identity, incarnation, ring
// fingerprint, timings): pass it to New as Options.Replica.
type Replica struct {
	// Client is the replica's own clientset (protobuf, no fencing), for
	// its Leases and the pod reads of proofs of death.
	Client kubernetes.Interface
	// Member is the ring's Lease membership (a *membership.Member); run
	// it beside the Coordinator.
	Member Member
	// member is Member as the coordinator reads and writes the Leases.
	member *membership.Member
	// handoff configures the handoff core, validated.
	handoff handoff.Config
}

// NewReplica validates opts and assembles a replica's membership: its
// clientset, a fresh incarnation, the Lease member and the handoff core's
// configuration. Nothing talks to the API server yet.
func NewReplica(opts ReplicaOptions) (*Replica, error) {
	if opts.Config == nil {
		return nil, errors.New("ring: ReplicaOptions.Config is nil; pass the replica's rest config")
	}
	ringCfg := opts.RingConfig.WithDefaults()
	timing := opts.Timing.WithDefaults()
	incarnation := membership.NewIncarnation()
	handoffCfg := handoff.Config{
		Identity: opts.Identity, Incarnation: incarnation, Ring: ringCfg,
		Timing: timing, KeepPlaceOnLeave: opts.KeepPlaceOnLeave,
	}
	if err := handoffCfg.Validate(); err != nil {
		return nil, err
	}
	// Leases are small and written often: protobuf halves their encoding
	// cost on both ends.
	cfg := rest.CopyConfig(opts.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the replica's client: %w", err)
	}
	member, err := membership.New(membership.Options{
		Client: client, Namespace: opts.Namespace, Ring: opts.Ring, Identity: opts.Identity,
		Incarnation: incarnation, Partitions: ringCfg.Partitions, Params: ringCfg.Fingerprint(),
		LeaseDuration: timing.LeaseDuration, RenewPeriod: timing.RenewPeriod, RenewDeadline: timing.RenewDeadline,
		Logger: opts.Logger.WithName("lease"), Registerer: opts.Registerer,
	})
	if err != nil {
		return nil, err
	}
	return &Replica{Client: client, Member: member, member: member, handoff: handoffCfg}, nil
}
