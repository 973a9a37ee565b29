package ring

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

// stuckParticipant activates at once and never drains: its Revoke returns
// only when the test releases it, as a reconcile that ignores its cancelled
// context would hold it.
type stuckParticipant struct {
	mu       sync.Mutex
	admitted shard.PartitionSet
	release  chan struct{}
}

func (p *stuckParticipant) Admit(_ context.Context, set shard.PartitionSet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.admitted = p.admitted.Union(set)
	return nil
}

func (p *stuckParticipant) Replay(context.Context, shard.PartitionSet) error { return nil }

func (p *stuckParticipant) Revoke(ctx context.Context, _ shard.PartitionSet, _ bool) error {
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *stuckParticipant) active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admitted.Len()
}

// The stop-deadline backstop fires: a replica whose renewals stop fences,
// and when its reconciles are still running at the stop deadline (halfway
// between RenewDeadline and LeaseDuration after its last renewal) the
// coordinator calls its injected exit with 1, so that they cannot outlive
// the Lease peers are about to take over. It is not called before the
// stop deadline.
func TestCoordinatorExitsWhenFencedReconcilesOutliveTheStopDeadline(t *testing.T) {
	timing := shard.Timing{LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond}
	core, err := handoff.New(handoff.Config{Identity: "a", Incarnation: "inc-a", Ring: shard.Config{Partitions: 7}, Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := newRingMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	member := newFakeMembership("a")
	part := &stuckParticipant{release: make(chan struct{})}
	type exit struct {
		code int
		at   time.Time
	}
	exited := make(chan exit, 4)
	c := newCoordinatorWith(core, member, []Participant{part}, metrics, logr.Discard(), timing, func(code int) { exited <- exit{code, time.Now()} })

	stopRenewing := keepRenewing(t, member)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, func(context.Context) bool { return true }) }()
	defer func() {
		close(part.release)
		cancel()
		<-done
	}()

	waitFor(t, "the replica to activate every partition", func() bool { return part.active() == 7 })
	select {
	case e := <-exited:
		t.Fatalf("exit(%d) while renewing", e.code)
	default:
	}
	stopRenewing()
	member.mu.Lock()
	last := member.renewed
	member.mu.Unlock()

	select {
	case e := <-exited:
		if e.code != 1 {
			t.Errorf("exit code %d, want 1", e.code)
		}
		// The core judges on the renewal's sending time, which precedes
		// the fake's record of it: the exit comes no earlier than the
		// stop deadline after the last renewal recorded minus one tick.
		if stop := last.Add(timing.StopDeadline() - 20*time.Millisecond); e.at.Before(stop) {
			t.Errorf("exit at %v, before the stop deadline %v", e.at.Sub(last), timing.StopDeadline())
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit within a minute of the last renewal, though the fenced replica's reconciles never stopped")
	}
}
