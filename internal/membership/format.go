package membership

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// Reasons a Lease with the ring label is malformed or foreign: the values of
// the reason label of kshard_lease_invalid_total.
const (
	reasonBadName        = "bad_name"        // name is not <ring>-<identity>
	reasonNoHolder       = "no_holder"       // spec.holderIdentity empty
	reasonHolderMismatch = "holder_mismatch" // holderIdentity differs from the name's identity
	reasonNoIncarnation  = "no_incarnation"  // incarnation annotation missing
	reasonBadState       = "bad_state"       // state label missing or unknown
	reasonBadGeneration  = "bad_epoch"       // generation annotation missing or not an unsigned decimal; the value keeps the annotation key's word (AnnotationGeneration) for dashboards
	reasonBadClaim       = "bad_claim"       // claim annotation missing or undecodable
	// reasonForeignConfig counts Leases written with another ring
	// configuration (their params annotation differs from this replica's),
	// once per configuration seen, instead of their undecodable claims.
	reasonForeignConfig = "foreign_config"
)

// Observed is one Lease of the ring as this process last saw it: the
// handoff core's view of it (the record it publishes, its resourceVersion,
// and what is wrong with it) plus what only the shell uses.
type Observed struct {
	handoff.Observed
	// Name is the Lease's name; unique, unlike Identity on malformed Leases.
	Name string
	// LeaseDuration is spec.leaseDurationSeconds, 0 when unset. Informational.
	LeaseDuration time.Duration
	// RenewTime is the writer's clock at its last write: informational only,
	// never use it for liveness.
	RenewTime time.Time
	// LastChange is the time on this process's clock when it observed this
	// Lease's resourceVersion change; first sight counts as a change.
	LastChange time.Time
	// Cache is what the writer published of its cache (nil when it
	// published nothing readable). Informational: no decision rests on it.
	Cache *CacheStatus
}

// CacheStatus is what a replica's cache holds, published in its Lease with
// its renewals (AnnotationCacheMode, AnnotationCachedObjects) so that one
// read of the ring's Leases shows every replica's share of the objects.
type CacheStatus struct {
	// Mode is the replica's cache mode, as its manager names it (full,
	// labels, server): a short lower-case word.
	Mode string
	// Objects is how many objects its cache holds, summed over its kinds.
	Objects int
}

// maxCacheModeLen bounds the cache mode a Lease may carry: it is a word,
// and the Lease stays small.
const maxCacheModeLen = 16

// valid reports whether s can be published and read back as it is.
func (s CacheStatus) valid() bool {
	if s.Mode == "" || len(s.Mode) > maxCacheModeLen || s.Objects < 0 {
		return false
	}
	for _, c := range s.Mode {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// parseCacheStatus reads the CacheStatus of a Lease's annotations, nil when
// they carry none that parses.
func parseCacheStatus(annotations map[string]string) *CacheStatus {
	n, err := strconv.ParseUint(annotations[AnnotationCachedObjects], 10, 31)
	if err != nil {
		return nil
	}
	s := CacheStatus{Mode: annotations[AnnotationCacheMode], Objects: int(n)}
	if !s.valid() {
		return nil
	}
	return &s
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
	o := Observed{Name: l.Name}
	o.Version = l.ResourceVersion
	o.UID = string(l.UID)
	o.Finalized = slices.Contains(l.Finalizers, FinalizerMember)
	o.Terminating = l.DeletionTimestamp != nil
	o.Claim = shard.NewPartitionSet(partitions)
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
		fault(reasonBadName, "name %q is not %s-<identity>", l.Name, ring)
	}
	switch {
	case o.Identity == "":
		fault(reasonNoHolder, "spec.holderIdentity is empty")
	case named && o.Identity != suffix:
		fault(reasonHolderMismatch, "spec.holderIdentity %q does not match the name's identity %q", o.Identity, suffix)
	}
	memberShaped := named && o.Identity == suffix

	if t := l.Spec.RenewTime; t != nil {
		o.RenewTime = t.Time
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		o.LeaseDuration = time.Duration(*d) * time.Second
	}
	o.Fingerprint = l.Annotations[AnnotationParams]
	o.Pod = l.Annotations[AnnotationPod] // optional: absent on writers outside a pod
	if o.Incarnation = l.Annotations[AnnotationIncarnation]; o.Incarnation == "" {
		fault(reasonNoIncarnation, "annotation %s is missing", AnnotationIncarnation)
	}
	switch o.State = handoff.State(l.Labels[LabelState]); o.State {
	case handoff.StateJoining, handoff.StateActive, handoff.StateLeaving:
	default:
		fault(reasonBadState, "label %s=%q is not one of %s, %s, %s", LabelState, o.State, handoff.StateJoining, handoff.StateActive, handoff.StateLeaving)
	}
	if text, ok := l.Annotations[AnnotationGeneration]; !ok {
		fault(reasonBadGeneration, "annotation %s is missing", AnnotationGeneration)
	} else if e, err := strconv.ParseUint(text, 10, 64); err != nil {
		fault(reasonBadGeneration, "annotation %s=%q is not an unsigned decimal", AnnotationGeneration, text)
	} else {
		o.Generation = e
	}
	claimOK := false
	if text, ok := l.Annotations[AnnotationClaim]; !ok {
		fault(reasonBadClaim, "annotation %s is missing", AnnotationClaim)
	} else if set, err := DecodeClaim(text, partitions); err != nil {
		fault(reasonBadClaim, "annotation %s: %v", AnnotationClaim, err)
		o.ClaimEmpty = isEmptyClaim(text)
	} else {
		o.Claim, claimOK = set, true
		o.ClaimEmpty = set.IsEmpty()
	}
	o.ClaimUnknown = memberShaped && !claimOK
	if text, ok := l.Annotations[AnnotationWarm]; ok {
		if set, err := DecodeClaim(text, partitions); err == nil {
			o.Warm = set
		}
	}
	if text, ok := l.Annotations[AnnotationWeights]; ok {
		if w, err := assign.DecodeWeights(text, partitions); err == nil {
			o.Weights = w
		}
	}
	o.Returning = l.Annotations[AnnotationReturning] == "true"
	o.Cache = parseCacheStatus(l.Annotations)
	o.Problem = strings.Join(problems, "; ")
	return o, reasons
}

// recordOf reads back the record a Lease publishes (for a Lease of ours
// whose write response was lost).
func recordOf(l *coordinationv1.Lease, ring string, partitions int) handoff.Record {
	return Parse(l, ring, partitions).Record
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
func (m *Member) render(base *coordinationv1.Lease, r handoff.Record, now time.Time, acquire bool) *coordinationv1.Lease {
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
	// A terminating Lease must not gain a finalizer (the API server refuses
	// it); one without ours otherwise gets it (written by an earlier
	// kshard, or edited by hand).
	if l.DeletionTimestamp == nil && !slices.Contains(l.Finalizers, FinalizerMember) {
		l.Finalizers = append(l.Finalizers, FinalizerMember)
	}
	l.Labels[lease.LabelRing] = m.opts.Ring
	l.Labels[LabelState] = string(r.State)
	l.Labels[LabelPartitions] = strconv.Itoa(r.Claim.Len())
	l.Annotations[AnnotationClaim] = EncodeClaim(r.Claim)
	l.Annotations[AnnotationIncarnation] = m.opts.Incarnation
	l.Annotations[AnnotationGeneration] = strconv.FormatUint(r.Generation, 10)
	l.Annotations[AnnotationParams] = m.opts.Params
	if r.Warm.Size() > 0 {
		l.Annotations[AnnotationWarm] = EncodeClaim(r.Warm)
	} else {
		delete(l.Annotations, AnnotationWarm)
	}
	if len(r.Weights) > 0 {
		l.Annotations[AnnotationWeights] = r.Weights.Encode()
	} else {
		delete(l.Annotations, AnnotationWeights)
	}
	if r.Returning {
		l.Annotations[AnnotationReturning] = "true"
	} else {
		delete(l.Annotations, AnnotationReturning)
	}
	m.mu.Lock()
	cs := m.cacheStatus
	m.mu.Unlock()
	if cs != nil {
		l.Annotations[AnnotationCacheMode] = cs.Mode
		l.Annotations[AnnotationCachedObjects] = strconv.Itoa(cs.Objects)
	} else {
		delete(l.Annotations, AnnotationCacheMode)
		delete(l.Annotations, AnnotationCachedObjects)
	}
	if r.Pod != "" {
		l.Annotations[AnnotationPod] = r.Pod
	} else {
		// Taken over from an incarnation that had a pod: its UID must not
		// stay next to this incarnation's id.
		delete(l.Annotations, AnnotationPod)
	}

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
	set, ok := decodeStatedClaim(text)
	return ok && set.IsEmpty()
}

// ClaimPartitions returns the partition count a claim annotation states
// (<version>:<P>:…), if the claim decodes over it.
func ClaimPartitions(text string) (int, bool) {
	set, ok := decodeStatedClaim(text)
	return set.Size(), ok
}

// decodeStatedClaim decodes a claim annotation over the partition count it
// states (<version>:<P>:…), whatever that count is.
func decodeStatedClaim(text string) (shard.PartitionSet, bool) {
	version, rest, _ := strings.Cut(text, ":")
	sizeText, _, _ := strings.Cut(rest, ":")
	size, err := strconv.Atoi(sizeText)
	if version == "" || err != nil {
		return shard.PartitionSet{}, false
	}
	set, err := DecodeClaim(text, size)
	if err != nil {
		return shard.PartitionSet{}, false
	}
	return set, true
}

// Released returns a copy of l without the member finalizer, in state
// leaving, with an empty claim over partitions (the claim is left as it is
// when partitions is 0): what a peer collecting a long-expired Lease, or
// `kshard release`, writes before letting the Lease go. Every replica that
// sees that version releases its claims at once, and none takes its dead
// holder for a live member again (nor for one keeping its place, so the
// returning mark goes too).
func Released(l *coordinationv1.Lease, partitions int) *coordinationv1.Lease {
	u := withoutFinalizer(l)
	if u.Labels == nil {
		u.Labels = map[string]string{}
	}
	u.Labels[LabelState] = string(handoff.StateLeaving)
	delete(u.Annotations, AnnotationReturning)
	delete(u.Annotations, AnnotationWarm)
	delete(u.Annotations, AnnotationWeights)
	delete(u.Annotations, AnnotationCacheMode)
	delete(u.Annotations, AnnotationCachedObjects)
	if _, ok := u.Annotations[AnnotationClaim]; ok && partitions > 0 {
		u.Annotations[AnnotationClaim] = EncodeClaim(shard.NewPartitionSet(partitions))
		u.Labels[LabelPartitions] = "0"
	}
	return u
}

// withoutFinalizer returns a copy of l without the member finalizer.
func withoutFinalizer(l *coordinationv1.Lease) *coordinationv1.Lease {
	out := l.DeepCopy()
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == FinalizerMember })
	return out
}
