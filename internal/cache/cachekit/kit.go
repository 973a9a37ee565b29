package cachekit

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// ReportVanished tells leaving of every object in store that a relist's
// items no longer have: the store is about to drop it.
func ReportVanished(store toolscache.Store, items []runtime.Object, leaving func(runtime.Object)) {
	if len(store.ListKeys()) == 0 {
		return
	}
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		if k, err := toolscache.MetaNamespaceKeyFunc(it); err == nil {
			listed[k] = true
		}
	}
	for _, obj := range store.List() {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil && !listed[k] {
			if o, ok := obj.(runtime.Object); ok {
				leaving(o)
			}
		}
	}
}

// AndSelectors joins two label selectors: objects must match both. The
// ListWatch's own selector (a cache that holds only some labels, say) is
// kept beside the partition label's.
func AndSelectors(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// AlwaysDone is a DoneChecker that is done from the start.
type AlwaysDone struct{}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (AlwaysDone) Name() string          { return "sharded cache (synced per partition)" }
func (AlwaysDone) Done() <-chan struct{} { return closedChan }

// StoreReader is what a ReadOnlyStore reads: a sharded informer's merged
// content.
type StoreReader interface {
	List() []any
	GetByKey(key string) (any, bool, error)
}

// ReadOnlyStore is the Store of a sharded informer (Segmented, Labelled):
// reads of the objects it serves; writes fail, its informers own their
// stores.
type ReadOnlyStore struct{ S StoreReader }

var errReadOnlyStore = errors.New("cache: the store of a sharded cache is read-only")

func (v ReadOnlyStore) Add(any) error               { return errReadOnlyStore }
func (v ReadOnlyStore) Update(any) error            { return errReadOnlyStore }
func (v ReadOnlyStore) Delete(any) error            { return errReadOnlyStore }
func (v ReadOnlyStore) Replace([]any, string) error { return errReadOnlyStore }
func (v ReadOnlyStore) Resync() error               { return nil }
func (v ReadOnlyStore) Bookmark(string)             {}
func (v ReadOnlyStore) LastStoreSyncResourceVersion() string {
	return "" // one per segment; none speaks for the view
}
func (v ReadOnlyStore) List() []any { return v.S.List() }
func (v ReadOnlyStore) GetByKey(key string) (any, bool, error) {
	return v.S.GetByKey(key)
}

func (v ReadOnlyStore) ListKeys() []string {
	items := v.S.List()
	keys := make([]string, 0, len(items))
	for _, obj := range items {
		if k, err := toolscache.MetaNamespaceKeyFunc(obj); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

func (v ReadOnlyStore) Get(obj any) (any, bool, error) {
	k, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return v.S.GetByKey(k)
}

// MustBeSized panics unless set ranges over exactly partitions, the count
// a partitioned informer was built for: a set of another size would make
// it drop objects of partitions it then reports synced.
func MustBeSized(op string, set shard.PartitionSet, partitions int) {
	if set.Size() != partitions {
		panic(fmt.Sprintf("cache: %s of a set of %d partitions on an informer of %d: a programming error; build the set with the ring's partition count", op, set.Size(), partitions))
	}
}

// ResourceVersion is obj's resourceVersion as an integer, 0 when it has
// none or it does not parse: opaque to clients, but every API server backed
// by etcd issues increasing integers, and the views of one cache read one
// API server.
func ResourceVersion(obj any) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}

// ListingListWatch turns client-go's watch-list off for a sharded view (a
// label segment, an unlabelled view): its
// initial state comes from a LIST, whose response is checked as a whole
// (UnfilteredLists), which a stream of events is not. The server filters a
// watch-list by the selector too, but streaming is slower where it
// matters: measured at 100,000 objects (bench phase 9, 2026-11-26),
// streamed segments formed 3 replicas in 6.3 s against 4.3 s, rolled them
// in 18 s against 11 s with a handoff p99 of 1.52 s against 0.89 s (each
// move waits for its new owner's segment), and peaked higher (247 MiB
// against 235).
type ListingListWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to LIST.
func (ListingListWatch) IsWatchListSemanticsUnSupported() bool { return true }
