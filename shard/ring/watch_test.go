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

// replacingCache is a PartitionCache whose Changed channel is closed and
// replaced on every change, as shard/cache's Cache does, and whose
// Changed calls wait for the test (calls), so that the test decides what
// happens between a read and the next Changed.
type replacingCache struct {
	mu      sync.Mutex
	synced  shard.PartitionSet
	changed chan struct{}
	reads   []shard.PartitionSet
	// calls receives every Changed call, which returns the channel
	// current once the test releases it.
	calls chan changedCall
}

// changedCall is a Changed call waiting for the test.
type changedCall struct{ release, returned chan struct{} }

// let lets the call return and waits until it has taken its channel.
func (c changedCall) let() {
	close(c.release)
	<-c.returned
}

func (f *replacingCache) Hold(shard.PartitionSet) {}

func (f *replacingCache) SyncedPartitions() shard.PartitionSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, f.synced.Clone())
	return f.synced.Clone()
}

func (f *replacingCache) Changed() <-chan struct{} {
	call := changedCall{release: make(chan struct{}), returned: make(chan struct{})}
	f.calls <- call
	<-call.release
	f.mu.Lock()
	defer f.mu.Unlock()
	defer close(call.returned)
	return f.changed
}

// sync marks set synced and signals the change.
func (f *replacingCache) sync(set shard.PartitionSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = f.synced.Union(set)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *replacingCache) lastRead() shard.PartitionSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reads) == 0 {
		return shard.PartitionSet{}
	}
	return f.reads[len(f.reads)-1]
}

// The cache's last change before it goes quiet must reach the core even
// when it lands between the loop's read of the synced partitions and the
// watcher's next Changed: a claimed partition activates only once read
// synced, and nothing else reads again while the ring stays still. The
// test plays the loop (it runs what the watcher posts) and lands the last
// change at the latest moment before the watcher's next Changed returns,
// after every read posted by then. The watcher once took the next channel
// only after posting the read, so that change closed a channel nobody
// waited on and the partitions stayed unsynced for good: a replica claimed
// its share and activated none of it (issue 41's stall).
func TestWatchCacheMissesNoLastChange(t *testing.T) {
	const partitions = 7
	core, err := handoff.New(handoff.Config{Identity: "a", Incarnation: "inc-a", Ring: shard.Config{Partitions: partitions}, PartitionCache: true})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := newRingMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := newCoordinatorWith(core, newFakeMembership("a"), nil, metrics, logr.Discard(), shard.Timing{}, func(int) {})
	cache := &replacingCache{synced: shard.NewPartitionSet(partitions), changed: make(chan struct{}), calls: make(chan changedCall)}
	c.cache = cache
	posted := make(chan func())
	c.postFn = func(ctx context.Context, f func()) {
		select {
		case posted <- f:
		case <-ctx.Done():
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.watchCache(ctx)
	}()
	defer func() {
		cancel()
		// Release a Changed call the watcher may be waiting in.
		for {
			select {
			case call := <-cache.calls:
				call.let()
			case <-done:
				return
			}
		}
	}()

	// loop runs what the watcher posts until it calls Changed, and returns
	// that call.
	loop := func() changedCall {
		for {
			select {
			case f := <-posted:
				f()
			case call := <-cache.calls:
				return call
			case <-time.After(10 * time.Second):
				t.Fatal("the watcher neither posted a read nor called Changed within 10s")
			}
		}
	}
	loop().let() // the watcher's first Changed

	first, rest := shard.NewPartitionSet(partitions, 2), shard.NewPartitionSet(partitions, 0, 1, 3, 4, 5, 6)
	cache.sync(first)
	call := loop()   // reads posted so far have run
	cache.sync(rest) // the cache's last change, before the watcher's Changed returns
	call.let()

	all := shard.FullPartitionSet(partitions)
	deadline := time.After(5 * time.Second)
	for !cache.lastRead().Equal(all) {
		select {
		case f := <-posted:
			f()
		case call := <-cache.calls:
			call.let()
		case <-deadline:
			t.Fatalf("the loop last read %v synced, not every partition: the cache's last change was never read, so its partitions would wait for the cache forever", cache.lastRead())
		}
	}
}
