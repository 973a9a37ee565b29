package handoff

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// priorIncarnation stores, as the own Lease, one written by an earlier
// incarnation of a that recorded pod uid-1 and claims everything.
func priorIncarnation(h *harness) *Observed {
	prev := &Observed{Record: Record{Identity: "a", Incarnation: "old", State: StateActive,
		Claim: shard.FullPartitionSet(7), Generation: 9, Fingerprint: testRing.Fingerprint(), Pod: "uid-1"}, Version: h.version()}
	h.own = prev
	return prev
}

// A container restarted in place: the kubelet reports the previous one
// terminated, with the previous incarnation's marker, in the same pod. The
// new incarnation takes its Lease over at once, without waiting it out or
// confirming it.
func TestProvenDeathOfPreviousIncarnationTakesOverAtOnce(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	h.c.SetPod("uid-1")
	prev := priorIncarnation(h)
	r := h.sync()
	if r.Publish != nil || r.TakeOver != nil {
		t.Fatal("wrote over a live Lease of another incarnation before any proof")
	}
	want := Death{Identity: "a", PodUID: "uid-1", Incarnation: "old"}
	if !slices.Equal(r.ProveDeath, []Death{want}) {
		t.Fatalf("ProveDeath = %v; want %v", r.ProveDeath, want)
	}
	h.advance(time.Second)
	h.c.Terminated(Death{PodUID: "uid-1", Incarnation: "old"})
	r = h.ready()
	if r.TakeOver == nil || *r.TakeOver != (LeaseRef{Identity: "a", Version: prev.Version}) || len(r.Confirm) != 0 {
		t.Fatalf("after the proof: take over %v confirm %v; want the judged version at once, no confirming read", r.TakeOver, r.Confirm)
	}
	if r.Publish == nil || r.Publish.Incarnation != "inc-a" || r.Publish.Pod != "uid-1" {
		t.Fatalf("Publish = %+v; want this incarnation's Record with its pod", r.Publish)
	}
	if len(r.ProveDeath) != 0 {
		t.Fatalf("still asks for a proof after it: %v", r.ProveDeath)
	}
	if r := h.sync(); r.TakeOver != nil || h.c.Err() != nil {
		t.Fatalf("own write observed: take over %v err %v", r.TakeOver, h.c.Err())
	}
}

// What is not proof: the pod is gone (a force delete, or the pod garbage
// collector), so the shell reports nothing; the pod was recreated (another
// UID) and its containers terminated; a terminated container of the same
// pod whose message names another process; a report about this very
// process. In each case the previous incarnation's Lease is waited out for
// a full LeaseDuration and confirmed, as without proofs.
func TestNoProofWaitsThePreviousIncarnationOut(t *testing.T) {
	for name, report := range map[string][]Death{
		"pod force-deleted":        nil,
		"pod garbage-collected":    nil,
		"pod recreated, new UID":   {{PodUID: "uid-2", Incarnation: "old"}},
		"other container's marker": {{PodUID: "uid-1", Incarnation: "older"}},
		"own marker":               {{PodUID: "uid-1", Incarnation: "inc-a"}},
		"empty UID":                {{PodUID: "", Incarnation: "old"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "a")
			h.c.CachesSynced()
			prev := priorIncarnation(h)
			h.sync()
			for _, d := range report {
				h.c.Terminated(d)
			}
			r := h.pass(testLease - time.Millisecond)
			if r.Publish != nil || len(r.Confirm) != 0 || !errors.Is(h.c.Err(), ErrIdentityInUse) {
				t.Fatalf("before LeaseDuration: publish %+v confirm %v err %v; want waiting", r.Publish, r.Confirm, h.c.Err())
			}
			if r := h.c.Ready(h.now); r.TakeOver != nil {
				t.Fatalf("took over at %v without proof", r.TakeOver)
			}
			h.advance(time.Millisecond)
			r = h.c.Ready(h.now)
			if len(r.Confirm) != 1 || r.Confirm[0] != (LeaseRef{Identity: "a", Version: prev.Version}) {
				t.Fatalf("at LeaseDuration: Confirm = %v; want the expiry confirmed", r.Confirm)
			}
		})
	}
}

// A peer's Lease that stops changing is checked against its pod after
// RenewDeadline/2; once its death is proven, its claims are void at once,
// before any LeaseDuration, and stay void through a write of the dead
// process that lands late. A later incarnation's Lease is not void.
func TestProvenDeadPeerIsVoidedEarly(t *testing.T) {
	h := newHarness(t, "a")
	h.c.CachesSynced()
	b := h.setPeer("b", StateLeaving, 3)
	b.Pod = "uid-b"
	h.settle()
	if h.c.Active().Has(3) || !h.c.Blocked().Equal(set(3)) {
		t.Fatalf("active %v blocked %v while b claims 3", h.c.Active(), h.c.Blocked())
	}
	h.pass(testDeadline/2 - time.Second)
	if r := h.c.Ready(h.now); len(r.ProveDeath) != 0 {
		t.Fatalf("asked for a proof of a peer silent for less than RenewDeadline/2: %v", r.ProveDeath)
	}
	h.pass(time.Second)
	r := h.c.Ready(h.now)
	if want := (Death{Identity: "b", PodUID: "uid-b", Incarnation: "inc-b"}); !slices.Contains(r.ProveDeath, want) {
		t.Fatalf("ProveDeath = %v; want %v", r.ProveDeath, want)
	}
	// The pod reports another container terminated: no proof.
	h.c.Terminated(Death{PodUID: "uid-b", Incarnation: "inc-b-earlier"})
	if r := h.ready(); r.Activate.Has(3) {
		t.Fatal("activated 3 on another container's termination")
	}
	h.c.Terminated(Death{PodUID: "uid-b", Incarnation: "inc-b"})
	r = h.ready()
	if !r.Activate.Has(3) || len(r.Confirm) != 0 {
		t.Fatalf("after b's proven death, %v after its last write: activated %v confirm %v; want 3 at once", testDeadline/2, r.Activate, r.Confirm)
	}
	// b's last renew lands late: still b's dead process.
	late := h.setPeer("b", StateLeaving, 3)
	late.Pod = "uid-b"
	if h.sync(); !h.c.Active().Has(3) || !h.c.Blocked().IsEmpty() || !h.c.peers.byID["b"].void {
		t.Fatalf("a late write of the dead process revived its claim: active %v blocked %v", h.c.Active(), h.c.Blocked())
	}
	// b's next incarnation writes its Lease (taken over): it counts.
	next := h.setPeer("b", StateJoining, 3)
	next.Incarnation, next.Pod = "inc-b2", "uid-b"
	h.sync()
	if h.c.peers.byID["b"].void {
		t.Fatal("a live incarnation's Lease counts as proven dead")
	}
}

// A damaged Lease (a third party's edit) proves nothing about its pod and
// incarnation fields: it is waited out.
func TestDamagedLeaseIsNotProvenDead(t *testing.T) {
	h := activeAlone(t, "a")
	b := h.setPeer("b", StateActive, 3)
	b.Pod, b.Problem = "uid-b", "damaged by hand"
	h.c.Terminated(Death{PodUID: "uid-b", Incarnation: "inc-b"})
	h.sync()
	h.c.Drained(shard.FullPartitionSet(7).Difference(h.c.Active()))
	h.settle()
	r := h.pass(testLease - time.Second)
	if rd := h.c.Ready(h.now); !r.Activate.IsEmpty() || len(rd.ProveDeath) != 0 {
		t.Fatalf("damaged Lease: activated %v, asked for proofs %v", r.Activate, rd.ProveDeath)
	}
}

func TestProvesDeath(t *testing.T) {
	d := Death{Identity: "r-0", PodUID: "u1", Incarnation: "abc"}
	marker := TerminationMarker("abc")
	for name, c := range map[string]struct {
		d    Death
		pod  PodRead
		want bool
	}{
		"the marker, as the kubelet copies the file": {d, PodRead{UID: "u1", Terminated: []string{marker + "\n"}}, true},
		"among other containers' ends":               {d, PodRead{UID: "u1", Terminated: []string{"", TerminationMarker("x"), marker}}, true},
		"pod gone":                                   {d, PodRead{}, false},
		"pod recreated under the name":               {d, PodRead{UID: "u2", Terminated: []string{marker}}, false},
		"another incarnation's end":                  {d, PodRead{UID: "u1", Terminated: []string{TerminationMarker("abd")}}, false},
		"a log tail that quotes the marker":          {d, PodRead{UID: "u1", Terminated: []string{"panic: ... " + marker}}, false},
		"no container terminated":                    {d, PodRead{UID: "u1"}, false},
		"a Lease that recorded no pod":               {Death{Identity: "r-0", Incarnation: "abc"}, PodRead{UID: "u1", Terminated: []string{marker}}, false},
		"a Lease that recorded no incarnation":       {Death{Identity: "r-0", PodUID: "u1"}, PodRead{UID: "u1", Terminated: []string{TerminationMarker("")}}, false},
	} {
		if got := ProvesDeath(c.d, c.pod); got != c.want {
			t.Errorf("%s: ProvesDeath = %v, want %v", name, got, c.want)
		}
	}
}
