package ringstatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/ringhealth"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

const ringName = "ops"

var (
	now    = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cfg    = shard.Config{}.WithDefaults()
	params = cfg.Fingerprint()
	P      = cfg.Partitions
)

// spec describes one synthetic member Lease.
type spec struct {
	id       string
	state    string
	claim    shard.PartitionSet
	renewAgo time.Duration // how long before now it was renewed
	params   string        // defaults to the ring's
	mutate   func(*coordinationv1.Lease)
}

func build(specs ...spec) []coordinationv1.Lease {
	out := make([]coordinationv1.Lease, 0, len(specs))
	for _, s := range specs {
		holder := s.id
		secs := int32(10)
		renew := metav1.NewMicroTime(now.Add(-s.renewAgo))
		if s.params == "" {
			s.params = params
		}
		if s.claim.Size() == 0 {
			s.claim = shard.NewPartitionSet(P)
		}
		l := coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: lease.LeaseName(ringName, s.id), Namespace: "ns",
				Labels: map[string]string{lease.LabelRing: ringName, membership.LabelState: s.state,
					membership.LabelPartitions: fmt.Sprint(s.claim.Len())},
				Annotations: map[string]string{membership.AnnotationClaim: membership.EncodeClaim(s.claim),
					membership.AnnotationIncarnation: "inc-" + s.id, membership.AnnotationGeneration: "3",
					membership.AnnotationParams: s.params},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew},
		}
		if s.mutate != nil {
			s.mutate(&l)
		}
		out = append(out, l)
	}
	return out
}

// owned returns the partitions the ring over members assigns to member.
func owned(t *testing.T, member string, members ...string) shard.PartitionSet {
	t.Helper()
	r, err := assign.New(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	return r.Partitions(member)
}

// keyIn returns a key whose partition is in s.
func keyIn(t *testing.T, s shard.PartitionSet) string {
	t.Helper()
	part := shard.NewPartitioner(P)
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("default/w-%d", i)
		if s.Has(part.Partition(k)) {
			return k
		}
	}
	t.Fatal("no key found")
	return ""
}

func only(t *testing.T, leases []coordinationv1.Lease) Ring {
	t.Helper()
	rings := Analyze("ns", leases, now)
	if len(rings) != 1 {
		t.Fatalf("got %d rings, want 1", len(rings))
	}
	return rings[0]
}

// viewOf reads leases as a replica of the ring does: parsed with the
// ring's partition count, live by renewTime on the test's clock (a
// replica's Lease member uses the time it saw each change instead).
func viewOf(leases []coordinationv1.Lease) ringhealth.Health {
	view := make([]membership.Observed, 0, len(leases))
	for i := range leases {
		view = append(view, membership.Parse(&leases[i], ringName, P))
	}
	return ringhealth.ViewHealth(params, P, view, func(o membership.Observed) bool {
		return o.LeaseDuration > 0 && now.Sub(o.RenewTime) < o.LeaseDuration
	})
}

func TestStatus(t *testing.T) {
	abc := []string{"a", "b", "c"}
	full := shard.FullPartitionSet(P)
	tests := []struct {
		name            string
		leases          []coordinationv1.Lease
		ringMembers     []string
		unclaimed       int
		overlapping     int
		malformed       int
		foreign         int
		health          map[string]string
		problemContains string
		viewMalformed   *int // ViewHealth's Malformed when not Analyze's
	}{
		{
			name: "steady ring: every partition claimed once",
			leases: build(
				spec{id: "a", state: "active", claim: owned(t, "a", abc...)},
				spec{id: "b", state: "active", claim: owned(t, "b", abc...)},
				spec{id: "c", state: "active", claim: owned(t, "c", abc...)},
			),
			ringMembers: abc,
			health:      map[string]string{"a": healthLive, "b": healthLive, "c": healthLive},
		},
		{
			name: "expired member is no ring member and its claim counts for nothing",
			leases: build(
				spec{id: "a", state: "active", claim: owned(t, "a", abc...)},
				spec{id: "b", state: "active", claim: owned(t, "b", abc...)},
				spec{id: "c", state: "active", claim: owned(t, "c", abc...), renewAgo: 11 * time.Second},
			),
			ringMembers: []string{"a", "b"},
			unclaimed:   owned(t, "c", abc...).Len(),
			health:      map[string]string{"a": healthLive, "b": healthLive, "c": healthExpired},
		},
		{
			name: "mid-handoff: the newcomer claims before the old owner releases",
			leases: build(
				spec{id: "a", state: "active", claim: full},
				spec{id: "b", state: "active", claim: owned(t, "b", "a", "b")},
			),
			ringMembers: []string{"a", "b"},
			overlapping: owned(t, "b", "a", "b").Len(),
		},
		{
			name: "joining and leaving members claim but are no ring members",
			leases: build(
				spec{id: "a", state: "leaving", claim: full},
				spec{id: "b", state: "joining"},
				spec{id: "c", state: "active"},
			),
			ringMembers: []string{"c"},
		},
		{
			name: "malformed Lease is reported and never a member",
			leases: build(
				spec{id: "a", state: "active", claim: full},
				spec{id: "b", state: "bogus"},
			),
			ringMembers: []string{"a"},
			malformed:   1,
		},
		{
			name: "live Lease with another P is reported",
			leases: build(
				spec{id: "a", state: "active", claim: full},
				spec{id: "b", state: "active", claim: full},
				spec{id: "c", state: "active", params: "xx1-p97-l1.05-r40", claim: shard.FullPartitionSet(97)},
			),
			ringMembers: []string{"a", "b"},
			overlapping: P,
			// Its claim does not decode over the ring's P, but it is
			// well-formed under its own: foreign, not malformed.
			foreign:         1,
			problemContains: `foreign configuration: live Lease ops-c runs with ring params "xx1-p97-l1.05-r40" (partitions 97, not 271)`,
		},
		{
			name: "a Lease of another P that is malformed under its own P is both",
			leases: build(
				spec{id: "a", state: "active", claim: full},
				spec{id: "c", state: "bogus", params: "xx1-p97-l1.05-r40", claim: shard.NewPartitionSet(97)},
			),
			ringMembers:     []string{"a"},
			foreign:         1,
			malformed:       1,
			problemContains: "foreign configuration: live Lease ops-c",
			viewMalformed:   new(int),
		},
		{
			name: "unreadable claim is reported",
			leases: build(
				spec{id: "a", state: "active", claim: full, mutate: func(l *coordinationv1.Lease) {
					l.Annotations[membership.AnnotationClaim] = "v9:271:zzz"
				}},
			),
			ringMembers:     []string{},
			unclaimed:       P,
			malformed:       1,
			problemContains: "unreadable claim",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := only(t, tc.leases)
			if !slices.Equal(r.RingMembers, tc.ringMembers) {
				t.Errorf("RingMembers = %v, want %v", r.RingMembers, tc.ringMembers)
			}
			if r.Unclaimed != tc.unclaimed || len(r.UnclaimedPartitions) != tc.unclaimed {
				t.Errorf("Unclaimed = %d (%d listed), want %d", r.Unclaimed, len(r.UnclaimedPartitions), tc.unclaimed)
			}
			if r.Overlapping != tc.overlapping || len(r.OverlappingPartitions) != tc.overlapping {
				t.Errorf("Overlapping = %d (%d listed), want %d", r.Overlapping, len(r.OverlappingPartitions), tc.overlapping)
			}
			if r.Foreign != tc.foreign {
				t.Errorf("Foreign = %d, want %d", r.Foreign, tc.foreign)
			}
			for _, m := range r.Members {
				if (m.Foreign != "") != (m.Params != r.Params) {
					t.Errorf("%s: Foreign %q with params %q (the ring's %q)", m.Identity, m.Foreign, m.Params, r.Params)
				}
			}
			if r.Malformed != tc.malformed {
				t.Errorf("Malformed = %d, want %d (members %+v)", r.Malformed, tc.malformed, r.Members)
			}
			for _, m := range r.Members {
				if want, ok := tc.health[m.Identity]; ok && m.Health != want {
					t.Errorf("%s health = %s, want %s", m.Identity, m.Health, want)
				}
			}
			if tc.problemContains != "" && !strings.Contains(strings.Join(r.Problems, "\n"), tc.problemContains) {
				t.Errorf("Problems = %q, want one containing %q", r.Problems, tc.problemContains)
			}
			if tc.problemContains == "" && len(r.Problems) > 0 {
				t.Errorf("unexpected Problems %q", r.Problems)
			}
			if r.Partitions != P || r.Params != params {
				t.Errorf("Partitions, Params = %d, %q", r.Partitions, r.Params)
			}
			// A replica's view of the same Leases counts the same
			// (kshard_ring_* gauges), but for a Lease of another
			// configuration malformed under its own: the replica cannot
			// re-read it with its params, so it counts as foreign only.
			want := ringhealth.Health{Unclaimed: r.Unclaimed, Overlapping: r.Overlapping, Malformed: r.Malformed, Foreign: r.Foreign}
			if tc.viewMalformed != nil {
				want.Malformed = *tc.viewMalformed
			}
			if got := viewOf(tc.leases); got != want {
				t.Errorf("ViewHealth = %+v, want %+v (Analyze's)", got, want)
			}
		})
	}
}

func TestStatusRenewAge(t *testing.T) {
	r := only(t, build(spec{id: "a", state: "active", renewAgo: 3 * time.Second}))
	m := r.Members[0]
	if m.RenewAgeSeconds != 3 || m.LeaseDurationSeconds != 10 || m.Incarnation != "inc-a" || m.Generation != 3 {
		t.Errorf("member = %+v", m)
	}
}

func TestAnalyzeGroupsRings(t *testing.T) {
	ls := build(spec{id: "a", state: "active"})
	other := build(spec{id: "x", state: "active"})[0]
	other.Labels[lease.LabelRing] = "another"
	other.Name = "another-x"
	unrelated := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}}
	rings := Analyze("ns", append(ls, other, unrelated), now)
	var names []string
	for _, r := range rings {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"another", "ops"}) {
		t.Errorf("rings = %v", names)
	}
}

func TestOwner(t *testing.T) {
	ab := owned(t, "b", "a", "b")
	tests := []struct {
		name      string
		leases    []coordinationv1.Lease
		key       func(t *testing.T) string
		owner     string
		claimedBy []string
		handoff   bool
		note      string
	}{
		{
			name: "steady: owner by ring is the claimer",
			leases: build(
				spec{id: "a", state: "active", claim: owned(t, "a", "a", "b")},
				spec{id: "b", state: "active", claim: ab},
			),
			key:   func(t *testing.T) string { return keyIn(t, ab) },
			owner: "b", claimedBy: []string{"b"},
		},
		{
			name: "mid-handoff: old owner still claims while draining",
			leases: build(
				spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
				spec{id: "b", state: "active", claim: ab},
			),
			key:   func(t *testing.T) string { return keyIn(t, ab) },
			owner: "b", claimedBy: []string{"a", "b"}, handoff: true, note: "a still claims",
		},
		{
			name: "mid-handoff: the new owner has not claimed yet",
			leases: build(
				spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
				spec{id: "b", state: "active"},
			),
			key:   func(t *testing.T) string { return keyIn(t, ab) },
			owner: "b", claimedBy: []string{"a"}, handoff: true, note: "a holds partition",
		},
		{
			name: "expired member is excluded from the ring",
			leases: build(
				spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
				spec{id: "b", state: "active", claim: ab, renewAgo: time.Minute},
			),
			key:   func(t *testing.T) string { return keyIn(t, ab) },
			owner: "a", claimedBy: []string{"a"},
		},
		{
			name: "leaving member's partitions go to the others",
			leases: build(
				spec{id: "a", state: "active", claim: owned(t, "a", "a", "b")},
				spec{id: "b", state: "leaving", claim: ab},
			),
			key:   func(t *testing.T) string { return keyIn(t, ab) },
			owner: "a", claimedBy: []string{"b"}, handoff: true, note: "b holds partition",
		},
		{
			name:   "no live active member",
			leases: build(spec{id: "a", state: "joining"}),
			key:    func(t *testing.T) string { return "cluster-scoped-name" },
			owner:  "", claimedBy: []string{}, note: "no live active member",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := only(t, tc.leases)
			key := tc.key(t)
			o, err := r.OwnerOf(key)
			if err != nil {
				t.Fatal(err)
			}
			if want := shard.NewPartitioner(P).Partition(key); o.Partition != want || o.Key != key {
				t.Errorf("key, partition = %s, %d, want %s, %d", o.Key, o.Partition, key, want)
			}
			if o.Owner != tc.owner || !slices.Equal(o.ClaimedBy, tc.claimedBy) || o.Handoff != tc.handoff {
				t.Errorf("owner %q claimedBy %v handoff %v, want %q %v %v", o.Owner, o.ClaimedBy, o.Handoff, tc.owner, tc.claimedBy, tc.handoff)
			}
			if !strings.Contains(o.Note, tc.note) || (tc.note == "") != (o.Note == "") {
				t.Errorf("note %q, want it to contain %q", o.Note, tc.note)
			}
		})
	}
}

func TestOwnerUnknownParams(t *testing.T) {
	r := only(t, build(spec{id: "a", state: "active", params: "zz9-p271-l1.25-r40"}))
	if _, err := r.OwnerOf("default/x"); err == nil || !strings.Contains(err.Error(), "upgrade kshard") {
		t.Errorf("err = %v, want one saying to upgrade", err)
	}
	if len(r.Problems) == 0 || r.Partitions != P {
		t.Errorf("Problems %q, Partitions %d", r.Problems, r.Partitions)
	}
}

// TestOwnerInRangedRings: a namespace ring places a key by its namespace's
// hash range; a uid ring cannot place a key and says so.
func TestOwnerInRangedRings(t *testing.T) {
	nsParams := shard.Config{Scheme: shard.SchemeNamespace}.Fingerprint()
	r := only(t, build(spec{id: "a", state: "active", params: nsParams, claim: shard.FullPartitionSet(P)}))
	o, err := r.OwnerOf("team-a/web")
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := shard.NewRangePartitioner(shard.SchemeNamespace, P)
	if want, _ := rp.PartitionOfObject("team-a", ""); o.Partition != want || o.Owner != "a" {
		t.Fatalf("partition %d owner %q, want %d and a", o.Partition, o.Owner, want)
	}
	uidParams := shard.Config{Scheme: shard.SchemeUID}.Fingerprint()
	r = only(t, build(spec{id: "a", state: "active", params: uidParams}))
	if _, err := r.OwnerOf("team-a/web"); err == nil || !strings.Contains(err.Error(), "UID") {
		t.Fatalf("OwnerOf in a uid ring = %v, want an error about UIDs", err)
	}
}

// TestOwnerInBalancedRings: the CLI places a balanced ring's partitions as
// the replicas do, by the largest weight the live Leases report.
func TestOwnerInBalancedRings(t *testing.T) {
	bcfg := shard.Config{Scheme: shard.SchemeNamespace, Balance: 0.05}
	heavy := make(assign.Weights, P)
	light := make(assign.Weights, P)
	for p := range P {
		heavy[p], light[p] = assign.WeightBucket(p%5), assign.WeightBucket(p%3)
	}
	heavy[7] = assign.WeightBucket(5000)
	withWeights := func(w assign.Weights) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) { l.Annotations[membership.AnnotationWeights] = w.Encode() }
	}
	r := only(t, build(
		spec{id: "a", state: "active", params: bcfg.Fingerprint(), mutate: withWeights(heavy)},
		spec{id: "b", state: "active", params: bcfg.Fingerprint(), mutate: withWeights(light)}))
	want, err := assign.NewWeighted(bcfg, []string{"a", "b"}, assign.MaxWeights(assign.MaxWeights(nil, heavy, P), light, P))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := assign.New(bcfg, []string{"a", "b"})
	if want.Partitions("a").Equal(plain.Partitions("a")) {
		t.Fatal("the weights do not change this ring; the test shows nothing")
	}
	for _, m := range r.Members {
		if m.Target != want.Partitions(m.Identity).Len() {
			t.Errorf("%s: target %d partitions, the balanced ring gives it %d", m.Identity, m.Target, want.Partitions(m.Identity).Len())
		}
	}
	rp, _ := shard.NewRangePartitioner(shard.SchemeNamespace, P)
	for i := range 50 {
		ns := fmt.Sprintf("team-%d", i)
		o, err := r.OwnerOf(ns + "/web")
		if err != nil {
			t.Fatal(err)
		}
		p, _ := rp.PartitionOfObject(ns, "")
		if owner, _ := want.Owner(p); o.Owner != owner {
			t.Fatalf("%s: owner %q, the balanced ring says %q", ns, o.Owner, owner)
		}
	}
}

func TestSettled(t *testing.T) {
	ab := func(id string) shard.PartitionSet { return owned(t, id, "a", "b") }
	tests := []struct {
		name    string
		leases  []coordinationv1.Lease
		settled bool
		target  map[string]int
	}{
		{"claims match the assignment", build(
			spec{id: "a", state: "active", claim: ab("a")},
			spec{id: "b", state: "active", claim: ab("b")},
		), true, map[string]int{"a": ab("a").Len(), "b": ab("b").Len()}},
		{"newcomer active but not claiming yet", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "active"},
		), false, map[string]int{"a": ab("a").Len(), "b": ab("b").Len()}},
		{"leaving member still claims", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "leaving", claim: ab("b")},
		), false, map[string]int{"a": P, "b": 0}},
		{"expired member's stale claim does not matter", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "active", claim: ab("b"), renewAgo: time.Hour},
		), true, map[string]int{"a": P, "b": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := only(t, tc.leases)
			if r.settled() != tc.settled {
				t.Errorf("Settled = %v, want %v", r.settled(), tc.settled)
			}
			for _, m := range r.Members {
				if m.Target != tc.target[m.Identity] {
					t.Errorf("%s target %d, want %d", m.Identity, m.Target, tc.target[m.Identity])
				}
			}
		})
	}
}

func TestConverged(t *testing.T) {
	ab := func(id string) shard.PartitionSet { return owned(t, id, "a", "b") }
	relabel := func(v string) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) { l.Labels[membership.LabelPartitions] = v }
	}
	tests := []struct {
		name   string
		leases []coordinationv1.Lease
		want   []string
		err    string // substring; empty: converged
	}{
		{"converged", build(
			spec{id: "a", state: "active", claim: ab("a")},
			spec{id: "b", state: "active", claim: ab("b")},
		), []string{"b", "a"}, ""},
		{"expired leftover Lease does not matter", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "active", claim: ab("b"), renewAgo: time.Hour},
		), []string{"a"}, ""},
		{"wanted member without a Lease", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
		), []string{"a", "b"}, "b has no live Lease"},
		{"wanted member joining", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "joining"},
		), []string{"a", "b"}, "b is joining, not active"},
		{"unwanted live member", build(
			spec{id: "a", state: "active", claim: ab("a")},
			spec{id: "b", state: "active", claim: ab("b")},
		), []string{"a"}, "ring members are [a b], want [a]"},
		{"newcomer not claiming yet", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "active"},
		), []string{"a", "b"}, "a claims 271 partitions, the ring assigns it"},
		{"leaving member still claims", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "b", state: "leaving", claim: ab("b")},
		), []string{"a"}, "claimed by more than one live Lease"},
		{"partitions unclaimed", build(
			spec{id: "a", state: "active", claim: ab("a")},
		), []string{"a"}, "claimed by no live Lease"},
		{"label disagrees with claim", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P), mutate: relabel("3")},
		), []string{"a"}, `label is "3" but it claims`},
		{"foreign configuration claiming nothing is harmless", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "f", state: "joining", params: "xx1-p1021-l1.05-r40", mutate: func(l *coordinationv1.Lease) {
				l.Annotations[membership.AnnotationClaim] = membership.EncodeClaim(shard.NewPartitionSet(1021))
			}},
		), []string{"a"}, ""},
		{"foreign configuration claiming partitions blocks", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
			spec{id: "f", state: "joining", params: "xx1-p1021-l1.05-r40", mutate: func(l *coordinationv1.Lease) {
				l.Annotations[membership.AnnotationClaim] = membership.EncodeClaim(shard.FullPartitionSet(1021))
			}},
		), []string{"a"}, "runs ring params"},
		{"member whose Lease is being deleted", build(
			spec{id: "a", state: "active", claim: ab("a"), mutate: func(l *coordinationv1.Lease) {
				t := metav1.NewTime(now)
				l.DeletionTimestamp, l.Finalizers = &t, []string{membership.FinalizerMember}
			}},
			spec{id: "b", state: "active", claim: ab("b")},
		), []string{"a", "b"}, "a's Lease ops-a is being deleted"},
		{"nothing wanted", build(
			spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
		), nil, "no member is wanted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := only(t, tc.leases)
			err := r.Converged(tc.want...)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Converged = %v, want nil", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Converged = %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestRead(t *testing.T) {
	leases := build(spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)})
	other := build(spec{id: "z", state: "active"})
	other[0].Labels[lease.LabelRing] = "other"
	other[0].Name = "other-z"
	client := fake.NewClientset(&leases[0], &other[0])
	r, err := Read(context.Background(), client, "ns", ringName)
	if err != nil {
		t.Fatal(err)
	}
	// Renewed at the fixed test time, so expired by the reader's clock:
	// only the listing and grouping are under test here.
	if r.Name != ringName || len(r.Members) != 1 || r.Members[0].Identity != "a" {
		t.Errorf("Read = %+v, want ring %s with member a only", r, ringName)
	}
	empty, err := Read(context.Background(), client, "ns", "none")
	if err != nil {
		t.Fatal(err)
	}
	if empty.Name != "none" || len(empty.Members) != 0 || empty.Partitions != shard.DefaultPartitions {
		t.Errorf("empty ring = %+v", empty)
	}
	if err := empty.Converged("a"); err == nil || !strings.Contains(err.Error(), "a has no live Lease") {
		t.Errorf("empty ring Converged = %v", err)
	}
}

func TestTerminatingLeaseIsNoRingMember(t *testing.T) {
	deleting := func(l *coordinationv1.Lease) {
		at := metav1.NewTime(now)
		l.DeletionTimestamp, l.Finalizers = &at, []string{membership.FinalizerMember}
	}
	r := only(t, build(
		spec{id: "a", state: "active", claim: shard.FullPartitionSet(P)},
		spec{id: "b", state: "active", mutate: deleting},
		spec{id: "c", state: "active", renewAgo: time.Hour, mutate: deleting},
	))
	if !slices.Equal(r.RingMembers, []string{"a"}) {
		t.Errorf("ring members %v; want [a]: Leases being deleted are no members", r.RingMembers)
	}
	if !r.Members[1].Terminating || r.Members[0].Terminating {
		t.Errorf("Terminating of a, b = %v, %v; want false, true", r.Members[0].Terminating, r.Members[1].Terminating)
	}
	stuck := 0
	for _, p := range r.Problems {
		if strings.Contains(p, "ops-c") && strings.Contains(p, "kshard release") {
			stuck++
		}
	}
	if stuck != 1 {
		t.Errorf("problems %q; want one naming ops-c, expired while being deleted, and kshard release", r.Problems)
	}
}

// A member's cache status is read from its Lease; a member that publishes
// none (an older kshard) or one that does not parse reads as unknown, and
// neither makes the Lease malformed.
func TestMemberCacheStatus(t *testing.T) {
	abc := []string{"a", "b", "c"}
	withCache := func(mode, objects string) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) {
			l.Annotations[membership.AnnotationCacheMode] = mode
			l.Annotations[membership.AnnotationCachedObjects] = objects
		}
	}
	r := only(t, build(
		spec{id: "a", state: "active", claim: owned(t, "a", abc...), mutate: withCache("labels", "33412")},
		spec{id: "b", state: "active", claim: owned(t, "b", abc...)},
		spec{id: "c", state: "active", claim: owned(t, "c", abc...), mutate: withCache("full", "many")},
	))
	if r.Malformed != 0 || len(r.RingMembers) != 3 {
		t.Fatalf("malformed %d, members %v: cache annotations must not affect the ring", r.Malformed, r.RingMembers)
	}
	a, b, c := r.Members[0], r.Members[1], r.Members[2]
	if a.CacheMode != "labels" || a.CachedObjects == nil || *a.CachedObjects != 33412 {
		t.Errorf("a: cache %q %v, want labels 33412", a.CacheMode, a.CachedObjects)
	}
	for _, m := range []Member{b, c} {
		if m.CacheMode != "" || m.CachedObjects != nil {
			t.Errorf("%s: cache %q %v, want unknown", m.Identity, m.CacheMode, m.CachedObjects)
		}
	}
}

// TestViewHealthUnhealthyRing: a ring with one partition nobody claims, one
// claimed twice and a malformed Lease reads as such; a Lease of another
// configuration counts as foreign only while it is live.
func TestViewHealthUnhealthyRing(t *testing.T) {
	aClaim, bClaim := shard.NewPartitionSet(P), shard.NewPartitionSet(P)
	for p := range P {
		switch {
		case p == 0: // unclaimed
		case p < P/2:
			aClaim.Add(p)
		default:
			bClaim.Add(p)
		}
	}
	aClaim.Add(P - 1) // b's too: overlapping
	leases := build(
		spec{id: "a", state: "active", claim: aClaim},
		spec{id: "b", state: "active", claim: bClaim},
		spec{id: "m", state: "bogus"},
		spec{id: "f", state: "active", params: "xx1-p97-l1.05-r40", claim: shard.FullPartitionSet(97)},
		spec{id: "g", state: "active", params: "xx1-p97-l1.05-r40", claim: shard.NewPartitionSet(97), renewAgo: time.Minute},
	)
	got := viewOf(leases)
	want := ringhealth.Health{Unclaimed: 1, Overlapping: 1, Malformed: 1, Foreign: 1}
	if got != want {
		t.Fatalf("ViewHealth = %+v, want %+v", got, want)
	}
	if r := only(t, leases); r.Unclaimed != 1 || r.Overlapping != 1 || r.Malformed != 1 {
		t.Errorf("Analyze: unclaimed %d, overlapping %d, malformed %d; want 1, 1, 1", r.Unclaimed, r.Overlapping, r.Malformed)
	}
}
