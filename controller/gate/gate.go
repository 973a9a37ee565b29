package gate

import (
	"sync"
	"sync/atomic"
)

const (
	// revokedBit marks a partition as not active: events for it are not
	// admitted and no new reconcile of it may start.
	revokedBit = uint64(1) << 63
	// countMask selects the in-flight reconcile count.
	countMask = revokedBit - 1
)

// Gate is the admission state of every partition of one controller.
//
// Safety rests on one rule: a reconcile of partition p starts only through
// Enter(p), whose compare-and-swap succeeds only while p's revoked bit is
// clear, and increments p's count in the same step. Once Revoke(p) has set
// the bit, p's count can only fall, so a drain that observes zero is final
// until p is activated again.
type Gate struct {
	words    []atomic.Uint64
	inflight atomic.Int64

	// mu guards changed, the channel closed (and replaced) whenever a
	// revoked partition's count reaches zero or a partition is activated,
	// so drain waiters re-check without polling.
	mu      sync.Mutex
	changed chan struct{}
}

// New returns a gate over partitions [0, n), all active or all revoked.
func New(n int, active bool) *Gate {
	g := &Gate{words: make([]atomic.Uint64, n), changed: make(chan struct{})}
	if !active {
		for i := range g.words {
			g.words[i].Store(revokedBit)
		}
	}
	return g
}

// Active reports whether p admits work. Out-of-range partitions never do.
func (g *Gate) Active(p int) bool {
	if uint(p) >= uint(len(g.words)) {
		return false
	}
	return g.words[p].Load()&revokedBit == 0
}

// Enter admits one reconcile of p if p is active, counting it in flight in
// the same atomic step. Every true result must be paired with Exit(p).
func (g *Gate) Enter(p int) bool {
	if uint(p) >= uint(len(g.words)) {
		return false
	}
	w := &g.words[p]
	for {
		old := w.Load()
		if old&revokedBit != 0 {
			return false
		}
		if w.CompareAndSwap(old, old+1) {
			g.inflight.Add(1)
			return true
		}
	}
}

// Exit ends a reconcile admitted by Enter(p).
func (g *Gate) Exit(p int) {
	now := g.words[p].Add(^uint64(0))
	g.inflight.Add(-1)
	if now&revokedBit != 0 && now&countMask == 0 {
		g.signal()
	}
}

// Revoke stops admitting p. Reconciles already in flight continue.
func (g *Gate) Revoke(p int) {
	if uint(p) < uint(len(g.words)) {
		g.words[p].Or(revokedBit)
	}
}

// Activate admits p again and reports whether it was revoked before.
func (g *Gate) Activate(p int) bool {
	if uint(p) >= uint(len(g.words)) {
		return false
	}
	old := g.words[p].And(^revokedBit)
	if old&revokedBit != 0 {
		g.signal()
		return true
	}
	return false
}

// inFlight is the number of reconciles of p in flight.
func (g *Gate) inFlight(p int) int {
	if uint(p) >= uint(len(g.words)) {
		return 0
	}
	return int(g.words[p].Load() & countMask)
}

// TotalInFlight is the number of reconciles in flight over all partitions.
func (g *Gate) TotalInFlight() int { return int(g.inflight.Load()) }

// changes returns a channel closed at the next drain-relevant change: a
// revoked partition's count reaching zero, or a partition being activated.
// Take it before checking state, then wait on it, to never miss a wake-up.
func (g *Gate) changes() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *Gate) signal() {
	g.mu.Lock()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}
