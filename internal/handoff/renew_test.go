package handoff

import "testing"

func TestJudgeAcquire(t *testing.T) {
	const ring, id, inc = "r", "r-0", "i1"
	member := func(mod func(*OwnLease)) OwnLease {
		l := OwnLease{OwnRead: OwnRead{Found: true, Incarnation: "i0", Version: "7"}, Ring: ring, Holder: id}
		mod(&l)
		return l
	}
	for name, c := range map[string]struct {
		takeOver string
		read     OwnLease
		want     AcquireVerdict
	}{
		"gone":                                    {"", OwnLease{}, AcquireCreate},
		"written by this incarnation":             {"", member(func(l *OwnLease) { l.Incarnation = inc }), AcquireAdopt},
		"another incarnation's, not judged":       {"", member(func(*OwnLease) {}), AcquireWait},
		"another incarnation's, judged":           {"7", member(func(*OwnLease) {}), AcquireTakeOver},
		"judged at an older version":              {"6", member(func(*OwnLease) {}), AcquireWait},
		"relabelled out of the ring":              {"", member(func(l *OwnLease) { l.Ring = "" }), AcquireRestoreLabel},
		"relabelled, this incarnation's":          {"", member(func(l *OwnLease) { l.Ring, l.Incarnation = "other", inc }), AcquireRestoreLabel},
		"relabelled, its incarnation edited away": {"", member(func(l *OwnLease) { l.Ring, l.Incarnation = "", "" }), AcquireRestoreLabel},
		"relabelled and judged":                   {"7", member(func(l *OwnLease) { l.Ring = "" }), AcquireRestoreLabel},
		"another holder, another ring":            {"", member(func(l *OwnLease) { l.Ring, l.Holder = "r-x", "someone-else" }), AcquireNameTaken},
		"another holder, no label":                {"7", member(func(l *OwnLease) { l.Ring, l.Holder = "", "" }), AcquireNameTaken},
	} {
		if got := JudgeAcquire(ring, id, inc, c.takeOver, c.read); got != c.want {
			t.Errorf("%s: JudgeAcquire = %d, want %d", name, got, c.want)
		}
	}
}
