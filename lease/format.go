package lease

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/shard"
)

// Labels and annotations of a member Lease (see the package doc).
const (
	LabelRing       = "kshard.io/ring"
	LabelState      = "kshard.io/state"
	LabelPartitions = "kshard.io/partitions"

	AnnotationClaim       = "kshard.io/claim"
	AnnotationIncarnation = "kshard.io/incarnation"
	AnnotationEpoch       = "kshard.io/epoch"
	AnnotationParams      = "kshard.io/params"
)

// Member states, the values of LabelState.
const (
	StateJoining = "joining"
	StateActive  = "active"
	StateLeaving = "leaving"
)

// Reasons a Lease with the ring label is malformed: the values of the reason
// label of kshard_lease_invalid_total.
const (
	ReasonBadName        = "bad_name"        // name is not <ring>-<identity>
	ReasonNoHolder       = "no_holder"       // spec.holderIdentity empty
	ReasonHolderMismatch = "holder_mismatch" // holderIdentity differs from the name's identity
	ReasonNoIncarnation  = "no_incarnation"  // incarnation annotation missing
	ReasonBadState       = "bad_state"       // state label missing or unknown
	ReasonBadEpoch       = "bad_epoch"       // epoch annotation missing or not an unsigned decimal
	ReasonBadClaim       = "bad_claim"       // claim annotation missing or undecodable
)

// LeaseName returns the name of the Lease of identity in ring.
func LeaseName(ring, identity string) string { return ring + "-" + identity }

// Record is what this replica publishes in its Lease.
type Record struct {
	// State is StateJoining, StateActive or StateLeaving; empty means joining.
	State string
	// Claim is the set of claimed partitions. A zero-size set means none.
	Claim shard.PartitionSet
	// Epoch is the claim epoch, maintained by the caller.
	Epoch uint64
}

// Equal reports whether r and o publish the same Lease content.
func (r Record) Equal(o Record) bool {
	return r.State == o.State && r.Epoch == o.Epoch && r.Claim.Equal(o.Claim)
}

func (r Record) clone() Record {
	r.Claim = r.Claim.Clone()
	return r
}

// Observed is one Lease of the ring as this process last saw it.
type Observed struct {
	// Name is the Lease's name; unique, unlike Identity on malformed Leases.
	Name string
	// Identity is spec.holderIdentity (empty when unset).
	Identity string
	// Incarnation is the writing process's random id.
	Incarnation string
	// State is the state label as written (see Problem when it is not one of
	// the three states).
	State string
	// Claim is the decoded claim, an empty set of the ring's size when the
	// claim cannot be read.
	Claim shard.PartitionSet
	// ClaimUnknown is set when the claim annotation is missing or undecodable
	// on a Lease that is otherwise shaped like a member's (name
	// <ring>-<holder>): the caller must treat it as claiming every partition
	// while the Lease is live. A newer kshard writing a claim format this
	// one cannot read lands here.
	ClaimUnknown bool
	// ClaimEmpty is set when the claim annotation is a well-formed claim of
	// no partition, over any partition count: a replica of another ring
	// configuration that claims nothing (it refuses to join) blocks nobody.
	ClaimEmpty bool
	// Epoch is the claim epoch (0 when unreadable; see Problem).
	Epoch uint64
	// Params is the fingerprint of the writer's ring parameters.
	Params string
	// Version is metadata.resourceVersion.
	Version string
	// LeaseDuration is spec.leaseDurationSeconds, 0 when unset. Informational.
	LeaseDuration time.Duration
	// RenewTime is the writer's clock at its last write: informational only,
	// never use it for liveness.
	RenewTime time.Time
	// LastChange is the time on this process's clock when it observed this
	// Lease's resourceVersion change; first sight counts as a change.
	LastChange time.Time
	// Problem is non-empty when the Lease carries the ring label but is
	// malformed. Such a Lease is reported but must never be trusted as a
	// member (its claims still count, see ClaimUnknown).
	Problem string
}

// Parse reads a Lease of ring, whose claims are over partitions partitions.
// It never fails: what is wrong is reported in Problem. LastChange is left
// zero; it is a property of the observer, not of the Lease.
func Parse(l *coordinationv1.Lease, ring string, partitions int) Observed {
	o, _ := parse(l, ring, partitions)
	return o
}

// parse is Parse that also returns the reasons of Problem, one per fault.
func parse(l *coordinationv1.Lease, ring string, partitions int) (Observed, []string) {
	o := Observed{
		Name:    l.Name,
		Version: l.ResourceVersion,
		Claim:   shard.NewPartitionSet(partitions),
	}
	var problems, reasons []string
	fault := func(reason, format string, args ...any) {
		reasons = append(reasons, reason)
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	if h := l.Spec.HolderIdentity; h != nil {
		o.Identity = *h
	}
	suffix, named := strings.CutPrefix(l.Name, ring+"-")
	named = named && suffix != ""
	if !named {
		fault(ReasonBadName, "name %q is not %s-<identity>", l.Name, ring)
	}
	switch {
	case o.Identity == "":
		fault(ReasonNoHolder, "spec.holderIdentity is empty")
	case named && o.Identity != suffix:
		fault(ReasonHolderMismatch, "spec.holderIdentity %q does not match the name's identity %q", o.Identity, suffix)
	}
	memberShaped := named && o.Identity == suffix

	if t := l.Spec.RenewTime; t != nil {
		o.RenewTime = t.Time
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		o.LeaseDuration = time.Duration(*d) * time.Second
	}
	o.Params = l.Annotations[AnnotationParams]
	if o.Incarnation = l.Annotations[AnnotationIncarnation]; o.Incarnation == "" {
		fault(ReasonNoIncarnation, "annotation %s is missing", AnnotationIncarnation)
	}
	switch o.State = l.Labels[LabelState]; o.State {
	case StateJoining, StateActive, StateLeaving:
	default:
		fault(ReasonBadState, "label %s=%q is not one of %s, %s, %s", LabelState, o.State, StateJoining, StateActive, StateLeaving)
	}
	if text, ok := l.Annotations[AnnotationEpoch]; !ok {
		fault(ReasonBadEpoch, "annotation %s is missing", AnnotationEpoch)
	} else if e, err := strconv.ParseUint(text, 10, 64); err != nil {
		fault(ReasonBadEpoch, "annotation %s=%q is not an unsigned decimal", AnnotationEpoch, text)
	} else {
		o.Epoch = e
	}
	claimOK := false
	if text, ok := l.Annotations[AnnotationClaim]; !ok {
		fault(ReasonBadClaim, "annotation %s is missing", AnnotationClaim)
	} else if set, err := shard.DecodePartitionSet(text, partitions); err != nil {
		fault(ReasonBadClaim, "annotation %s: %v", AnnotationClaim, err)
		o.ClaimEmpty = isEmptyClaim(text)
	} else {
		o.Claim, claimOK = set, true
		o.ClaimEmpty = set.IsEmpty()
	}
	o.ClaimUnknown = memberShaped && !claimOK
	o.Problem = strings.Join(problems, "; ")
	return o, reasons
}

// recordOf reads back the record a Lease publishes (for a Lease of ours
// whose write response was lost).
func recordOf(l *coordinationv1.Lease, ring string, partitions int) Record {
	o := Parse(l, ring, partitions)
	return Record{State: o.State, Claim: o.Claim, Epoch: o.Epoch}
}

// durationSeconds converts d to leaseDurationSeconds, rounding up so that a
// reader never believes the Lease expires sooner than its writer does.
func durationSeconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	return int32(min(max(s, 1), math.MaxInt32))
}

// render returns the own Lease publishing r, built on base (nil for a new
// Lease) so that labels and annotations others added survive. acquire marks
// the write that takes the Lease for this process.
func (m *Member) render(base *coordinationv1.Lease, r Record, now time.Time, acquire bool) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.opts.Namespace}}
	} else {
		l = base.DeepCopy()
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[LabelRing] = m.opts.Ring
	l.Labels[LabelState] = r.State
	l.Labels[LabelPartitions] = strconv.Itoa(r.Claim.Len())
	l.Annotations[AnnotationClaim] = r.Claim.Encode()
	l.Annotations[AnnotationIncarnation] = m.opts.Incarnation
	l.Annotations[AnnotationEpoch] = strconv.FormatUint(r.Epoch, 10)
	l.Annotations[AnnotationParams] = m.opts.Params

	holder := m.opts.Identity
	secs := durationSeconds(m.opts.LeaseDuration)
	renew := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &renew
	if acquire {
		at := renew
		l.Spec.AcquireTime = &at
		if base != nil {
			n := int32(1)
			if t := base.Spec.LeaseTransitions; t != nil {
				n = *t + 1
			}
			l.Spec.LeaseTransitions = &n
		}
	}
	return l
}

// isEmptyClaim reports whether text is a well-formed claim of no partition
// over the partition count it states, whatever that count is.
func isEmptyClaim(text string) bool {
	version, rest, _ := strings.Cut(text, ":")
	sizeText, _, _ := strings.Cut(rest, ":")
	size, err := strconv.Atoi(sizeText)
	if version == "" || err != nil {
		return false
	}
	set, err := shard.DecodePartitionSet(text, size)
	return err == nil && set.IsEmpty()
}
