package ring

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

// An activation has two halves. Admission (opening the participants' gates)
// runs on the coordinator's loop, where it is ordered with revokes: a revoke
// is carried out by a later step than the admission it follows, so a late
// admission can never overtake it. The replay of the controllers' caches,
// which costs time in proportion to the cached objects, runs off the loop,
// so the loop keeps stepping, and fencing on time, however long it takes.
// A replay that fails is not acknowledged to the core, which asks for the
// activation again; the loop starts the retry no earlier than a backoff
// after the failure, at its first step from then on (it steps at least
// every safetyPoll). The replay goroutine itself never waits on a timer.

// replays is the coordinator's record of activation replays, one running
// at a time. Its fields belong to the run goroutine.
type replays struct {
	ctx  context.Context // ends when run returns
	stop context.CancelFunc

	running bool
	cancel  context.CancelFunc // of the running replay
	// set holds the running replay's partitions not revoked since it
	// started: those its success acknowledges.
	set shard.PartitionSet
	// wanted holds partitions admitted while a replay ran, for the next.
	wanted shard.PartitionSet
	// backoff spaces the retries of a failing replay: none starts before
	// retryAt.
	backoff wait.Backoff
	retryAt time.Time
}

// replayBackoff spaces the retries of a failing replay: 100ms, doubling up
// to 10s, reset by a success.
var replayBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 10 * time.Second}

// startReplays prepares the replays of a run; the returned function stops
// them, and must be called before the run waits for its goroutines.
func (c *coordinator) startReplays(ctx context.Context) (stop func()) {
	c.replays.ctx, c.replays.stop = context.WithCancel(ctx)
	c.replays.backoff = replayBackoff
	return c.replays.stop
}

// activate admits set in every participant, on the loop, and has the
// admitted partitions replayed off it. The core's Activate stays
// unacknowledged until the replay reports back (replayDone), so until then
// the core asks for it again: what is admitted already is skipped here.
func (c *coordinator) activate(ctx context.Context, set shard.PartitionSet) {
	r := &c.replays
	fresh := set.Difference(r.set).Difference(r.wanted)
	if !fresh.IsEmpty() {
		now := c.now()
		for _, p := range fresh.Slice() {
			if since, ok := c.targetSince[p]; ok {
				c.metrics.handoff.Observe(now.Sub(since).Seconds())
				delete(c.targetSince, p)
			}
		}
		c.log.V(1).Info("activating partitions", "partitions", fresh.String())
		ok := true
		for _, p := range c.participants {
			if err := p.Admit(ctx, fresh); err != nil {
				// Left unacknowledged, the activation is asked for again.
				ok = false
				if ctx.Err() == nil {
					c.log.Error(err, "admitting partitions; retrying", "partitions", fresh.String())
				}
			}
		}
		if ok {
			r.wanted = r.wanted.Union(fresh)
		}
	}
	c.startReplay()
}

// startReplay starts replaying the wanted partitions unless a replay runs.
func (c *coordinator) startReplay() {
	r := &c.replays
	if r.running || r.wanted.IsEmpty() || c.now().Before(r.retryAt) {
		return
	}
	set := r.wanted
	r.wanted = shard.PartitionSet{}
	ctx, cancel := context.WithCancel(r.ctx)
	r.running, r.cancel, r.set = true, cancel, set.Clone()
	report := r.ctx
	c.goAsync(ctx, func(ctx context.Context) {
		defer cancel()
		start := c.now()
		var errs []error
		for _, p := range c.participants {
			if err := p.Replay(ctx, set); err != nil {
				errs = append(errs, err)
			}
		}
		c.metrics.replay.Observe(c.now().Sub(start).Seconds())
		err := errors.Join(errs...)
		// Reported on the run's context: a replay cancelled because its
		// partitions were revoked must still end r.running.
		c.post(report, func() { c.replayDone(err) })
	})
}

// replayDone records the end of the running replay, on the loop.
func (c *coordinator) replayDone(err error) {
	r := &c.replays
	done := r.set
	r.running, r.cancel, r.set = false, nil, shard.PartitionSet{}
	switch {
	case done.IsEmpty():
		// Every partition was revoked meanwhile: nothing failed.
		r.backoff, r.retryAt = replayBackoff, time.Time{}
	case err == nil:
		r.backoff, r.retryAt = replayBackoff, time.Time{}
		c.core.Advance(handoff.Ready{Activate: done})
	default:
		// Activation only admits keys and replays the cache; a failed
		// replay loses no safety, only the resync of a participant. Left
		// unacknowledged, it is asked for again; the backoff keeps a
		// source that keeps failing from replaying back to back.
		delay := r.backoff.Step()
		r.retryAt = c.now().Add(delay)
		c.log.Error(err, "replaying the cache for activated partitions; retrying", "partitions", done.String(), "after", delay.Round(time.Millisecond))
	}
	c.startReplay()
}

// replayRevoked forgets, on the loop, the replays of partitions being
// revoked: their gates refuse whatever a running replay still enqueues for
// them, and a replay left with no partition is cancelled.
func (c *coordinator) replayRevoked(set shard.PartitionSet) {
	r := &c.replays
	r.wanted = r.wanted.Difference(set)
	if !r.running {
		return
	}
	r.set = r.set.Difference(set)
	if r.set.IsEmpty() {
		r.cancel()
	}
}
