package ringstatus

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/ringhealth"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

// Health values of Member.Health; Member.Live tells them apart.
const (
	healthLive    = "live"
	healthExpired = "expired"
)

// Ring is one ring of a namespace as its Leases show it. The JSON field names
// are the stable interface of `kshard status -o json`.
type Ring struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Params is the ring-parameters fingerprint most Leases carry, e.g.
	// "xx1-p271-l1.25-r40"; members with other params never join the ring.
	Params string `json:"params"`
	// Partitions is P, from Params (or, failing that, from a claim).
	Partitions int `json:"partitions"`
	// Members lists every Lease of the ring, sorted by identity, then name.
	Members []Member `json:"members"`
	// RingMembers are the identities the assignment is computed over: live
	// Leases in state active with the ring's Params, as replicas see them.
	RingMembers []string `json:"ringMembers"`
	// Unclaimed counts partitions no live Lease claims; nobody reconciles
	// their keys until one does.
	Unclaimed           int   `json:"unclaimed"`
	UnclaimedPartitions []int `json:"unclaimedPartitions"`
	// Overlapping counts partitions claimed by more than one live Lease:
	// normal while a drain is in progress, a stuck drain if it persists.
	Overlapping           int   `json:"overlapping"`
	OverlappingPartitions []int `json:"overlappingPartitions"`
	// Malformed counts Leases with the ring label that do not follow the
	// Lease format (see Member.Problem).
	Malformed int `json:"malformed"`
	// Foreign counts Leases written with another ring configuration than
	// Params (see Member.Foreign); they are not counted as Malformed when
	// they are well-formed under their own configuration.
	Foreign int `json:"foreign"`
	// Problems are ring-level findings a user should act on.
	Problems []string `json:"problems"`

	cfg     shard.Config
	cfgErr  error
	assign  *assign.Ring
	ringErr error
}

// Member is one Lease of a ring.
type Member struct {
	Identity string `json:"identity"`
	Lease    string `json:"lease"`
	// State is joining, active or leaving as written (anything else makes
	// the Lease malformed).
	State string `json:"state"`
	// Health is live or expired, by renewTime + leaseDurationSeconds against
	// the reader's clock (see the package doc).
	Health string `json:"health"`
	// Partitions is the number of claimed partitions.
	Partitions int `json:"partitions"`
	// Target is the number of partitions the ring assigns to the member: 0
	// unless it is a ring member. It differs from Partitions while the
	// member takes over or hands off partitions.
	Target int `json:"target"`
	// Warm is how many partitions of its target the member's sharded cache
	// holds, listed and synced (membership.AnnotationWarm): below Target, it is
	// still listing what it takes over, and its predecessors keep those
	// partitions meanwhile. Absent for a member that publishes no warm set
	// (a full cache, warm for every partition).
	Warm *int `json:"warm,omitempty"`
	// CacheMode is the member's cache mode (full, labels, server) and
	// CachedObjects how many objects its cache held at its last renewals
	// (membership.AnnotationCacheMode, AnnotationCachedObjects; refreshed every
	// few seconds). Both absent for a member that publishes neither (a
	// kshard without them).
	CacheMode     string `json:"cacheMode,omitempty"`
	CachedObjects *int   `json:"cachedObjects,omitempty"`
	// RenewTime is spec.renewTime, absent when unset.
	RenewTime *time.Time `json:"renewTime,omitempty"`
	// RenewAgeSeconds is the reader's clock minus RenewTime (negative when
	// the writer's clock is ahead).
	RenewAgeSeconds      float64 `json:"renewAgeSeconds"`
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	Incarnation          string  `json:"incarnation"`
	// Generation is the generation of the Record the Lease carries
	// (membership.AnnotationGeneration). Its JSON name keeps the annotation's
	// word, epoch, for scripts that read `kshard status -o json`.
	Generation uint64 `json:"epoch"`
	Params     string `json:"params"`
	// Problem says why the Lease is malformed; empty when it is well-formed
	// (a Lease of another ring configuration is read with its own
	// partition count).
	Problem string `json:"problem,omitempty"`
	// Foreign names how the Lease's ring configuration differs from the
	// ring's Params (e.g. "partitions 1021, not 271"); empty when it does
	// not, or when either carries no params.
	Foreign string `json:"foreign,omitempty"`
	// Terminating: the Lease is being deleted and waits for the member
	// finalizer (membership.FinalizerMember): its holder fences and removes it
	// once nothing of it runs. It is no ring member meanwhile.
	Terminating bool `json:"terminating,omitempty"`
	// Returning: the Lease keeps its identity's place in the ring for
	// the next process (KeepPlaceOnLeave): while live, a member in state
	// leaving or joining.
	Returning bool `json:"returning,omitempty"`
	// PartitionsLabel is the Lease's kshard.io/partitions label, the claim's
	// size for kubectl's columns; Converged checks it agrees with the claim.
	PartitionsLabel string `json:"-"`

	observed     handoff.Observed // the Lease as membership.Parse read it, for handoff's rules
	claim        shard.PartitionSet
	weights      assign.Weights
	claimUnknown bool
	claimEmpty   bool // known empty, even when encoded for another P
}

// Live reports whether m is live.
func (m Member) Live() bool { return m.Health == healthLive }

// Analyze groups the Leases of namespace by their kshard.io/ring label and
// reads each ring as of now. Leases without the label are ignored. Rings are
// sorted by name.
func Analyze(namespace string, leases []coordinationv1.Lease, now time.Time) []Ring {
	byRing := map[string][]*coordinationv1.Lease{}
	for i := range leases {
		l := &leases[i]
		name, ok := l.Labels[lease.LabelRing]
		if !ok {
			continue
		}
		byRing[name] = append(byRing[name], l)
	}
	names := make([]string, 0, len(byRing))
	for n := range byRing {
		names = append(names, n)
	}
	slices.Sort(names)
	rings := make([]Ring, 0, len(names))
	for _, n := range names {
		rings = append(rings, analyzeRing(namespace, n, byRing[n], now))
	}
	return rings
}

func analyzeRing(namespace, name string, leases []*coordinationv1.Lease, now time.Time) Ring {
	r := Ring{Name: name, Namespace: namespace, Members: []Member{}, RingMembers: []string{},
		UnclaimedPartitions: []int{}, OverlappingPartitions: []int{}, Problems: []string{}}
	r.Params = majorityParams(leases)
	r.cfg, r.cfgErr = membership.ParseParams(r.Params)
	if r.cfgErr == nil {
		r.Partitions = r.cfg.Partitions
	} else {
		r.Partitions = partitionsFromClaims(leases)
		if r.Params == "" {
			r.Problems = append(r.Problems, fmt.Sprintf("no Lease carries the %s annotation, so owners cannot be computed: the replicas run a kshard this CLI does not match", membership.AnnotationParams))
		} else {
			r.Problems = append(r.Problems, fmt.Sprintf("ring params %q: %v", r.Params, r.cfgErr))
		}
	}

	for _, l := range leases {
		o := membership.Parse(l, name, r.Partitions)
		m := Member{
			Identity: o.Identity, Lease: o.Name, State: string(o.State), Partitions: o.Claim.Len(),
			Incarnation: o.Incarnation, Generation: o.Generation, Params: o.Fingerprint, Problem: o.Problem,
			LeaseDurationSeconds: o.LeaseDuration.Seconds(),
			PartitionsLabel:      l.Labels[membership.LabelPartitions],
			Terminating:          o.Terminating,
			Returning:            o.Returning,
			claim:                o.Claim, claimUnknown: o.ClaimUnknown, claimEmpty: o.ClaimEmpty,
			weights: o.Weights, observed: o.Observed,
		}
		if o.Warm.Size() > 0 {
			warm := o.Warm.Len()
			m.Warm = &warm
		}
		if o.Cache != nil {
			objects := o.Cache.Objects
			m.CacheMode, m.CachedObjects = o.Cache.Mode, &objects
		}
		m.Health = healthExpired
		if !o.RenewTime.IsZero() {
			t := o.RenewTime
			m.RenewTime = &t
			m.RenewAgeSeconds = now.Sub(t).Seconds()
			if o.LeaseDuration > 0 && !handoff.Expired(now.Sub(t), o.LeaseDuration) {
				m.Health = healthLive
			}
		}
		if m.Params != "" && r.Params != "" && m.Params != r.Params {
			m.Foreign = assign.FingerprintDiff(r.Params, m.Params)
			r.Foreign++
			// Its claim is over its own partition count: malformed
			// only if it is so under its own configuration too.
			if cfg, err := membership.ParseParams(m.Params); err == nil {
				own := membership.Parse(l, name, cfg.Partitions)
				m.Problem, m.Partitions = own.Problem, own.Claim.Len()
			}
		}
		if m.Problem != "" {
			r.Malformed++
		}
		r.Members = append(r.Members, m)
	}
	slices.SortFunc(r.Members, func(a, b Member) int {
		if c := strings.Compare(a.Identity, b.Identity); c != 0 {
			return c
		}
		return strings.Compare(a.Lease, b.Lease)
	})

	var claims []shard.PartitionSet
	var weights assign.Weights // a balanced ring's, gathered as the replicas do
	for _, m := range r.Members {
		if m.Terminating && !m.Live() {
			r.Problems = append(r.Problems, fmt.Sprintf("Lease %s is being deleted but its holder is not renewing it: a peer removes its finalizer %s once it has been expired for long; if no replica of the ring runs, `kshard release` does", m.Lease, membership.FinalizerMember))
		}
		if !m.Live() {
			continue
		}
		if handoff.RingMember(m.observed, r.Params) {
			r.RingMembers = append(r.RingMembers, m.Identity)
		}
		if m.Params == r.Params {
			weights = assign.MaxWeights(weights, m.weights, r.Partitions)
		}
		if m.Params != r.Params && m.Params != "" {
			r.Problems = append(r.Problems, fmt.Sprintf("foreign configuration: live Lease %s runs with ring params %q (%s), not the ring's %q; replicas refuse to share a ring with it and activate nothing while it claims partitions: run every replica with the same --partitions and kshard version", m.Lease, m.Params, m.Foreign, r.Params))
			continue
		}
		if m.claimUnknown {
			r.Problems = append(r.Problems, fmt.Sprintf("live Lease %s has an unreadable claim; replicas treat it as claiming every partition, so nothing is activated until it expires or is fixed", m.Lease))
		}
		if ringhealth.CountsClaim(true, m.Params, r.Params, m.claimUnknown) {
			claims = append(claims, m.claim)
		}
	}
	r.UnclaimedPartitions, r.OverlappingPartitions = ringhealth.TallyClaims(r.Partitions, claims)
	r.Unclaimed, r.Overlapping = len(r.UnclaimedPartitions), len(r.OverlappingPartitions)

	if r.cfgErr == nil {
		r.assign, r.ringErr = assign.NewWeighted(r.cfg, r.RingMembers, weights)
		if r.ringErr != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("cannot compute the assignment: %v", r.ringErr))
		}
	}
	for i, m := range r.Members {
		if m.Problem == "" && r.assign.Contains(m.Identity) {
			r.Members[i].Target = r.assign.Partitions(m.Identity).Len()
		}
	}
	return r
}

// majorityParams returns the params fingerprint most active Leases carry
// (most Leases, when none is active): a replica that refuses to join a ring
// of another configuration never becomes active, so it cannot outvote the
// ring it stays out of. Ties go to the lexicographically smallest, so the
// answer is deterministic.
func majorityParams(leases []*coordinationv1.Lease) string {
	count := func(activeOnly bool) string {
		n := map[string]int{}
		for _, l := range leases {
			if p := l.Annotations[membership.AnnotationParams]; p != "" && (!activeOnly || l.Labels[membership.LabelState] == string(handoff.StateActive)) {
				n[p]++
			}
		}
		best, most := "", 0
		for p, c := range n {
			if c > most || (c == most && p < best) {
				best, most = p, c
			}
		}
		return best
	}
	if p := count(true); p != "" {
		return p
	}
	return count(false)
}

// partitionsFromClaims reads P from the first claim that names it
// ("v1:<P>:<bitmap>"), for rings whose params this CLI cannot read.
func partitionsFromClaims(leases []*coordinationv1.Lease) int {
	for _, l := range leases {
		parts := strings.SplitN(l.Annotations[membership.AnnotationClaim], ":", 3)
		if len(parts) == 3 {
			if p, err := strconv.Atoi(parts[1]); err == nil && p > 0 && p <= shard.MaxPartitions {
				return p
			}
		}
	}
	return shard.DefaultPartitions
}

// Owner says who owns one key of a ring. The JSON field names are the stable
// interface of `kshard owner -o json`.
type Owner struct {
	Ring      string `json:"ring"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Partition int    `json:"partition"`
	// Owner is the member the ring assigns the partition to, computed over
	// RingMembers; empty when the ring has no members.
	Owner       string   `json:"owner"`
	RingMembers []string `json:"ringMembers"`
	// ClaimedBy are the live members whose claim holds the partition. It is
	// [Owner] except mid-handoff.
	ClaimedBy []string `json:"claimedBy"`
	// Handoff is set when ClaimedBy is not exactly [Owner].
	Handoff bool `json:"handoff"`
	// Note explains Handoff or an empty Owner in a sentence.
	Note string `json:"note,omitempty"`
}

// OwnerOf computes the owner of key in r. It fails only when the ring's
// params cannot be read or its assignment cannot be built (r.Problems says
// why).
func (r *Ring) OwnerOf(key string) (Owner, error) {
	if r.cfgErr != nil {
		return Owner{}, fmt.Errorf("ring %s: params %q: %w", r.Name, r.Params, r.cfgErr)
	}
	if r.ringErr != nil {
		return Owner{}, fmt.Errorf("ring %s: %w", r.Name, r.ringErr)
	}
	if r.cfg.Scheme == shard.SchemeUID {
		return Owner{}, fmt.Errorf("ring %s places objects by the hash of their UID (params %q), so a key alone does not name a partition; look up the object's UID and its partition's owner", r.Name, r.Params)
	}
	pf, err := shard.PartitionerFor(r.cfg)
	if err != nil {
		return Owner{}, fmt.Errorf("ring %s: params %q: %w", r.Name, r.Params, err)
	}
	p := pf.Partition(key)
	o := Owner{Ring: r.Name, Namespace: r.Namespace, Key: key, Partition: p,
		RingMembers: slices.Clone(r.RingMembers), ClaimedBy: []string{}}
	o.Owner, _ = r.assign.Owner(p)
	for _, m := range r.Members {
		if m.Live() && !m.claimUnknown && m.claim.Has(p) {
			o.ClaimedBy = append(o.ClaimedBy, m.Identity)
		}
	}
	others := slices.DeleteFunc(slices.Clone(o.ClaimedBy), func(id string) bool { return id == o.Owner })
	ownerClaims := len(others) < len(o.ClaimedBy)
	o.Handoff = o.Owner != "" && !(ownerClaims && len(others) == 0)
	switch {
	case o.Owner == "":
		o.Note = "the ring has no live active member: no replica reconciles this key now"
		if len(o.ClaimedBy) > 0 {
			o.Note += fmt.Sprintf(" (%s still claims partition %d, e.g. while leaving)", strings.Join(o.ClaimedBy, ", "), p)
		}
	case !o.Handoff:
	case ownerClaims:
		o.Note = fmt.Sprintf("mid-handoff: %s still claims partition %d (draining its reconciles); %s activates it once that claim is released", strings.Join(others, ", "), p, o.Owner)
	case len(others) > 0:
		o.Note = fmt.Sprintf("mid-handoff: %s holds partition %d; the ring now assigns it to %s, which claims it next and activates it once %s releases it", strings.Join(others, ", "), p, o.Owner, strings.Join(others, ", "))
	default:
		o.Note = fmt.Sprintf("mid-handoff: nobody claims partition %d yet; %s will claim and activate it", p, o.Owner)
	}
	return o, nil
}

// assigned returns the partitions the ring assigns to member: empty when it
// is not a ring member or the assignment cannot be computed.
func (r *Ring) assigned(member string) shard.PartitionSet {
	if r.assign == nil {
		return shard.NewPartitionSet(r.Partitions)
	}
	return r.assign.Partitions(member)
}

// settled reports whether every ring member claims exactly what the ring
// assigns it and no other live Lease claims anything: no handoff is under
// way (as far as Leases show; activation follows the claims).
func (r *Ring) settled() bool {
	if r.assign == nil {
		return false
	}
	for _, m := range r.Members {
		if !m.Live() {
			continue
		}
		if m.claimUnknown || !m.claim.Equal(r.assigned(m.Identity)) {
			return false
		}
	}
	return true
}

// Claim returns the partitions m claims (empty when unreadable).
func (m Member) Claim() shard.PartitionSet { return m.claim.Clone() }
