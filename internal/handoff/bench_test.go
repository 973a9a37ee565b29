package handoff

import (
	"fmt"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/assign"

	"github.com/kshard/kshard/shard"
)

// benchRing builds the Leases of a settled 7-member ring at the default
// P=271, as member m-0 would observe them, and a Core for m-0 that has
// activated its share.
func benchRing(b *testing.B) (*Core, []Observed, time.Time) {
	b.Helper()
	cfg := shard.Config{}.WithDefaults()
	members := make([]string, 7)
	for i := range members {
		members[i] = fmt.Sprintf("m-%d", i)
	}
	ring, err := assign.New(cfg, members)
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Identity: "m-0", Incarnation: "x", Ring: cfg})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1000, 0)
	leases := make([]Observed, len(members))
	for i, m := range members {
		leases[i] = Observed{Record: Record{Identity: m, Incarnation: "x", State: StateActive,
			Claim: ring.Partitions(m), Generation: 1, Fingerprint: cfg.Fingerprint()}, Version: fmt.Sprint(i)}
	}
	leases[0].Claim = shard.NewPartitionSet(cfg.Partitions)
	c.CachesSynced()
	// Join: publish, read back, until the own share is active.
	for range 5 {
		c.Observe(now, leases)
		// As if the informer had listed LeaseDuration ago: the wait before
		// joining is over.
		c.join.firstSeen = now.Add(-c.cfg.LeaseDuration)
		r := c.Ready(now)
		if r.Publish != nil {
			leases[0].Record = r.Publish.Clone()
			leases[0].Version = fmt.Sprint(leases[0].Generation + 100)
			c.RenewSucceeded(now)
		}
		c.Advance(r)
	}
	if !c.Active().Equal(ring.Partitions("m-0")) {
		b.Fatalf("m-0 active %v; want %v", c.Active(), ring.Partitions("m-0"))
	}
	return c, leases, now
}

// BenchmarkObserveReady measures one steady-state step: a peer renewed, the
// informer reports the ring's 7 Leases, the core decides nothing changes.
func BenchmarkObserveReady(b *testing.B) {
	c, leases, now := benchRing(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		peer := 1 + i%6
		leases[peer].Version = fmt.Sprint(1000 + i)
		now = now.Add(time.Millisecond)
		c.RenewSucceeded(now)
		c.Observe(now, leases)
		r := c.Ready(now)
		if !r.IsEmpty() {
			b.Fatalf("steady state asked for %+v", r)
		}
		c.Advance(r)
	}
}

// BenchmarkObserveReadyFlapping alternates the view between 7 and 6 members
// (a peer flips between active and joining), so every step changes the
// target; the revoked share is reported drained at once.
func BenchmarkObserveReadyFlapping(b *testing.B) {
	c, leases, now := benchRing(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if i%2 == 0 {
			leases[6].State = StateActive
		} else {
			leases[6].State = StateJoining
		}
		leases[6].Version = fmt.Sprint(1000 + i)
		now = now.Add(time.Millisecond)
		c.RenewSucceeded(now)
		c.Observe(now, leases)
		r := c.Ready(now)
		c.Drained(r.Revoke)
		c.Advance(r)
	}
}
