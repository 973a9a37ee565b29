package segmented

import (
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// The methods below are for the tests of the labelled cache
// (internal/cache/labelled), which drive a Segmented's stores directly to
// reproduce orders of events a live server makes hard to time. Nothing
// else calls them.

// AddSyncedSegmentForTest adds a synced segment of parts whose store holds
// objs, as if its informer had listed them, holds parts besides what is
// held, and returns the segment's store. Its informer never runs.
func (s *Segmented) AddSyncedSegmentForTest(ex runtime.Object, parts shard.PartitionSet, objs ...runtime.Object) toolscache.Store {
	seg := &segment{parts: parts, cancel: func() {}, filtered: true,
		inf: toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, ex, 0, toolscache.Indexers{})}
	seg.synced.Store(true)
	for _, o := range objs {
		_ = seg.inf.GetStore().Add(o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.segments = append(s.segments, seg)
	s.held = s.held.Union(parts)
	return seg.inf.GetStore()
}

// SetHeldForTest sets the held partitions without starting or stopping a
// segment: a release whose segment keeps listing, hidden.
func (s *Segmented) SetHeldForTest(set shard.PartitionSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = set.Clone()
}

// MovesWithinForTest is movesWithin of the oldest segment.
func (s *Segmented) MovesWithinForTest(obj runtime.Object) bool {
	s.mu.Lock()
	seg := s.segments[0]
	s.mu.Unlock()
	return s.movesWithin(seg, obj)
}

// DropForTest deletes the object of key from every segment's store,
// telling no handler (an object lost the way a bug would lose it), and
// returns how many stores held it.
func (s *Segmented) DropForTest(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, seg := range s.segments {
		if obj, ok, _ := seg.inf.GetStore().GetByKey(key); ok && seg.inf.GetStore().Delete(obj) == nil {
			n++
		}
	}
	return n
}
