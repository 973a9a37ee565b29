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
