package assign

import (
	"fmt"
	"testing"

	"github.com/kshard/kshard/shard"
)

var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = shard.KeyOf(fmt.Sprintf("team-%d", i%17), fmt.Sprintf("deployment-%d", i))
	}
	return keys
}()

// The shard gate's hot path: which partition is this key in, and is it active?
func BenchmarkPartitionAndHas(b *testing.B) {
	r, err := New(shard.Config{}, statefulSetNames("kshard", 3))
	if err != nil {
		b.Fatal(err)
	}
	active := r.Partitions("kshard-0")
	var part shard.Partitioner = shard.NewPartitioner(shard.DefaultPartitions)
	b.Run("Partitioner", func(b *testing.B) {
		hits, i := 0, 0
		for b.Loop() {
			if active.Has(part.Partition(benchKeys[i&1023])) {
				hits++
			}
			i++
		}
		_ = hits
	})
	b.Run("Ring", func(b *testing.B) {
		hits, i := 0, 0
		for b.Loop() {
			if active.Has(r.Partition(benchKeys[i&1023])) {
				hits++
			}
			i++
		}
		_ = hits
	})
}

func BenchmarkHas(b *testing.B) {
	s := shard.NewPartitionSet(shard.DefaultPartitions, 1, 100, 200)
	hits, i := 0, 0
	for b.Loop() {
		if s.Has(i % 300) {
			hits++
		}
		i++
	}
	_ = hits
}

func BenchmarkOwnerOfKey(b *testing.B) {
	r, err := New(shard.Config{}, statefulSetNames("kshard", 32))
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		_, _ = r.OwnerOfKey(benchKeys[i&1023])
		i++
	}
}

// A ring is rebuilt on every membership change. consistent sorts its circle
// after each member it adds, so the cost grows with members².
func BenchmarkNew(b *testing.B) {
	for _, p := range []int{271, 1021} {
		for _, n := range []int{3, 32, 256} {
			b.Run(fmt.Sprintf("P=%d/N=%d", p, n), func(b *testing.B) {
				members := statefulSetNames("kshard", n)
				for b.Loop() {
					if _, err := New(shard.Config{Partitions: p}, members); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// Replication factors TestSweepLoad compares with the default, at the
	// default load: builds grow with the factor too.
	for _, rf := range []int{100, 200} {
		for _, n := range []int{3, 32, 64} {
			b.Run(fmt.Sprintf("P=271/RF=%d/N=%d", rf, n), func(b *testing.B) {
				members := statefulSetNames("kshard", n)
				for b.Loop() {
					if _, err := New(shard.Config{ReplicationFactor: rf}, members); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// Rejected inputs fail before any placement work.
	b.Run("rejected/duplicate-member", func(b *testing.B) {
		members := append(statefulSetNames("kshard", 255), "kshard-0")
		for b.Loop() {
			if _, err := New(shard.Config{}, members); err == nil {
				b.Fatal("duplicate member accepted")
			}
		}
	})
}

func BenchmarkDiff(b *testing.B) {
	old, err := New(shard.Config{}, statefulSetNames("kshard", 32))
	if err != nil {
		b.Fatal(err)
	}
	grown, err := New(shard.Config{}, statefulSetNames("kshard", 33))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_ = ringDiff(old, grown)
	}
}
