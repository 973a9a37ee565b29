package handoff

import (
	"testing"
	"time"
)

func TestExpired(t *testing.T) {
	for _, tc := range []struct {
		silent time.Duration
		want   bool
	}{
		{0, false},
		{testLease - time.Nanosecond, false},
		{testLease, true},
		{2 * testLease, true},
	} {
		if got := Expired(tc.silent, testLease); got != tc.want {
			t.Errorf("Expired(%v, %v) = %v, want %v", tc.silent, testLease, got, tc.want)
		}
	}
}

func TestRingMember(t *testing.T) {
	fp := testRing.Fingerprint()
	member := Observed{Record: Record{Identity: "b", State: StateActive, Fingerprint: fp, Claim: set(1)}, Version: "1"}
	for _, tc := range []struct {
		name   string
		mutate func(*Observed)
		want   bool
	}{
		{"active, well-formed, this configuration", func(*Observed) {}, true},
		{"active with an empty claim", func(o *Observed) { o.Claim = set() }, true},
		{"joining", func(o *Observed) { o.State = StateJoining }, false},
		{"leaving", func(o *Observed) { o.State = StateLeaving }, false},
		{"another configuration", func(o *Observed) { o.Fingerprint = "xx1-p1021-l1.25-r40" }, false},
		{"no configuration", func(o *Observed) { o.Fingerprint = "" }, false},
		{"malformed", func(o *Observed) { o.Problem = "annotation kshard.io/incarnation is missing" }, false},
		{"claim unreadable", func(o *Observed) { o.ClaimUnknown = true }, false},
		{"being deleted", func(o *Observed) { o.Terminating = true }, false},
		{"leaving, keeping its place", func(o *Observed) { o.State, o.Returning = StateLeaving, true }, true},
		{"joining, returning to its place", func(o *Observed) { o.State, o.Returning = StateJoining, true }, true},
		{"keeping its place, of another configuration", func(o *Observed) { o.State, o.Returning, o.Fingerprint = StateLeaving, true, "other" }, false},
		{"keeping its place, malformed", func(o *Observed) { o.State, o.Returning, o.Problem = StateLeaving, true, "bad" }, false},
		{"keeping its place, being deleted", func(o *Observed) { o.State, o.Returning, o.Terminating = StateLeaving, true, true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := member
			l.Record = member.Record.Clone()
			tc.mutate(&l)
			if got := RingMember(l, fp); got != tc.want {
				t.Fatalf("RingMember = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJudgeConfirm(t *testing.T) {
	for _, tc := range []struct {
		name         string
		uid, version string
		read         LeaseRead
		want         ConfirmVerdict
	}{
		{"same object, same version", "u1", "7", LeaseRead{Found: true, UID: "u1", Version: "7"}, ConfirmSilent},
		{"same version, UIDs unknown", "", "7", LeaseRead{Found: true, Version: "7"}, ConfirmSilent},
		{"same version, read without UID", "u1", "7", LeaseRead{Found: true, Version: "7"}, ConfirmSilent},
		{"gone", "u1", "7", LeaseRead{}, ConfirmGone},
		{"renewed since", "u1", "7", LeaseRead{Found: true, UID: "u1", Version: "8"}, ConfirmAlive},
		{"deleted and created again", "u1", "7", LeaseRead{Found: true, UID: "u2", Version: "7"}, ConfirmAlive},
		{"changed, read without version", "", "7", LeaseRead{Found: true}, ConfirmAlive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeConfirm(tc.uid, tc.version, tc.read); got != tc.want {
				t.Fatalf("JudgeConfirm(%q, %q, %+v) = %v, want %v", tc.uid, tc.version, tc.read, got, tc.want)
			}
		})
	}
}

func TestLeftForReturn(t *testing.T) {
	left := Observed{Record: Record{Identity: "b", Incarnation: "b1", State: StateLeaving, Returning: true,
		Fingerprint: testRing.Fingerprint(), Claim: set()}, Version: "1"}
	for _, tc := range []struct {
		name   string
		mutate func(*Observed)
		want   bool
	}{
		{"leaving, keeping its place, claiming nothing", func(*Observed) {}, true},
		{"still claiming (draining)", func(o *Observed) { o.Claim = set(2) }, false},
		{"not keeping its place", func(o *Observed) { o.Returning = false }, false},
		{"active", func(o *Observed) { o.State = StateActive }, false},
		{"joining, returning", func(o *Observed) { o.State = StateJoining }, false},
		{"malformed", func(o *Observed) { o.Problem = "bad" }, false},
		{"claim unreadable", func(o *Observed) { o.ClaimUnknown = true }, false},
		{"no incarnation", func(o *Observed) { o.Incarnation = "" }, false},
		{"being deleted", func(o *Observed) { o.Terminating = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := left
			l.Record = left.Record.Clone()
			tc.mutate(&l)
			if got := leftForReturn(l); got != tc.want {
				t.Fatalf("LeftForReturn = %v, want %v", got, tc.want)
			}
		})
	}
}
