package ring

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kshard/kshard/shard"
)

// fenceRecorder passes calls on to a participant and records when the
// first fencing revoke reached it once armed.
type fenceRecorder struct {
	Participant
	armed   atomic.Bool
	mu      sync.Mutex
	fenceAt time.Time
	fenced  chan struct{}
}

func (f *fenceRecorder) Revoke(ctx context.Context, set shard.PartitionSet, fence bool) error {
	if fence && f.armed.Load() {
		f.mu.Lock()
		if f.fenceAt.IsZero() {
			f.fenceAt = time.Now()
			close(f.fenced)
		}
		f.mu.Unlock()
	}
	return f.Participant.Revoke(ctx, set, fence)
}

// With 100,000 cached objects and an activation replay that does not
// return, the replica still fences within RenewDeadline and one step of
// its last renewal: the replay runs off the coordinator's loop. After the
// fence, what the replay still produces is refused by the gate.
func TestFenceIsNotDelayedByAnActivationReplay(t *testing.T) {
	const (
		objects       = 100_000
		leaseDuration = 1200 * time.Millisecond
		renewDeadline = 600 * time.Millisecond
		// stopDeadline is where the core would demand an exit: a fence
		// carried out later than this is too late. The time between it
		// and the renew deadline is what this test allows the fencing step.
		stopDeadline = renewDeadline + (leaseDuration-renewDeadline)/2
		// pauseAt is where the replay stops: far enough in to have done
		// real work, early enough to keep the test quick under -race.
		pauseAt = objects / 10
	)
	cache := newMemoryCache(objects, pauseAt)
	rec := &fenceRecorder{fenced: make(chan struct{})}
	rig := startReplayRig(t, cache, leaseDuration, renewDeadline, func(p Participant) Participant {
		rec.Participant = p
		return rec
	})
	t.Cleanup(rig.stop)
	stopRenewing := renewEvery(rig.member.fakeMembership, 20*time.Millisecond)

	select {
	case <-cache.paused:
	case <-time.After(30 * time.Second):
		stopRenewing()
		t.Fatal("the replica did not join and start replaying within 30s")
	}
	if got := rig.admitted(t); got == 0 || got > pauseAt {
		t.Fatalf("%v requests admitted when the replay paused at object %d; want some, at most %d", got, pauseAt, pauseAt)
	}
	// The API server becomes unreachable: renewals stop, and so do writes.
	// (A fence before this point, on a machine too loaded to renew for
	// RenewDeadline, is not the one under test.)
	rec.armed.Store(true)
	rig.member.setCut(true)
	stopRenewing()
	rig.member.mu.Lock()
	lastRenew := rig.member.renewed
	rig.member.mu.Unlock()

	select {
	case <-rec.fenced:
	case <-time.After(stopDeadline + 5*time.Second):
		t.Fatalf("no fence %s after the last renewal, with the replay paused; RenewDeadline is %s", time.Since(lastRenew).Round(time.Millisecond), renewDeadline)
	}
	rec.mu.Lock()
	lag := rec.fenceAt.Sub(lastRenew)
	rec.mu.Unlock()
	select {
	case <-cache.finished:
		t.Fatal("the replay finished before the fence; the test proves nothing")
	default:
	}
	t.Logf("fenced %s after the last renewal (RenewDeadline %s); longest coordinator step %s, with %d objects cached and the replay paused at %d",
		lag.Round(time.Millisecond), renewDeadline, rig.step.largest().Round(time.Microsecond), objects, pauseAt)
	if lag < renewDeadline {
		t.Fatalf("fenced %s after the last renewal, before RenewDeadline %s", lag, renewDeadline)
	}
	if lag > stopDeadline {
		t.Fatalf("fenced %s after the last renewal: later than RenewDeadline %s and one step (the stop deadline is %s)", lag, renewDeadline, stopDeadline)
	}
	waitFor(t, "the lease validity to be withdrawn", func() bool { return rig.coord.leaseValidity().Until.IsZero() })
	waitFor(t, "every partition revoked", func() bool { return rig.ctrl.ActivePartitions().IsEmpty() })
	// The workers go on feeding what the replay produced before it
	// paused until the gate closes: count from here.
	admittedBefore := rig.admitted(t)

	// The rest of the replay reaches a closed gate.
	cache.resume()
	select {
	case <-cache.finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the replay did not finish within 30s of being resumed")
	}
	if got := rig.admitted(t); got != admittedBefore {
		t.Fatalf("%v requests admitted after the fence, want none (%v before it)", got-admittedBefore, admittedBefore)
	}
	select {
	case code := <-rig.exited:
		t.Fatalf("the coordinator asked the process to exit (%d): the fence did not stop every reconcile in time", code)
	default:
	}
}

// blockingReplay is a participant whose replays wait for their context to
// end, or for release; it counts them.
type blockingReplay struct {
	mu        sync.Mutex
	replays   int
	cancelled int
	release   chan struct{}
}

func (*blockingReplay) Admit(context.Context, shard.PartitionSet) error        { return nil }
func (*blockingReplay) Revoke(context.Context, shard.PartitionSet, bool) error { return nil }

func (p *blockingReplay) Replay(ctx context.Context, _ shard.PartitionSet) error {
	p.mu.Lock()
	p.replays++
	p.mu.Unlock()
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.cancelled++
		p.mu.Unlock()
		return ctx.Err()
	}
}

func (p *blockingReplay) counts() (replays, cancelled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replays, p.cancelled
}

// A replay whose partitions are all revoked (here by a fence) is cancelled;
// once the replica rejoins, its partitions are replayed again, and a
// replay that succeeded is acknowledged to the core, which stops asking.
func TestReplayIsCancelledByRevokeAndAcknowledgedWhenDone(t *testing.T) {
	member := &cutMembership{fakeMembership: newFakeMembership("a")}
	part := &blockingReplay{release: make(chan struct{})}
	// A 3 s lease: the test asserts that the fence cancels the replay and
	// that the process is not asked to exit, which a 300 ms lease cannot
	// promise on a loaded machine (the stop deadline then rightly fires).
	c := startCoordinatorTimed(t, "a", member, shard.Timing{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second}, part)
	stopRenewing := renewEvery(member.fakeMembership, 20*time.Millisecond)
	waitFor(t, "a replay", func() bool { n, _ := part.counts(); return n == 1 })

	member.setCut(true)
	stopRenewing()
	waitFor(t, "the fence to cancel the replay", func() bool { _, n := part.counts(); return n == 1 })

	close(part.release) // replays from now on succeed
	fences := counter(c.metrics.fences)
	member.setCut(false)
	defer renewEvery(member.fakeMembership, 20*time.Millisecond)()
	waitFor(t, "a replay after rejoining", func() bool { n, _ := part.counts(); return n >= 2 })
	// Acknowledged, the activation is not asked for again: many steps
	// later there has been no third replay. A machine that stalls the
	// renewer past the 2 s renew deadline fences the replica again, and
	// each such fence may replay once more on rejoining; an activation not
	// acknowledged would replay at every step instead.
	steps, _ := histogram(c.metrics.step)
	waitFor(t, "50 more steps", func() bool { n, _ := histogram(c.metrics.step); return n >= steps+50 })
	refenced := int(counter(c.metrics.fences) - fences)
	if n, _ := part.counts(); n < 2 || n > 2+refenced {
		t.Fatalf("%d replays over 50 steps with %d fences since it rejoined; want 2 (one more per fence): a replay that succeeded was not acknowledged to the core", n, refenced)
	}
}
