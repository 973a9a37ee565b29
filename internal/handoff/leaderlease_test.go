package handoff

import (
	"testing"
	"time"
)

func TestJudgeLeaderLease(t *testing.T) {
	const ring, every, ld = "kshard-ring/r", 2 * time.Second, 10 * time.Second
	for _, tc := range []struct {
		name string
		l    LeaderLease
		want LeaderLeaseVerdict
		held bool
	}{
		{"missing", LeaderLease{}, LeaderLeaseTake, false},
		{"released by the old leader", LeaderLease{Found: true, Duration: 15 * time.Second}, LeaderLeaseTake, false},
		{"old leader live", LeaderLease{Found: true, Holder: "op-7d9f", Duration: 15 * time.Second, Unchanged: 14 * time.Second}, LeaderLeaseWait, false},
		{"old leader expired", LeaderLease{Found: true, Holder: "op-7d9f", Duration: 15 * time.Second, Unchanged: 15 * time.Second}, LeaderLeaseTake, false},
		{"no duration: the ring's", LeaderLease{Found: true, Holder: "op-7d9f", Unchanged: 9 * time.Second}, LeaderLeaseWait, false},
		{"no duration, expired by the ring's", LeaderLease{Found: true, Holder: "op-7d9f", Unchanged: ld}, LeaderLeaseTake, false},
		{"the ring's, fresh", LeaderLease{Found: true, Holder: ring, Duration: ld, Unchanged: time.Second}, LeaderLeaseHeld, true},
		{"the ring's, renewal due", LeaderLease{Found: true, Holder: ring, Duration: ld, Unchanged: every}, LeaderLeaseTake, true},
		{"the ring's, expired", LeaderLease{Found: true, Holder: ring, Duration: ld, Unchanged: ld}, LeaderLeaseTake, false},
	} {
		if got := JudgeLeaderLease(ring, tc.l, every, ld); got != tc.want {
			t.Errorf("%s: JudgeLeaderLease = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.l.HeldBy(ring, ld); got != tc.held {
			t.Errorf("%s: HeldBy = %v, want %v", tc.name, got, tc.held)
		}
	}
}
