package segmented

import (
	"context"
	"time"
)

// Delays between a Segmented's probes that could not decide
// (Options.Reprobe): each costs up to ten LISTs of limit 1, and a
// kind whose objects keep vanishing under the probe is not worth more.
const (
	reprobeFirstDelay = time.Second
	reprobeMaxDelay   = 5 * time.Minute
)

// reprobe runs Options.Reprobe each time the whole informer has
// cached an object, until it decides, then acts on it. Run owns it.
func (s *Segmented) reprobe(ctx context.Context) {
	delay := reprobeFirstDelay
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.objectSeen:
		}
		probe := s.opts.Reprobe(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case probe.Filtered:
			s.useServerFilter()
			return
		case !probe.Retry:
			s.log.V(1).Info("the API server does not filter this kind by shard; it stays listed whole", "reason", probe.Reason)
			return
		}
		s.log.V(1).Info("the probe at the kind's first object could not decide; probing again later", "reason", probe.Reason, "after", delay)
		timer := s.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		delay = min(2*delay, reprobeMaxDelay)
		if s.cachesAnObject() {
			s.noteObject() // objects remain, though none was added since
		}
	}
}

// noteObject tells reprobe that the whole informer cached an object. It
// never blocks: one note stands for any number.
func (s *Segmented) noteObject() {
	select {
	case s.objectSeen <- struct{}{}:
	default:
	}
}

// cachesAnObject reports whether any segment stores an object.
func (s *Segmented) cachesAnObject() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segments {
		if len(seg.inf.GetStore().ListKeys()) > 0 {
			return true
		}
	}
	return false
}

// useServerFilter moves a Segmented from the fallback to the API server's
// filter, once Reprobe proved the server applies it: a compaction segment
// lists the held partitions with the selector and, once synced, replaces
// the informer of the whole resource, which serves every held partition
// until then (Hold starts further compactions while it runs: wholeRuns).
func (s *Segmented) useServerFilter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.filtered {
		return
	}
	s.filtered = true
	s.log.Info("the API server filters this kind by shard: listing the held partitions with the shard selector, then dropping the informer of the whole kind")
	if len(s.segments) > 0 && !s.held.IsEmpty() {
		s.start(s.held.Clone(), true)
	}
}

// wholeRuns reports whether a segment listing the whole resource still
// runs. Call with s.mu held.
func (s *Segmented) wholeRuns() bool {
	for _, seg := range s.segments {
		if !seg.filtered {
			return true
		}
	}
	return false
}
