package membership

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/lease"
	"github.com/kshard/kshard/shard"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// unit is a Member's environment in unit tests: a strict fake API server and
// a fake clock at t0, with the default timings (10s / 2s / 6.67s / 3.33s).
type unit struct {
	api *fakeAPI
	clk *clocktesting.FakeClock
	reg *prometheus.Registry
	log *logSink
	t   *testing.T
}

func newUnit(t *testing.T) *unit {
	return &unit{api: newFakeAPI(), clk: clocktesting.NewFakeClock(t0), reg: prometheus.NewRegistry(), t: t}
}

func (u *unit) member(identity string, mutate ...func(*Options)) *Member {
	u.t.Helper()
	logger, sink := newTestLogger(u.t)
	u.log = sink
	o := Options{
		Client: u.api, Namespace: "ns", Ring: "r", Identity: identity, Partitions: 7,
		Params: "fp", Clock: u.clk, Logger: logger, Registerer: u.reg,
	}
	for _, f := range mutate {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		u.t.Fatal(err)
	}
	return m
}

func (u *unit) get(name string) *coordinationv1.Lease {
	u.t.Helper()
	l, err := u.api.CoordinationV1().Leases("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	return l
}

// write updates a Lease as another process would.
func (u *unit) write(name string, mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
	u.t.Helper()
	l := u.get(name)
	mutate(l)
	out, err := u.api.CoordinationV1().Leases("ns").Update(context.Background(), l, metav1.UpdateOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	return out
}

func (u *unit) create(l *coordinationv1.Lease) *coordinationv1.Lease {
	u.t.Helper()
	out, err := u.api.CoordinationV1().Leases("ns").Create(context.Background(), l, metav1.CreateOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	return out
}

func TestCreatesLeaseAndRenewsOncePerPeriod(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)

	if sent, ok := m.LastRenew(); !ok || !sent.Equal(t0) {
		t.Fatalf("LastRenew = %v, %v; want the send time of the create, %v", sent, ok, t0)
	}
	l := u.get("r-a")
	wantLabels := map[string]string{lease.LabelRing: "r", LabelState: string(handoff.StateJoining), LabelPartitions: "0"}
	wantAnnotations := map[string]string{
		AnnotationClaim: EncodeClaim(shard.NewPartitionSet(7)), AnnotationIncarnation: m.Incarnation(),
		AnnotationGeneration: "0", AnnotationParams: "fp",
	}
	for k, v := range wantLabels {
		if l.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, l.Labels[k], v)
		}
	}
	for k, v := range wantAnnotations {
		if l.Annotations[k] != v {
			t.Errorf("annotation %s=%q, want %q", k, l.Annotations[k], v)
		}
	}
	if *l.Spec.HolderIdentity != "a" || *l.Spec.LeaseDurationSeconds != 10 ||
		!l.Spec.RenewTime.Time.Equal(t0) || !l.Spec.AcquireTime.Time.Equal(t0) {
		t.Errorf("spec = %+v", l.Spec)
	}

	// One minute of local time in 100ms steps: the Lease is written once per
	// RenewPeriod and at no other time.
	before := u.api.writesOf("r-a")
	for range 600 {
		step(t, u.clk, 100*time.Millisecond)
	}
	testwait.True(t, waitTimeout, "the heartbeat to wait again", u.clk.HasWaiters)
	writes := u.api.writesOf("r-a") - before
	t.Logf("writes of the own Lease per minute at steady state: %d (RenewPeriod 2s)", writes)
	if writes != 30 {
		t.Errorf("%d writes in a minute, want 30", writes)
	}
	end := t0.Add(time.Minute)
	if l := u.get("r-a"); !l.Spec.RenewTime.Time.Equal(end) || !l.Spec.AcquireTime.Time.Equal(t0) {
		t.Errorf("renewTime %v acquireTime %v; want %v and %v", l.Spec.RenewTime, l.Spec.AcquireTime, end, t0)
	}
	if sent, _ := m.LastRenew(); !sent.Equal(end) {
		t.Errorf("LastRenew %v, want %v", sent, end)
	}
	if got := counterValue(t, u.reg, "kshard_lease_renews_total", map[string]string{"ring": "r"}); got != 31 {
		t.Errorf("kshard_lease_renews_total = %v, want 31", got)
	}
}

func TestSetDesiredPublishesPromptly(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	m.SetDesired(handoff.Record{Generation: 3}) // before Run: published by the create
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)
	if got := u.get("r-a").Annotations[AnnotationGeneration]; got != "3" {
		t.Fatalf("created with generation %q, want 3", got)
	}

	testwait.True(t, waitTimeout, "the heartbeat to wait", u.clk.HasWaiters)
	select {
	case <-m.Changes(): // drain what acquisition signalled
	default:
	}
	before := u.api.writesOf("r-a")
	claim := shard.NewPartitionSet(7, 1, 2, 3)
	m.SetDesired(handoff.Record{State: handoff.StateActive, Claim: claim, Generation: 4})
	claim.Add(6) // the caller's later mutation must not leak into the Lease
	// No clock step: the write is prompt, not at the next period.
	testwait.True(t, waitTimeout, "the prompt write", func() bool { return u.api.writesOf("r-a") == before+1 })

	select {
	case <-m.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no Changes signal after the write")
	}
	l := u.get("r-a")
	if l.Labels[LabelState] != string(handoff.StateActive) || l.Labels[LabelPartitions] != "3" ||
		l.Annotations[AnnotationClaim] != EncodeClaim(shard.NewPartitionSet(7, 1, 2, 3)) || l.Annotations[AnnotationGeneration] != "4" {
		t.Errorf("lease after SetDesired: labels %v annotations %v", l.Labels, l.Annotations)
	}
	testwait.True(t, waitTimeout, "lastWritten to catch up", func() bool { _, v := m.lastWritten(); return v == l.ResourceVersion })
	rec, _ := m.lastWritten()
	want := handoff.Record{Identity: "a", Incarnation: m.Incarnation(), State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 1, 2, 3), Generation: 4, Fingerprint: "fp"}
	if !rec.Equal(want) {
		t.Errorf("lastWritten = %+v", rec)
	}
	testwait.True(t, waitTimeout, "the informer to observe the write", func() bool {
		o, ok := observedByName(m.Snapshot(), "r-a")
		return ok && o.Version == l.ResourceVersion
	})

	// Setting what is already written asks for no write.
	testwait.True(t, waitTimeout, "the heartbeat to wait again", u.clk.HasWaiters)
	m.SetDesired(handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(7, 1, 2, 3), Generation: 4})
	if len(m.wake) != 0 {
		t.Error("SetDesired of the written record requested a write")
	}
	m.SetDesired(handoff.Record{State: "bogus"})
	if len(m.wake) != 0 || u.log.count("unknown state") != 1 {
		t.Error("a record with an unknown state was not refused")
	}
	// A claim over another partition count is refused, not resized: the
	// resize once dropped what it could not hold without a word.
	m.SetDesired(handoff.Record{State: handoff.StateActive, Claim: shard.NewPartitionSet(m.opts.Partitions+5, m.opts.Partitions+2)})
	if len(m.wake) != 0 || u.log.count("another partition count") != 1 {
		t.Error("a record whose claim is over another partition count was not refused")
	}
}

func TestLastChangeIsLocalObservationTime(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)

	step(t, u.clk, 500*time.Millisecond) // between heartbeats: nothing else moves
	seen := u.clk.Now()
	// The peer's renewTime is decades off: it must not matter.
	peer := u.create(peerLease("ns", "r", "b", "inc-b"))
	testwait.True(t, waitTimeout, "the peer to be observed", func() bool { _, ok := observedByName(m.Snapshot(), "r-b"); return ok })
	o, _ := observedByName(m.Snapshot(), "r-b")
	if !o.LastChange.Equal(seen) || o.Version != peer.ResourceVersion || o.RenewTime.Year() != 2001 {
		t.Fatalf("observed %+v; want LastChange %v (local), RenewTime from the Lease", o, seen)
	}

	// Seeing the same version again (a relist) is no change.
	step(t, u.clk, 500*time.Millisecond)
	if err := m.peers.Replace([]any{u.get("r-b"), u.get("r-a")}, ""); err != nil {
		t.Fatal(err)
	}
	if o, _ := observedByName(m.Snapshot(), "r-b"); !o.LastChange.Equal(seen) {
		t.Errorf("LastChange moved to %v on a relist of the same version", o.LastChange)
	}

	changed := u.clk.Now()
	next := u.write("r-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationGeneration] = "1" })
	testwait.True(t, waitTimeout, "the new version to be observed", func() bool {
		o, _ := observedByName(m.Snapshot(), "r-b")
		return o.Version == next.ResourceVersion
	})
	if o, _ := observedByName(m.Snapshot(), "r-b"); !o.LastChange.Equal(changed) || o.Generation != 1 {
		t.Errorf("after the peer's write: %+v, want LastChange %v", o, changed)
	}
	snap := m.Snapshot()
	if len(snap) != 2 || snap[0].Identity != "a" || snap[1].Identity != "b" {
		t.Errorf("snapshot %+v, want a and b in order", snap)
	}
}

// TestTakeOverOnlyWhenAllowed: a Lease of another incarnation is never
// overwritten by Run on its own, however long it stays unchanged; TakeOver of
// another version changes nothing; TakeOver of the current version makes Run
// take it over with one update conditioned on that version.
func TestTakeOverOnlyWhenAllowed(t *testing.T) {
	u := newUnit(t)
	old := u.create(peerLease("ns", "r", "a", "crashed"))
	m := u.member("a")
	run(t, m)
	for range 30 {
		step(t, u.clk, time.Second)
	}
	m.TakeOver("no-such-version")
	for range 3 {
		step(t, u.clk, time.Second)
	}
	if m.Synced() || u.get("r-a").Annotations[AnnotationIncarnation] != "crashed" {
		t.Fatal("took over a Lease it was not allowed to")
	}
	if n := u.log.count("is held by another process"); n != 1 {
		t.Errorf("the wait was logged %d times, want once", n)
	}
	m.TakeOver(old.ResourceVersion)
	testwait.True(t, waitTimeout, "the takeover", func() bool { return u.get("r-a").Annotations[AnnotationIncarnation] == m.Incarnation() })
	l := u.get("r-a")
	if *l.Spec.LeaseTransitions != 1 || l.Labels[LabelState] != string(handoff.StateJoining) || l.Spec.AcquireTime == nil {
		t.Errorf("taken over with transitions %d state %q acquire %v; want 1, joining, set", *l.Spec.LeaseTransitions, l.Labels[LabelState], l.Spec.AcquireTime)
	}
	testwait.True(t, waitTimeout, "Synced", m.Synced)
}

// TestSameIdentityWritesOnlyWhenAllowed runs two Members with one identity:
// the second waits while the first renews; once allowed, it takes over, and
// the first stops writing (the handoff core above it decides to stop).
func TestSameIdentityWritesOnlyWhenAllowed(t *testing.T) {
	u := newUnit(t)
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "a Synced", a.Synced)
	b := run(t, u.member("x"))

	stepBoth := func() {
		testwait.True(t, waitTimeout, "both to wait on the clock", func() bool { return u.clk.Waiters() == 2 || a.returned() })
		u.clk.Step(time.Second)
	}
	for range 20 {
		stepBoth()
	}
	if b.Synced() || !a.Synced() {
		t.Fatalf("after 20s of a renewing: a synced %v, b synced %v; want only a", a.Synced(), b.Synced())
	}
	// a's last renew has landed once both wait on the clock again.
	testwait.True(t, waitTimeout, "both to wait on the clock", func() bool { return u.clk.Waiters() == 2 })
	b.TakeOver(u.get("r-x").ResourceVersion)
	testwait.True(t, waitTimeout, "b to take over", b.Synced)
	step(t, u.clk, 2*time.Second) // a's renew conflicts and finds b's version
	testwait.True(t, waitTimeout, "a to stop writing", func() bool { return !a.Synced() })
	for range 5 {
		step(t, u.clk, time.Second)
	}
	if l := u.get("r-x"); l.Annotations[AnnotationIncarnation] != b.Incarnation() || a.returned() {
		t.Fatalf("holder %q (b is %q), a returned %v", l.Annotations[AnnotationIncarnation], b.Incarnation(), a.returned())
	}
}

// TestDuplicateOnConflictStopsWriting covers a Member whose watch is silent:
// its next renew conflicts, the re-read shows another incarnation, and it
// stops writing without returning: the core decides what that means.
func TestDuplicateOnConflictStopsWriting(t *testing.T) {
	u := newUnit(t)
	u.api.PrependWatchReactor("leases", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "Synced", a.Synced)
	u.write("r-x", func(l *coordinationv1.Lease) { l.Annotations[AnnotationIncarnation] = "intruder" })
	step(t, u.clk, 2*time.Second)
	testwait.True(t, waitTimeout, "a to stop writing", func() bool { return !a.Synced() })
	for range 5 {
		step(t, u.clk, time.Second)
	}
	if l := u.get("r-x"); l.Annotations[AnnotationIncarnation] != "intruder" || a.returned() {
		t.Fatalf("holder %q, returned %v; want the intruder's Lease untouched and Run still running", l.Annotations[AnnotationIncarnation], a.returned())
	}
}

func TestConflictWithOwnNewerVersionIsAdopted(t *testing.T) {
	u := newUnit(t)
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "Synced", a.Synced)
	// An admin labels the Lease: our next renew conflicts, re-reads, keeps
	// the label and succeeds.
	u.write("r-x", func(l *coordinationv1.Lease) { l.Labels["team"] = "blue" })
	step(t, u.clk, 2*time.Second)
	testwait.True(t, waitTimeout, "the renew after the conflict", func() bool { s, _ := a.LastRenew(); return s.Equal(t0.Add(2 * time.Second)) })
	if l := u.get("r-x"); l.Labels["team"] != "blue" || l.Annotations[AnnotationIncarnation] != a.Incarnation() {
		t.Errorf("after adopting: labels %v", l.Labels)
	}
	if a.returned() {
		t.Errorf("Run returned %v", a.err)
	}
}

func TestLateRenewResponseIsNotCounted(t *testing.T) {
	u := newUnit(t)
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "Synced", a.Synced)
	// The next update's response arrives 4s after it was sent (RenewTimeout
	// is 3.33s).
	var fired atomic.Bool
	u.api.setHook(func(verb, _ string, _ *coordinationv1.Lease) error {
		if verb == "update" && fired.CompareAndSwap(false, true) {
			u.clk.Step(4 * time.Second)
		}
		return nil
	})
	step(t, u.clk, 2*time.Second)
	testwait.True(t, waitTimeout, "the late write to be counted as an error", func() bool {
		return counterValue(t, u.reg, "kshard_lease_renew_errors_total", nil) == 1
	})
	if sent, _ := a.LastRenew(); !sent.Equal(t0) {
		t.Fatalf("LastRenew = %v after a late response, want it to stay %v", sent, t0)
	}
	_, version := a.lastWritten()
	if version != u.get("r-x").ResourceVersion {
		t.Error("the late write's version was not adopted")
	}
	// The retry, soon (backoff ≤ RenewPeriod/8·1.2), counts again.
	step(t, u.clk, 300*time.Millisecond)
	testwait.True(t, waitTimeout, "a counted renew", func() bool { s, _ := a.LastRenew(); return s.After(t0) })
}

// TestOwnLeaseDeletedByOthersIsRecreated: a Lease deleted by hand is created
// again by the next renew (the core has fenced; peers keep its claims from a
// tombstone meanwhile); Run does not stop.
func TestOwnLeaseDeletedByOthersIsRecreated(t *testing.T) {
	for _, silentWatch := range []bool{false, true} {
		t.Run("silent watch "+strconv.FormatBool(silentWatch), func(t *testing.T) {
			u := newUnit(t)
			if silentWatch {
				u.api.PrependWatchReactor("leases", func(clienttesting.Action) (bool, watch.Interface, error) {
					return true, watch.NewFake(), nil
				})
			}
			a := run(t, u.member("x"))
			testwait.True(t, waitTimeout, "Synced", a.Synced)
			if err := u.api.CoordinationV1().Leases("ns").Delete(context.Background(), "r-x", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			step(t, u.clk, 2*time.Second) // the renew finds it gone
			testwait.True(t, waitTimeout, "the Lease to be created again", func() bool {
				l, err := u.api.CoordinationV1().Leases("ns").Get(context.Background(), "r-x", metav1.GetOptions{})
				return err == nil && l.Annotations[AnnotationIncarnation] == a.Incarnation()
			})
			testwait.True(t, waitTimeout, "a counted renew after the deletion", func() bool { s, _ := a.LastRenew(); return s.After(t0.Add(time.Second)) })
			if a.returned() {
				t.Fatalf("Run returned %v", a.err)
			}
		})
	}
}

func TestDeleteLeavesAndAllowsImmediateRestart(t *testing.T) {
	u := newUnit(t)
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "Synced", a.Synced)
	if err := a.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := u.api.CoordinationV1().Leases("ns").Get(context.Background(), "r-x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease still there after Delete: %v", err)
	}
	if a.Synced() {
		t.Error("Synced after Delete")
	}
	writes := u.api.writesOf("r-x")
	u.clk.Step(time.Minute)
	if err := a.Delete(context.Background()); err != nil {
		t.Errorf("second Delete: %v", err)
	}

	// A restart with a new incarnation acquires at once: no stale Lease.
	b := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "the restarted member Synced", b.Synced)
	if u.clk.Since(t0) != time.Minute {
		t.Error("the restart waited")
	}
	if a.returned() {
		t.Errorf("Run of the deleted member returned %v before its context ended", a.err)
	}
	if err := a.stop(); err != nil {
		t.Errorf("Run after Delete returned %v, want nil", err)
	}
	if got := u.api.writesOf("r-x") - writes; got != 1 {
		t.Errorf("%d writes after Delete, want only the restarted member's create", got)
	}
}

func TestReadPeerReadsTheAPIServer(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	ctx := context.Background()
	v1 := u.create(peerLease("ns", "r", "b", "inc-b")).ResourceVersion
	if got, err := m.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); !got.Found || got.Version != v1 || err != nil {
		t.Errorf("ReadPeer of b = %+v, %v; want found at version %s", got, err, v1)
	}
	u.write("r-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationGeneration] = "1" })
	if got, err := m.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); !got.Found || got.Version == v1 || err != nil {
		t.Errorf("ReadPeer of a rewritten Lease = %+v, %v; want found at a version other than %s", got, err, v1)
	}
	// A Lease relabelled out of the ring is absent as far as the ring
	// sees: the core keeps its claims as a tombstone, as for a deletion.
	u.write("r-b", func(l *coordinationv1.Lease) { l.Labels[lease.LabelRing] = "other" })
	if got, err := m.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); got.Found || err != nil {
		t.Errorf("ReadPeer of a Lease relabelled out of the ring = %+v, %v; want not found", got, err)
	}
	if err := u.api.CoordinationV1().Leases("ns").Delete(ctx, "r-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := m.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); got.Found || err != nil {
		t.Errorf("ReadPeer of a deleted Lease = %+v, %v; want not found", got, err)
	}
	u.api.setHook(func(string, string, *coordinationv1.Lease) error { return errors.New("connection refused") })
	if _, err := m.ReadPeer(ctx, handoff.LeaseRef{Identity: "b"}); err == nil {
		t.Error("ReadPeer hid an API error")
	}
}

func TestDeletePeerIsConditional(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	ctx := context.Background()
	v1 := u.create(peerLease("ns", "r", "b", "inc-b")).ResourceVersion
	u.write("r-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationGeneration] = "1" })
	if err := m.DeletePeer(ctx, "b", v1); err != nil {
		t.Errorf("DeletePeer of a changed Lease: %v, want nil", err)
	}
	v2 := u.get("r-b").ResourceVersion
	if u.log.count("changed since it was judged expired") != 1 {
		t.Error("the conflict was not logged")
	}
	if err := m.DeletePeer(ctx, "b", v2); err != nil {
		t.Fatal(err)
	}
	if _, err := u.api.CoordinationV1().Leases("ns").Get(ctx, "r-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("peer Lease not deleted: %v", err)
	}
	if err := m.DeletePeer(ctx, "b", v2); err != nil {
		t.Errorf("DeletePeer of a gone Lease: %v", err)
	}
	if err := m.DeletePeer(ctx, "a", v2); err == nil {
		t.Error("DeletePeer deleted the own Lease")
	}
}

// A long-expired peer's Lease with the member finalizer: one update,
// conditioned on the judged version, drops the finalizer and publishes an
// empty claim in state leaving (so no peer takes the dead holder for a
// member again), then the delete is conditioned on that update's version.
func TestDeletePeerReleasesAFinalizedLeaseFirst(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	ctx := context.Background()
	v1 := u.create(peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) {
		l.Finalizers = []string{"other.io/keep", FinalizerMember}
		l.Annotations[AnnotationClaim] = EncodeClaim(shard.NewPartitionSet(7, 1, 2))
		l.Labels[LabelPartitions] = "2"
	})).ResourceVersion
	var updated *coordinationv1.Lease
	var deleted bool
	u.api.setHook(func(verb, name string, obj *coordinationv1.Lease) error {
		switch verb {
		case "update":
			if deleted {
				t.Error("an update after the delete")
			}
			updated = obj.DeepCopy()
		case "delete":
			if updated == nil {
				t.Error("deleted before the finalizer was removed")
			}
			deleted = true
		}
		return nil
	})
	if err := m.DeletePeer(ctx, "b", v1); err != nil {
		t.Fatal(err)
	}
	switch {
	case updated == nil:
		t.Fatal("no update before the delete")
	case updated.ResourceVersion != v1:
		t.Errorf("update conditioned on %q; want the judged version %q", updated.ResourceVersion, v1)
	case !slices.Equal(updated.Finalizers, []string{"other.io/keep"}):
		t.Errorf("finalizers after the update %v; want only the other one kept", updated.Finalizers)
	case updated.Labels[LabelState] != string(handoff.StateLeaving) || updated.Labels[LabelPartitions] != "0":
		t.Errorf("labels after the update %v; want state leaving, 0 partitions", updated.Labels)
	}
	if o := Parse(updated, "r", 7); o.Problem != "" || !o.Claim.IsEmpty() || o.Incarnation != "inc-b" {
		t.Errorf("the released Lease reads as %+v; want inc-b's well-formed empty claim", o)
	}
	if !deleted {
		t.Error("not deleted after the update")
	}
}

func TestMalformedLeasesAreReportedOncePerVersion(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)

	u.create(peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationClaim] = "garbage" }))
	u.create(peerLease("ns", "r", "c", "inc-c", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }))
	testwait.True(t, waitTimeout, "three Leases", func() bool { return len(m.Snapshot()) == 3 })

	b, _ := observedByName(m.Snapshot(), "r-b")
	c, _ := observedByName(m.Snapshot(), "r-c")
	if !b.ClaimUnknown || b.Problem == "" {
		t.Errorf("garbage claim: %+v, want ClaimUnknown and a Problem", b)
	}
	if c.ClaimUnknown || c.Problem == "" || c.Identity != "" {
		t.Errorf("no holder: %+v, want a Problem", c)
	}
	invalid := func(reason string) float64 {
		return counterValue(t, u.reg, "kshard_lease_invalid_total", map[string]string{"reason": reason})
	}
	if invalid(reasonBadClaim) != 1 || invalid(reasonNoHolder) != 1 || u.log.count("malformed") != 2 {
		t.Fatalf("bad_claim %v no_holder %v logged %d; want 1, 1, 2", invalid(reasonBadClaim), invalid(reasonNoHolder), u.log.count("malformed"))
	}
	// A relist of the same versions reports nothing new.
	list, _ := u.api.CoordinationV1().Leases("ns").List(context.Background(), metav1.ListOptions{})
	var items []any
	for i := range list.Items {
		items = append(items, &list.Items[i])
	}
	if err := m.peers.Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	if invalid(reasonBadClaim) != 1 || u.log.count("malformed") != 2 {
		t.Error("a relist reported the same versions again")
	}
	// A new malformed version is reported again.
	next := u.write("r-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationGeneration] = "2" })
	testwait.True(t, waitTimeout, "the new version", func() bool { o, _ := observedByName(m.Snapshot(), "r-b"); return o.Version == next.ResourceVersion })
	if invalid(reasonBadClaim) != 2 || u.log.count("malformed") != 3 {
		t.Error("a new malformed version was not reported")
	}
	if !m.Synced() {
		t.Error("malformed Leases disturbed the member")
	}
}

func TestLeaseNameTakenByAnotherRing(t *testing.T) {
	u := newUnit(t)
	u.create(peerLease("ns", "r", "x", "other", func(l *coordinationv1.Lease) {
		l.Labels[lease.LabelRing] = "r-x"
		holder := "someone-else"
		l.Spec.HolderIdentity = &holder
	}))
	err := run(t, u.member("x")).wait(t)
	if err == nil || !errors.Is(err, ErrNameTaken) {
		t.Fatalf("Run returned %v, want a name collision error", err)
	}
}

// TestRelabelledOwnLeaseIsPutBack: this identity's Lease relabelled out of
// the ring (kubectl label --overwrite) is not a name collision: Run puts the
// label back, changing nothing else, and waits for the core's TakeOver
// instead of exiting (which would crash-loop).
func TestRelabelledOwnLeaseIsPutBack(t *testing.T) {
	u := newUnit(t)
	u.create(peerLease("ns", "r", "x", "other", func(l *coordinationv1.Lease) { l.Labels[lease.LabelRing] = "elsewhere" }))
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "the label to be restored", func() bool { return u.get("r-x").Labels[lease.LabelRing] == "r" })
	if l := u.get("r-x"); l.Annotations[AnnotationIncarnation] != "other" || a.returned() {
		t.Fatalf("after restoring the label: incarnation %q, returned %v", l.Annotations[AnnotationIncarnation], a.returned())
	}
}

// TestRelabelledDamagedOwnLeaseIsPutBack: with its incarnation edited away
// too, a Lease that names this identity as holder is still this identity's
// member Lease (handoff.JudgeAcquire), not a name collision: the label goes
// back and nothing else changes, and the core sees a damaged Lease to wait
// out. Exiting instead would crash-loop the replica until someone deleted
// the Lease.
func TestRelabelledDamagedOwnLeaseIsPutBack(t *testing.T) {
	u := newUnit(t)
	u.create(peerLease("ns", "r", "x", "other", func(l *coordinationv1.Lease) {
		l.Labels[lease.LabelRing] = "elsewhere"
		delete(l.Annotations, AnnotationIncarnation)
	}))
	a := run(t, u.member("x"))
	testwait.True(t, waitTimeout, "the label to be restored", func() bool { return u.get("r-x").Labels[lease.LabelRing] == "r" })
	if l := u.get("r-x"); l.Annotations[AnnotationIncarnation] != "" || a.returned() {
		t.Fatalf("after restoring the label: incarnation %q, returned %v", l.Annotations[AnnotationIncarnation], a.returned())
	}
}

func TestRunTwiceIsAnError(t *testing.T) {
	u := newUnit(t)
	m := u.member("x")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)
	if err := m.Run(context.Background()); err == nil {
		t.Error("second Run accepted")
	}
}

// TestDepartedLeasesKeepTheirLastState: a Lease that leaves the view, by
// deletion or by a relabel out of the ring, is reported by Departed in the
// state the event carried (its claim included), and no longer once its name
// is back in the view.
func TestDepartedLeasesKeepTheirLastState(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)
	claim := shard.NewPartitionSet(7, 2, 5)
	setClaim := func(l *coordinationv1.Lease) { l.Annotations[AnnotationClaim] = EncodeClaim(claim) }
	u.create(peerLease("ns", "r", "b", "inc-b", setClaim))
	u.create(peerLease("ns", "r", "c", "inc-c", setClaim))
	testwait.True(t, waitTimeout, "the watch to show b and c", func() bool {
		_, b := observedByName(m.Snapshot(), "r-b")
		_, c := observedByName(m.Snapshot(), "r-c")
		return b && c
	})
	if err := u.api.CoordinationV1().Leases("ns").Delete(context.Background(), "r-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u.write("r-c", func(l *coordinationv1.Lease) { l.Labels[lease.LabelRing] = "elsewhere" })
	testwait.True(t, waitTimeout, "b and c to depart", func() bool { return len(m.Departed()) == 2 })
	for _, o := range m.Departed() {
		if !o.Gone || !o.Claim.Equal(claim) || o.Incarnation != "inc-"+o.Identity {
			t.Errorf("departed %s: %+v; want gone with claim %v", o.Name, o.Observed, claim)
		}
		if _, ok := observedByName(m.Snapshot(), o.Name); ok {
			t.Errorf("%s is both in the view and departed", o.Name)
		}
	}
	u.write("r-c", func(l *coordinationv1.Lease) { l.Labels[lease.LabelRing] = "r" })
	testwait.True(t, waitTimeout, "c to be back", func() bool { _, ok := observedByName(m.Snapshot(), "r-c"); return ok })
	if d := m.Departed(); len(d) != 1 || d[0].Name != "r-b" {
		t.Fatalf("departed after c came back: %v", d)
	}
}

// TestDepartedPerObject: a name deleted twice while the watch lagged (or
// just twice) reports both objects' last states, in the order they left, and
// keeps reporting them after the name is created again: the claim of the
// first object may be one the handoff core never saw.
func TestDepartedPerObject(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)
	claimOf := func(p ...int) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) {
			l.Annotations[AnnotationClaim] = EncodeClaim(shard.NewPartitionSet(7, p...))
		}
	}
	del := func() {
		t.Helper()
		if err := u.api.CoordinationV1().Leases("ns").Delete(context.Background(), "r-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first := u.create(peerLease("ns", "r", "b", "inc-b2", claimOf(0, 1)))
	testwait.True(t, waitTimeout, "the watch to show b", func() bool { _, ok := observedByName(m.Snapshot(), "r-b"); return ok })
	del()
	second := u.create(peerLease("ns", "r", "b", "inc-b1", claimOf()))
	testwait.True(t, waitTimeout, "the watch to show b again", func() bool {
		o, ok := observedByName(m.Snapshot(), "r-b")
		return ok && o.UID == string(second.UID)
	})
	del()
	testwait.True(t, waitTimeout, "both objects to depart", func() bool { return len(m.Departed()) == 2 })
	check := func() {
		t.Helper()
		d := m.Departed()
		if len(d) != 2 || d[0].UID != string(first.UID) || d[1].UID != string(second.UID) {
			t.Fatalf("departed %+v; want %s then %s", d, first.UID, second.UID)
		}
		if !d[0].Gone || d[0].Incarnation != "inc-b2" || !d[0].Claim.Equal(shard.NewPartitionSet(7, 0, 1)) {
			t.Errorf("first object departed as %+v; want gone, inc-b2, claim {0,1}", d[0].Observed)
		}
		if !d[1].Gone || d[1].Incarnation != "inc-b1" || !d[1].Claim.IsEmpty() {
			t.Errorf("second object departed as %+v; want gone, inc-b1, claim {}", d[1].Observed)
		}
	}
	check()
	third := u.create(peerLease("ns", "r", "b", "inc-b1", claimOf()))
	testwait.True(t, waitTimeout, "the third object in the view", func() bool {
		o, ok := observedByName(m.Snapshot(), "r-b")
		return ok && o.UID == string(third.UID)
	})
	check()
}

// A create of the own Lease in a namespace that does not exist fails with a
// NotFound about the namespace, not the Lease: AcquireError names it and
// what to do, the log says so once rather than on every retry, and the
// Member joins as soon as the namespace exists.
func TestMissingNamespaceIsNamedAndRetried(t *testing.T) {
	u := newUnit(t)
	var missing atomic.Bool
	var refused atomic.Int32
	missing.Store(true)
	u.api.setHook(func(verb, _ string, _ *coordinationv1.Lease) error {
		if verb == "create" && missing.Load() {
			refused.Add(1)
			return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
		}
		return nil
	})
	m := u.member("a")
	run(t, m)
	want := `namespace "ns" not found: create it or set LeaseNamespace`
	testwait.True(t, waitTimeout, "AcquireError to name the missing namespace", func() bool {
		err := m.AcquireError()
		var nf *NamespaceNotFoundError
		return errors.As(err, &nf) && nf.Namespace == "ns" && strings.HasPrefix(err.Error(), want)
	})
	// Several retries (the backoff is at most 5s).
	for range 5 {
		step(t, u.clk, 6*time.Second)
	}
	testwait.True(t, waitTimeout, "the retries", func() bool { return refused.Load() >= 5 })
	// Error lines (no "level") carry the error right after the message.
	if n := u.log.count(`"msg"="creating own Lease failed; retrying" "error"="namespace \"ns\" not found: create it or set LeaseNamespace`); n != 1 {
		t.Errorf("the missing namespace was logged as an error %d times over 5 retries, want once", n)
	}
	if m.Synced() {
		t.Fatal("Synced without a Lease")
	}

	missing.Store(false) // someone creates the namespace
	step(t, u.clk, 6*time.Second)
	testwait.True(t, waitTimeout, "Synced once the namespace exists", m.Synced)
	if err := m.AcquireError(); err != nil {
		t.Fatalf("AcquireError = %v after the Lease was created", err)
	}
}

// A peer run with another ring configuration is a foreign configuration, not
// a malformed Lease: it is logged and counted once when it appears and again
// only when its configuration changes, however often it renews.
func TestForeignConfigurationIsReportedOncePerChange(t *testing.T) {
	u := newUnit(t)
	ours := shard.Config{Partitions: 7}.Fingerprint()
	m := u.member("a", func(o *Options) { o.Params = ours })
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)

	theirs := shard.Config{Partitions: 11}.Fingerprint()
	u.create(peerLease("ns", "r", "b", "inc-b", func(l *coordinationv1.Lease) {
		l.Annotations[AnnotationParams] = theirs
		l.Annotations[AnnotationClaim] = EncodeClaim(shard.FullPartitionSet(11))
	}))
	testwait.True(t, waitTimeout, "the foreign Lease", func() bool { _, ok := observedByName(m.Snapshot(), "r-b"); return ok })
	// Ten renewals of the foreign peer.
	for i := range 10 {
		next := u.write("r-b", func(l *coordinationv1.Lease) {
			now := metav1.NewMicroTime(t0.Add(time.Duration(i+1) * 2 * time.Second))
			l.Spec.RenewTime = &now
		})
		testwait.True(t, waitTimeout, "the renewal", func() bool { o, _ := observedByName(m.Snapshot(), "r-b"); return o.Version == next.ResourceVersion })
	}
	invalid := func(reason string) float64 {
		return counterValue(t, u.reg, "kshard_lease_invalid_total", map[string]string{"reason": reason})
	}
	if n := u.log.count("foreign configuration"); n != 1 || invalid(reasonForeignConfig) != 1 {
		t.Errorf("foreign configuration logged %d times, counted %v, over 11 versions; want once", n, invalid(reasonForeignConfig))
	}
	if n := u.log.count("malformed"); n != 0 || invalid(reasonBadClaim) != 0 {
		t.Errorf("the foreign Lease was reported as malformed (%d lines, bad_claim %v)", n, invalid(reasonBadClaim))
	}
	if u.log.count(`"differs"="partitions 11, not 7"`) != 1 {
		t.Error("the report does not name the differing parameter")
	}

	// Another configuration is a change, reported again.
	other := shard.Config{Partitions: 11, Load: 2}.Fingerprint()
	next := u.write("r-b", func(l *coordinationv1.Lease) { l.Annotations[AnnotationParams] = other })
	testwait.True(t, waitTimeout, "the new configuration", func() bool { o, _ := observedByName(m.Snapshot(), "r-b"); return o.Version == next.ResourceVersion })
	if n := u.log.count("foreign configuration"); n != 2 || invalid(reasonForeignConfig) != 2 {
		t.Errorf("a changed foreign configuration: logged %d, counted %v; want 2 and 2", n, invalid(reasonForeignConfig))
	}
}

// The cache status rides on the renewals: setting it writes nothing at
// once, the next renewal publishes it, peers read it back, and a status
// that cannot be published is refused.
func TestCacheStatusRidesOnRenewals(t *testing.T) {
	u := newUnit(t)
	m := u.member("a")
	run(t, m)
	testwait.True(t, waitTimeout, "Synced", m.Synced)
	if o, _ := observedByName(m.Snapshot(), "r-a"); o.Cache != nil {
		t.Fatalf("a Lease written before any SetCacheStatus reads cache %+v, want none", o.Cache)
	}
	testwait.True(t, waitTimeout, "the heartbeat to wait", u.clk.HasWaiters)
	before := u.api.writesOf("r-a")
	m.SetCacheStatus("labels", 1234)
	if len(m.wake) != 0 || m.dirty() {
		t.Fatal("SetCacheStatus asked for a write of its own")
	}
	step(t, u.clk, time.Second) // half a RenewPeriod: no renewal due
	if n := u.api.writesOf("r-a") - before; n != 0 {
		t.Fatalf("%d writes within half a renew period after SetCacheStatus, want none", n)
	}
	step(t, u.clk, time.Second)
	testwait.True(t, waitTimeout, "the renewal", func() bool { return u.api.writesOf("r-a") == before+1 })
	l := u.get("r-a")
	if l.Annotations[AnnotationCacheMode] != "labels" || l.Annotations[AnnotationCachedObjects] != "1234" {
		t.Fatalf("annotations after the renewal: %v", l.Annotations)
	}
	testwait.True(t, waitTimeout, "the informer to read the status back", func() bool {
		o, ok := observedByName(m.Snapshot(), "r-a")
		return ok && o.Cache != nil && *o.Cache == CacheStatus{Mode: "labels", Objects: 1234}
	})
	for _, bad := range []CacheStatus{{Mode: "", Objects: 1}, {Mode: "Labels", Objects: 1}, {Mode: "labels", Objects: -1}, {Mode: strings.Repeat("x", 17)}} {
		m.SetCacheStatus(bad.Mode, bad.Objects)
	}
	if n := u.log.count("SetCacheStatus: ignoring"); n != 4 {
		t.Errorf("%d refusals logged for 4 unpublishable statuses", n)
	}
	step(t, u.clk, 2*time.Second)
	testwait.True(t, waitTimeout, "the next renewal", func() bool { return u.api.writesOf("r-a") == before+2 })
	if l := u.get("r-a"); l.Annotations[AnnotationCacheMode] != "labels" || l.Annotations[AnnotationCachedObjects] != "1234" {
		t.Errorf("a refused status replaced the published one: %v", l.Annotations)
	}
}
