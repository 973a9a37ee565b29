package cache_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/manager/cache"
	"github.com/kshard/kshard/shard"
)

func TestNewSegmentedValidates(t *testing.T) {
	rp, err := shard.NewRangePartitioner(shard.SchemeNamespace, 8)
	if err != nil {
		t.Fatal(err)
	}
	lw := &toolscache.ListWatch{}
	good := cache.SegmentedOptions{Partitioner: rp, ListWatch: lw, Example: &corev1.ConfigMap{}}
	for _, tc := range []struct {
		name   string
		mutate func(*cache.SegmentedOptions)
		want   string
	}{
		{"no partitioner", func(o *cache.SegmentedOptions) { o.Partitioner = shard.RangePartitioner{} }, "Partitioner"},
		{"no list-watch", func(o *cache.SegmentedOptions) { o.ListWatch = nil }, "ListWatch"},
		{"no example", func(o *cache.SegmentedOptions) { o.Example = nil }, "Example"},
		{"negative max", func(o *cache.SegmentedOptions) { o.MaxSegments = -1 }, "MaxSegments"},
	} {
		o := good
		tc.mutate(&o)
		if _, err := cache.NewSegmented(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewSegmented = %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	s, err := cache.NewSegmented(good)
	if err != nil {
		t.Fatal(err)
	}
	// Before Run nothing is listed; what was asked is kept for Run.
	s.Hold(shard.NewPartitionSet(8, 1))
	if got := s.SyncedPartitions(); !got.IsEmpty() || s.Segments() != 0 {
		t.Fatalf("before Run: synced %v, %d segments", got, s.Segments())
	}
}
