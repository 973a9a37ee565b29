package segmented

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// A Hold that lands while Run starts wins over what was held before Run:
// Run once applied that older set after setting its context, outside the
// critical section, so a Hold in between started the segments of its set
// and the stale one then took back what it gained, leaving those
// partitions unsynced until the next Hold (a replica that claims them and
// never activates them). afterRunStart lands the Hold where it raced.
func TestHoldRacingRunStartIsNotUndone(t *testing.T) {
	const partitions = 4
	cs := fake.NewClientset()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
		},
	}
	s, err := New(Options{LabelKey: "kshard.io/partition-test", Partitions: partitions, ListWatch: lw, Example: &corev1.ConfigMap{}})
	if err != nil {
		t.Fatal(err)
	}
	before, racing := shard.NewPartitionSet(partitions, 0), shard.NewPartitionSet(partitions, 0, 1, 2)
	s.Hold(before) // before Run: started by Run
	s.opts.afterRunStart = func() { s.Hold(racing) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for !s.SyncedPartitions().Equal(racing) {
		select {
		case <-s.Changed():
		case <-deadline:
			t.Fatalf("holds %v and synced %v; want %v, the Hold that raced Run's start", s.Held(), s.SyncedPartitions(), racing)
		}
	}
}
