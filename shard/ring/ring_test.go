package ring

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

func TestNewValidates(t *testing.T) {
	good := handoff.Config{Identity: "a", Incarnation: "x", Timing: shard.Timing{LeaseDuration: 300 * time.Millisecond}}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no replica", Options{handoff: good}, "Replica is nil"},
		{"replica not from NewReplica", Options{Replica: &Replica{}}, "not built by NewReplica"},
		{"nil participant", Options{handoff: good, leases: newFakeMembership("a"), Participants: []Participant{nil}}, "Participants[0] is nil"},
		{"no identity", Options{handoff: handoff.Config{Incarnation: "x"}, leases: newFakeMembership("a")}, "Identity is empty"},
		{"renew deadline too long", Options{handoff: handoff.Config{Identity: "a", Incarnation: "x", Timing: shard.Timing{LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}},
			leases: newFakeMembership("a")}, "RenewDeadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// The exported Coordinator runs the ring as the Manager's does: a replica
// alone activates every partition through its Participant, is ready,
// publishes a lease validity, and on Leave revokes everything, deletes its
// Lease and returns from Run.
func TestCoordinatorExportedRunAndLeave(t *testing.T) {
	member := newFakeMembership("a")
	part := &revokeRecorder{}
	c, err := New(Options{
		handoff:      handoff.Config{Identity: "a", Incarnation: "inc-a", Ring: shard.Config{Partitions: 7}, Timing: shard.Timing{LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond}},
		leases:       member,
		Participants: []Participant{part},
		Logger:       logr.Discard(),
		Exit:         func(code int) { t.Errorf("exit(%d)", code) },
	})
	if err != nil {
		t.Fatal(err)
	}
	keepRenewing(t, member)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nil) }()
	waitFor(t, "every partition activated", func() bool { return part.activated().Equal(shard.FullPartitionSet(7)) })
	waitFor(t, "ready", c.Ready)
	if r := c.NotReadyReason(); r != "" {
		t.Errorf("NotReadyReason = %q while ready", r)
	}
	if v := c.LeaseValidity(); v.Until.IsZero() {
		t.Errorf("LeaseValidity = %+v; want a validity after renewals", v)
	}
	c.Leave()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Leave: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Leave")
	}
	if n := part.activated().Len(); n != 0 {
		t.Errorf("%d partitions still active after the leave", n)
	}
	if c.Ready() {
		t.Error("ready after leaving")
	}
	if err := c.Run(ctx, nil); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("second Run: %v; want an error", err)
	}
}

// fakePartitionCache is a sharded cache whose LISTs the test completes.
type fakePartitionCache struct {
	mu      sync.Mutex
	held    shard.PartitionSet
	synced  shard.PartitionSet
	changed chan struct{}
}

func newFakePartitionCache(partitions int) *fakePartitionCache {
	return &fakePartitionCache{held: shard.NewPartitionSet(partitions), synced: shard.NewPartitionSet(partitions), changed: make(chan struct{}, 1)}
}

func (f *fakePartitionCache) Hold(set shard.PartitionSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = set.Clone()
	f.synced = f.synced.Intersect(set)
}

func (f *fakePartitionCache) SyncedPartitions() shard.PartitionSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced.Clone()
}

func (f *fakePartitionCache) Changed() <-chan struct{} { return f.changed }

func (f *fakePartitionCache) holding() shard.PartitionSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held.Clone()
}

// listed completes the LISTs of set (those held).
func (f *fakePartitionCache) listed(set shard.PartitionSet) {
	f.mu.Lock()
	f.synced = f.synced.Union(set.Intersect(f.held))
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// With a sharded cache the coordinator hands the core's Hold to the cache
// and activates a partition only once the cache reports it synced; a LIST
// that has not finished keeps its partition waiting, counted in
// kshard_partitions{state="caching"}.
func TestCoordinatorActivatesOnlyWhatTheCacheSynced(t *testing.T) {
	member := newFakeMembership("a")
	part := &revokeRecorder{}
	cache := newFakePartitionCache(7)
	c, err := New(Options{
		handoff:      handoff.Config{Identity: "a", Incarnation: "inc-a", Ring: shard.Config{Partitions: 7}, Timing: shard.Timing{LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond}},
		leases:       member,
		Participants: []Participant{part},
		Logger:       logr.Discard(),
		Exit:         func(code int) { t.Errorf("exit(%d)", code) },
		Cache:        cache,
	})
	if err != nil {
		t.Fatal(err)
	}
	keepRenewing(t, member)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()
	all := shard.FullPartitionSet(7)
	waitFor(t, "the cache asked to hold every partition", func() bool { return cache.holding().Equal(all) })
	// Joined, claimed, and nothing synced: nothing may activate. Give the
	// loop several LeaseDurations of steps to show it.
	waitFor(t, "the coordinator to be ready", c.Ready)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if a := part.activated(); !a.IsEmpty() {
			t.Fatalf("activated %v before the cache synced anything", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cache.listed(shard.NewPartitionSet(7, 2, 5))
	waitFor(t, "partitions 2 and 5 activated", func() bool { return part.activated().Equal(shard.NewPartitionSet(7, 2, 5)) })
	cache.listed(all)
	waitFor(t, "every partition activated", func() bool { return part.activated().Equal(all) })
}
