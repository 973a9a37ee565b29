package ring

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/internal/testwait"
	"github.com/kshard/kshard/shard"
)

// fakeMembership is an API server of one replica's ring in memory: a
// SetDesired lands at once, counts as a renew sent now, and shows in the
// snapshot. Peers' Leases can be added by the test.
type fakeMembership struct {
	mu       sync.Mutex
	identity string
	version  int
	own      *membership.Observed
	peers    []membership.Observed
	renewed  time.Time
	changes  chan struct{}
	takeOver []string
	// terminating: the own Lease is being deleted (it stays, with the
	// finalizer, until Finalize); finalized lists Finalize's versions.
	terminating bool
	finalized   []string
}

func newFakeMembership(identity string) *fakeMembership {
	return &fakeMembership{identity: identity, changes: make(chan struct{}, 1)}
}

func (f *fakeMembership) notify() {
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

func (f *fakeMembership) Listed() bool { return true }
func (f *fakeMembership) Synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.own != nil
}

func (f *fakeMembership) Snapshot() []membership.Observed {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]membership.Observed(nil), f.peers...)
	if f.own != nil {
		out = append(out, *f.own)
	}
	return out
}

func (f *fakeMembership) Changes() <-chan struct{}        { return f.changes }
func (f *fakeMembership) Departed() []membership.Observed { return nil }

func (f *fakeMembership) LastRenew() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.renewed, !f.renewed.IsZero()
}

func (f *fakeMembership) SetDesired(r handoff.Record) {
	f.mu.Lock()
	f.version++
	o := membership.Observed{Name: "ring-" + f.identity}
	o.Record, o.Version, o.UID = r.Clone(), strconv.Itoa(f.version), "uid-"+f.identity
	o.Finalized, o.Terminating = true, f.terminating
	f.own, f.renewed = &o, time.Now()
	f.mu.Unlock()
	f.notify()
}

func (f *fakeMembership) TakeOver(version string) {
	f.mu.Lock()
	f.takeOver = append(f.takeOver, version)
	f.mu.Unlock()
}

func (f *fakeMembership) ReadPeer(context.Context, handoff.LeaseRef) (handoff.LeaseRead, error) {
	return handoff.LeaseRead{}, nil
}
func (f *fakeMembership) DeletePeer(context.Context, string, string) error { return nil }
func (f *fakeMembership) Delete(context.Context) error                     { return nil }
func (f *fakeMembership) JoinScanClean() bool                              { return false }

// Finalize ends a deletion by hand: the Lease goes, and (as membership.Member's
// next renew does) comes back as a new object with the latest Record.
func (f *fakeMembership) Finalize(_ context.Context, version string) error {
	f.mu.Lock()
	f.finalized = append(f.finalized, version)
	if f.own == nil || !f.terminating || f.own.Version != version {
		f.mu.Unlock()
		return errors.New("not the terminating version")
	}
	f.version++
	o := *f.own
	o.Version, o.UID, o.Terminating = strconv.Itoa(f.version), "uid-"+f.identity+"-again", false
	f.own, f.terminating = &o, false
	f.mu.Unlock()
	f.notify()
	return nil
}

// flakyParticipant fails its first failures replays.
type flakyParticipant struct {
	mu        sync.Mutex
	failures  int
	calls     []shard.PartitionSet
	activated shard.PartitionSet
}

func (p *flakyParticipant) Admit(context.Context, shard.PartitionSet) error { return nil }

func (p *flakyParticipant) Replay(_ context.Context, set shard.PartitionSet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, set.Clone())
	if len(p.calls) <= p.failures {
		return errors.New("replay failed")
	}
	p.activated = p.activated.Union(set)
	return nil
}

func (p *flakyParticipant) Revoke(context.Context, shard.PartitionSet, bool) error { return nil }

func (p *flakyParticipant) state() (calls int, activated shard.PartitionSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls), p.activated.Clone()
}

// startCoordinator runs a real coordinator and core over fake membership.
func startCoordinator(t *testing.T, identity string, member memberLeases, parts ...Participant) *coordinator {
	t.Helper()
	return startCoordinatorTimed(t, identity, member, shard.Timing{LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond}, parts...)
}

// startCoordinatorTimed is startCoordinator with the given lease timing: a
// test that must not see the stop-deadline exit gives it room, since a
// loaded machine can stall a fenced replica's cancellations past a 300 ms
// lease and the exit is then the right answer.
func startCoordinatorTimed(t *testing.T, identity string, member memberLeases, timing shard.Timing, parts ...Participant) *coordinator {
	t.Helper()
	ring := shard.Config{Partitions: 7}
	core, err := handoff.New(handoff.Config{Identity: identity, Incarnation: "inc-" + identity, Ring: ring, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := newRingMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	c := newCoordinatorWith(core, member, parts, metrics, logr.Discard(), timing, func(code int) { exited <- code })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, func(context.Context) bool { return true }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
		select {
		case code := <-exited:
			t.Errorf("coordinator asked the process to exit (%d)", code)
		default:
		}
	})
	return c
}

// waitFor is testwait.True with this package's bound: the coordinator's
// states follow a fake clientset's writes within milliseconds, so 10 s
// allows a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.True(t, 10*time.Second, what, cond)
}

// keepRenewing renews the own Lease every 20ms while it exists, as
// membership.Member would, so the replica stays unfenced, until the test ends or
// the returned stop is called (it waits for the renewer to end).
func keepRenewing(t *testing.T, member *fakeMembership) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(quit); <-done }) }
	t.Cleanup(stop)
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				member.mu.Lock()
				if member.own != nil {
					member.renewed = time.Now()
				}
				member.mu.Unlock()
				member.notify()
			}
		}
	}()
	return stop
}

// A replica alone joins after watching the ring for LeaseDuration and
// activates every partition; an activation whose replay failed is asked for
// again (Ready/Advance) until it succeeds.
func TestCoordinatorReissuesFailedActivation(t *testing.T) {
	member := newFakeMembership("a")
	part := &flakyParticipant{failures: 2}
	startCoordinator(t, "a", member, part)
	keepRenewing(t, member)
	waitFor(t, "every partition activated", func() bool {
		_, act := part.state()
		return act.Equal(shard.FullPartitionSet(7))
	})
	calls, _ := part.state()
	if calls < 3 {
		t.Fatalf("%d replay calls; want the two failed ones repeated", calls)
	}
}

// activeAlone runs a coordinator alone in its ring until it has activated
// every partition.
func activeAlone(t *testing.T) (*fakeMembership, *revokeRecorder) {
	member := newFakeMembership("a")
	part := &revokeRecorder{}
	startCoordinator(t, "a", member, part)
	keepRenewing(t, member)
	waitFor(t, "activation", func() bool { return part.activated().Len() == 7 })
	return member, part
}

// The own Lease deleted by someone else: the coordinator fences at once,
// revoking everything, although its renews are recent.
func TestCoordinatorFencesWhenOwnLeaseDisappears(t *testing.T) {
	member, part := activeAlone(t)
	member.mu.Lock()
	member.own = nil // kubectl delete lease
	member.mu.Unlock()
	member.notify()
	waitFor(t, "a fence", func() bool { return part.fenced() })
}

// The own Lease deleted by hand with the member finalizer: it stays,
// terminating; the coordinator fences, and only once everything has drained
// and the Lease shows the empty claim does it remove the finalizer (of the
// version it saw); the Lease is created afresh and the replica rejoins.
func TestCoordinatorFinalizesItsHandDeletedLeaseOnceDrained(t *testing.T) {
	member, part := activeAlone(t)
	member.mu.Lock()
	member.terminating = true // kubectl delete lease: deletionTimestamp set
	member.version++
	own := *member.own
	own.Version, own.Terminating = strconv.Itoa(member.version), true
	member.own = &own
	member.mu.Unlock()
	member.notify()
	waitFor(t, "a fence", func() bool { return part.fenced() })
	waitFor(t, "Finalize", func() bool {
		member.mu.Lock()
		defer member.mu.Unlock()
		return len(member.finalized) > 0
	})
	member.mu.Lock()
	first := member.finalized[0]
	member.mu.Unlock()
	if v, deleted := atoi(first), atoi(own.Version); v <= deleted {
		t.Fatalf("Finalize of version %s, the one that showed the deletion; want a later one, with the empty claim", first)
	}
	waitFor(t, "rejoin on the recreated Lease", func() bool { return part.activated().Len() == 7 })
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

type revokeRecorder struct {
	mu     sync.Mutex
	active shard.PartitionSet
	fence  bool
}

func (p *revokeRecorder) Admit(_ context.Context, set shard.PartitionSet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active = p.active.Union(set)
	return nil
}

func (p *revokeRecorder) Replay(context.Context, shard.PartitionSet) error { return nil }

func (p *revokeRecorder) Revoke(_ context.Context, set shard.PartitionSet, fence bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active = p.active.Difference(set)
	p.fence = p.fence || fence
	return nil
}

func (p *revokeRecorder) activated() shard.PartitionSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active.Clone()
}

func (p *revokeRecorder) fenced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fence
}

// Waiting for an earlier incarnation's Lease is logged once, at info,
// although its message changes at every step; it becomes one error after
// twice LeaseDuration. Another condition is an error, logged once.
func TestConditionsAreLoggedOnce(t *testing.T) {
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	c := newCoordinatorWith(nil, nil, nil, nil, log, shard.Timing{LeaseDuration: 10 * time.Second}, nil)
	t0 := time.Unix(1000, 0)
	inUse := func(ago time.Duration) error {
		return fmt.Errorf("handoff: %w: incarnation x wrote it %v ago", handoff.ErrIdentityInUse, ago)
	}
	for i := range 30 {
		c.reportCondition(inUse(time.Duration(i)*500*time.Millisecond), t0.Add(time.Duration(i)*500*time.Millisecond))
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "earlier incarnation") || strings.Contains(lines[0], `"error"`) {
		t.Fatalf("logged %q within 15s of waiting; want one info line", lines)
	}
	c.reportCondition(inUse(20*time.Second), t0.Add(20*time.Second))
	c.reportCondition(inUse(21*time.Second), t0.Add(21*time.Second))
	if len(lines) != 2 || !strings.Contains(lines[1], "second process") || !strings.Contains(lines[1], `"error"`) {
		t.Fatalf("logged %q after 2×LeaseDuration; want one error more", lines)
	}
	foreign := fmt.Errorf("handoff: %w: b runs x", handoff.ErrForeignFingerprint)
	for range 3 {
		c.reportCondition(foreign, t0.Add(22*time.Second))
	}
	c.reportCondition(nil, t0.Add(23*time.Second))
	if len(lines) != 3 || !strings.Contains(lines[2], "ring condition") {
		t.Fatalf("logged %q; want the foreign configuration once", lines)
	}
}

// goneOnRead is fake membership whose direct reads of peers' Leases find
// them gone, as after a kubectl delete lease that the watch has not shown.
type goneOnRead struct {
	*fakeMembership
	readMu sync.Mutex
	reads  int
}

func (g *goneOnRead) ReadPeer(context.Context, handoff.LeaseRef) (handoff.LeaseRead, error) {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	g.reads++
	return handoff.LeaseRead{}, nil
}

func (g *goneOnRead) readCount() int {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	return g.reads
}

// A peer whose Lease looked expired and whose direct read then found it
// gone (deleted or relabelled while the watch lagged) is a tombstone, not
// a death: its claims are voided only by a later read that finds it still
// gone a LeaseDuration on (handoff.JudgeConfirm), so the coordinator must
// hand the core what it read rather than fold "gone" into "unchanged".
func TestCoordinatorKeepsAGonePeerAsATombstone(t *testing.T) {
	member := &goneOnRead{fakeMembership: newFakeMembership("a")}
	b := membership.Observed{Name: "ring-b"}
	b.Record = handoff.Record{Identity: "b", Incarnation: "inc-b", State: handoff.StateActive, Claim: shard.FullPartitionSet(7),
		Generation: 1, Fingerprint: shard.Config{Partitions: 7}.Fingerprint()}
	b.Version, b.UID = "b-1", "uid-b"
	member.peers = []membership.Observed{b}
	part := &revokeRecorder{}
	startCoordinator(t, "a", member, part)
	keepRenewing(t, member.fakeMembership)
	waitFor(t, "a to activate the partitions b claimed", func() bool { return part.activated().Len() == 7 })
	if n := member.readCount(); n < 2 {
		t.Fatalf("a activated b's partitions after %d direct read of b's Lease; want a second read, a LeaseDuration after the first found it gone", n)
	}
}
