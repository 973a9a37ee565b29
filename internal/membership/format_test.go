package membership

import (
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/kshard/kshard/internal/assign"
	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

func TestParse(t *testing.T) {
	claim := shard.NewPartitionSet(7, 2, 5)
	wellFormed := func(l *coordinationv1.Lease) {
		l.Annotations[AnnotationClaim] = EncodeClaim(claim)
		l.Annotations[AnnotationGeneration] = "42"
		l.Annotations[AnnotationParams] = "p7"
	}
	tests := []struct {
		name         string
		mutate       func(*coordinationv1.Lease)
		reasons      []string
		claimUnknown bool
		claim        []int
	}{
		{name: "well formed", claim: []int{2, 5}},
		{name: "garbage claim", mutate: func(l *coordinationv1.Lease) { l.Annotations[AnnotationClaim] = "v1:7:!!" },
			reasons: []string{reasonBadClaim}, claimUnknown: true},
		{name: "claim of a newer format", mutate: func(l *coordinationv1.Lease) { l.Annotations[AnnotationClaim] = "v2:7:AA" },
			reasons: []string{reasonBadClaim}, claimUnknown: true},
		{name: "claim over another partition count", mutate: func(l *coordinationv1.Lease) {
			l.Annotations[AnnotationClaim] = EncodeClaim(shard.NewPartitionSet(11, 1))
		}, reasons: []string{reasonBadClaim}, claimUnknown: true},
		{name: "claim missing", mutate: func(l *coordinationv1.Lease) { delete(l.Annotations, AnnotationClaim) },
			reasons: []string{reasonBadClaim}, claimUnknown: true},
		{name: "no holder", mutate: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil },
			reasons: []string{reasonNoHolder}, claim: []int{2, 5}},
		{name: "no holder and garbage claim is not member-shaped", mutate: func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = nil
			l.Annotations[AnnotationClaim] = "junk"
		}, reasons: []string{reasonNoHolder, reasonBadClaim}},
		{name: "holder differs from name", mutate: func(l *coordinationv1.Lease) { h := "c"; l.Spec.HolderIdentity = &h },
			reasons: []string{reasonHolderMismatch}, claim: []int{2, 5}},
		{name: "name of another ring", mutate: func(l *coordinationv1.Lease) { l.Name = "other-b" },
			reasons: []string{reasonBadName}, claim: []int{2, 5}},
		{name: "name is only the prefix", mutate: func(l *coordinationv1.Lease) { l.Name = "r-" },
			reasons: []string{reasonBadName}, claim: []int{2, 5}},
		{name: "no incarnation", mutate: func(l *coordinationv1.Lease) { delete(l.Annotations, AnnotationIncarnation) },
			reasons: []string{reasonNoIncarnation}, claim: []int{2, 5}},
		{name: "unknown state", mutate: func(l *coordinationv1.Lease) { l.Labels[LabelState] = "expired" },
			reasons: []string{reasonBadState}, claim: []int{2, 5}},
		{name: "negative generation", mutate: func(l *coordinationv1.Lease) { l.Annotations[AnnotationGeneration] = "-1" },
			reasons: []string{reasonBadGeneration}, claim: []int{2, 5}},
		{name: "generation missing", mutate: func(l *coordinationv1.Lease) { delete(l.Annotations, AnnotationGeneration) },
			reasons: []string{reasonBadGeneration}, claim: []int{2, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := peerLease("ns", "r", "b", "inc-b", wellFormed)
			l.ResourceVersion = "17"
			if tc.mutate != nil {
				tc.mutate(l)
			}
			o, reasons := parse(l, "r", 7)
			if !slices.Equal(reasons, tc.reasons) {
				t.Errorf("reasons %v, want %v (problem %q)", reasons, tc.reasons, o.Problem)
			}
			if (o.Problem != "") != (len(tc.reasons) > 0) {
				t.Errorf("Problem %q with reasons %v", o.Problem, reasons)
			}
			if o.ClaimUnknown != tc.claimUnknown {
				t.Errorf("ClaimUnknown %v, want %v", o.ClaimUnknown, tc.claimUnknown)
			}
			if got := o.Claim.Slice(); !slices.Equal(got, tc.claim) && !(len(got) == 0 && len(tc.claim) == 0) {
				t.Errorf("claim %v, want %v", got, tc.claim)
			}
			if o.Claim.Size() != 7 {
				t.Errorf("claim size %d, want 7 even when unreadable", o.Claim.Size())
			}
			if o.Version != "17" || o.Name != l.Name {
				t.Errorf("version %q name %q", o.Version, o.Name)
			}
			if len(tc.reasons) == 0 && (o.Identity != "b" || o.Incarnation != "inc-b" || o.State != handoff.StateActive || o.Generation != 42 || o.Fingerprint != "p7") {
				t.Errorf("fields not read: %+v", o)
			}
		})
	}
}

func TestProblemNamesTheFault(t *testing.T) {
	l := peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = nil
		l.Annotations[AnnotationGeneration] = "x"
	})
	o := Parse(l, "r", 7)
	for _, want := range []string{"holderIdentity is empty", `kshard.io/epoch="x"`} {
		if !strings.Contains(o.Problem, want) {
			t.Errorf("Problem %q lacks %q", o.Problem, want)
		}
	}
}

func TestRenderPublishesRecord(t *testing.T) {
	o := validOptions()
	o.Partitions, o.Params = 7, "fp"
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 0, 6), Generation: 9}
	base := peerLease("ns", "r", "r-0", "old", func(l *coordinationv1.Lease) { l.Labels["team"] = "x" })
	l := m.render(base, rec, base.Spec.RenewTime.Time, true)
	got := Parse(l, "r", 7)
	if got.Problem != "" || got.Incarnation != m.Incarnation() || !got.Claim.Equal(rec.Claim) || got.Generation != 9 ||
		got.State != handoff.StateActive || got.Fingerprint != "fp" || l.Labels[LabelPartitions] != "2" || l.Labels["team"] != "x" {
		t.Errorf("rendered %+v from %+v", l, rec)
	}
	if *l.Spec.LeaseTransitions != 1 {
		t.Errorf("leaseTransitions %d after a takeover, want 1", *l.Spec.LeaseTransitions)
	}
	if base.Annotations[AnnotationIncarnation] != "old" {
		t.Error("render mutated its base")
	}
}

// Record.Warm, Record.Weights and Record.Returning travel in annotations of their own:
// written when reported, removed when not (a replica that turned its sharded
// cache or Balance off), and read as not reported when they cannot be
// decoded: they are advisory, so they never make a Lease malformed.
func TestAdvisoryAnnotationsRoundTrip(t *testing.T) {
	o := validOptions()
	o.Partitions, o.Params = 7, "fp"
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 0, 6), Generation: 9,
		Warm: shard.NewPartitionSet(7, 6), Weights: assign.Weights{0, 3, 0, 0, 0, 0, 250}, Returning: true}
	l := m.render(nil, rec, time.Unix(1000, 0), false)
	if got := Parse(l, "r", 7); got.Problem != "" || !got.Warm.Equal(rec.Warm) || !got.Weights.Equal(rec.Weights) || !got.Returning {
		t.Fatalf("warm %v, weights %v, returning %v (problem %q), want %v, %v, true", got.Warm, got.Weights, got.Returning, got.Problem, rec.Warm, rec.Weights)
	}
	rec.Warm, rec.Weights, rec.Returning = shard.PartitionSet{}, nil, false
	l = m.render(l, rec, time.Unix(1001, 0), false)
	for _, a := range []string{AnnotationWarm, AnnotationWeights, AnnotationReturning} {
		if _, ok := l.Annotations[a]; ok {
			t.Fatalf("annotation %s kept after it stopped being reported", a)
		}
	}
	if got := Parse(l, "r", 7); got.Warm.Size() != 0 || got.Weights != nil {
		t.Fatalf("warm %v, weights %v read from a Lease without them; want not reported", got.Warm, got.Weights)
	}
	l.Annotations[AnnotationWarm] = "v1:11:AA"
	l.Annotations[AnnotationWeights] = assign.Weights{1, 2, 3}.Encode() // another partition count
	l.Annotations[AnnotationReturning] = "yes"
	if got := Parse(l, "r", 7); got.Problem != "" || got.Warm.Size() != 0 || got.Weights != nil || got.Returning {
		t.Fatalf("undecodable annotations: problem %q, warm %v, weights %v, returning %v; want no problem and not reported", got.Problem, got.Warm, got.Weights, got.Returning)
	}
	l.Annotations[AnnotationWarm] = EncodeClaim(shard.NewPartitionSet(7, 1))
	l.Annotations[AnnotationWeights] = assign.Weights{1, 1, 1, 1, 1, 1, 1}.Encode()
	l.Annotations[AnnotationReturning] = "true"
	released := Released(l, 7)
	for _, a := range []string{AnnotationWarm, AnnotationWeights, AnnotationReturning} {
		if _, ok := released.Annotations[a]; ok {
			t.Fatalf("Released kept %s", a)
		}
	}
}

// A cache status is read back as written; one that does not parse, or half
// of one, reads as none, without making the Lease malformed; Released
// drops it with the claim.
func TestCacheStatusAnnotations(t *testing.T) {
	for _, tc := range []struct {
		mode, objects string
		want          *CacheStatus
	}{
		{"labels", "0", &CacheStatus{Mode: "labels"}},
		{"full", "100000", &CacheStatus{Mode: "full", Objects: 100000}},
		{"", "5", nil},
		{"labels", "", nil},
		{"labels", "-3", nil},
		{"labels", "1e3", nil},
		{"Labels", "3", nil},
		{"labels and more", "3", nil},
	} {
		l := peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) {
			if tc.mode != "" {
				l.Annotations[AnnotationCacheMode] = tc.mode
			}
			if tc.objects != "" {
				l.Annotations[AnnotationCachedObjects] = tc.objects
			}
		})
		got := Parse(l, "r", 7)
		if got.Problem != "" {
			t.Errorf("%q/%q: problem %q; an advisory annotation must not make the Lease malformed", tc.mode, tc.objects, got.Problem)
		}
		if (got.Cache == nil) != (tc.want == nil) || (got.Cache != nil && *got.Cache != *tc.want) {
			t.Errorf("%q/%q: cache %+v, want %+v", tc.mode, tc.objects, got.Cache, tc.want)
		}
	}
	o := validOptions()
	o.Partitions = 7
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	rec := handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 1)}
	if l := m.render(nil, rec, time.Unix(1000, 0), false); Parse(l, "r", 7).Cache != nil {
		t.Errorf("rendered cache annotations before SetCacheStatus: %v", l.Annotations)
	}
	m.SetCacheStatus("server", 42)
	l := m.render(nil, rec, time.Unix(1000, 0), false)
	if got := Parse(l, "r", 7).Cache; got == nil || *got != (CacheStatus{Mode: "server", Objects: 42}) {
		t.Fatalf("rendered cache %+v, want server/42", got)
	}
	released := Released(l, 7)
	for _, a := range []string{AnnotationCacheMode, AnnotationCachedObjects} {
		if _, ok := released.Annotations[a]; ok {
			t.Errorf("Released kept %s", a)
		}
	}
}

func TestClaimEmptyIsReadAtAnyPartitionCount(t *testing.T) {
	for _, tc := range []struct {
		claim string
		empty bool
	}{
		{EncodeClaim(shard.NewPartitionSet(1021)), true},       // another ring size, nothing claimed
		{EncodeClaim(shard.NewPartitionSet(1021, 5)), false},   // another ring size, something claimed
		{EncodeClaim(shard.NewPartitionSet(271)), true},        // this ring, nothing claimed
		{EncodeClaim(shard.NewPartitionSet(271, 0, 9)), false}, // this ring, claims
		{"v2:1021:whatever", false},                            // unreadable: may claim anything
		{"garbage", false},
	} {
		l := peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationClaim] = tc.claim })
		if got := Parse(l, "r", 271).ClaimEmpty; got != tc.empty {
			t.Errorf("claim %q: ClaimEmpty = %v, want %v", tc.claim, got, tc.empty)
		}
	}
}

func TestClaimPartitions(t *testing.T) {
	for _, tc := range []struct {
		text string
		p    int
		ok   bool
	}{
		{EncodeClaim(shard.FullPartitionSet(271)), 271, true},
		{EncodeClaim(shard.NewPartitionSet(1021, 5)), 1021, true},
		{"v1:271:", 0, false},
		{"v1:x:AA", 0, false},
		{"garbage", 0, false},
		{"", 0, false},
	} {
		p, ok := ClaimPartitions(tc.text)
		if p != tc.p || ok != tc.ok {
			t.Errorf("ClaimPartitions(%q) = %d, %v; want %d, %v", tc.text, p, ok, tc.p, tc.ok)
		}
	}
}
