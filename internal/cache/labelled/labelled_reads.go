package labelled

import (
	"errors"
	"fmt"
	"slices"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/shard"
)

// ---- users' handlers ----

// labelledHandler is a handler added with AddEventHandler.
type labelledHandler struct {
	h toolscache.ResourceEventHandler
}

func (*labelledHandler) HasSynced() bool                          { return true }
func (*labelledHandler) HasSyncedChecker() toolscache.DoneChecker { return cachekit.AlwaysDone{} }

// dispatch calls f for every handler. Handlers are called from the views'
// goroutines, concurrently: they must be safe for that, as a controller's
// enqueueing handlers are.
func (l *Labelled) dispatch(f func(toolscache.ResourceEventHandler)) {
	l.dispatchMu.RLock()
	defer l.dispatchMu.RUnlock()
	for _, h := range l.handlers {
		f(h.h)
	}
}

// AddEventHandler registers h: it gets every held object once as an
// initial add, then every event of the held partitions. As for Segmented,
// the registration reports synced at once; partitions sync one by one.
func (l *Labelled) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	if h == nil {
		return nil, errors.New("cache: AddEventHandler(nil)")
	}
	reg := &labelledHandler{h: h}
	l.dispatchMu.Lock()
	defer l.dispatchMu.Unlock()
	for _, obj := range l.List() {
		h.OnAdd(obj, true)
	}
	l.handlers = append(l.handlers, reg)
	return reg, nil
}

// RemoveEventHandler stops deliveries to a handler AddEventHandler added.
func (l *Labelled) RemoveEventHandler(r toolscache.ResourceEventHandlerRegistration) error {
	reg, ok := r.(*labelledHandler)
	if !ok {
		return fmt.Errorf("cache: RemoveEventHandler: %T was not returned by this Labelled's AddEventHandler", r)
	}
	l.dispatchMu.Lock()
	defer l.dispatchMu.Unlock()
	l.handlers = slices.DeleteFunc(l.handlers, func(o *labelledHandler) bool { return o == reg })
	return nil
}

// ---- reads ----

// Reads take every view and the pending set under l.mu, as one snapshot:
// an object leaving a view is made pending (leaving, under l.mu) before
// that view drops it, and leaves the pending set (arrived, under l.mu) only
// after the view it reached stores it, so while l.mu is held it is in a
// view or pending. Read one by one outside l.mu, an object moving from the
// unlabelled view to a label segment could be missed in both the segment
// (read before it arrived) and the pending set (read after it arrived).

// views returns, each once and at its newest, the objects the views and
// the pending set hold whose request partition is in parts.
func (l *Labelled) views(parts shard.PartitionSet) []any {
	l.mu.Lock()
	segItems := l.segs.List()
	var unl []any
	if v := l.speaker(); v != nil {
		unl = v.inf.GetStore().List()
	}
	pend := make([]any, 0, len(l.pending))
	for _, p := range l.pending {
		pend = append(pend, p.obj)
	}
	l.mu.Unlock()
	return l.merge(parts, segItems, unl, pend)
}

// merge keeps, for every key, the newest object of the lists whose request
// partition is in parts.
func (l *Labelled) merge(parts shard.PartitionSet, lists ...[]any) []any {
	byKey := map[string]int{}
	var out []any
	for _, list := range lists {
		for _, obj := range list {
			p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
			if !ok || !parts.Has(p) {
				continue
			}
			key, _ := keyAndUID(obj)
			if i, seen := byKey[key]; seen {
				if newer(obj, out[i]) {
					out[i] = obj
				}
				continue
			}
			byKey[key] = len(out)
			out = append(out, obj)
		}
	}
	return out
}

// List returns the cached objects of the held partitions, each once.
func (l *Labelled) List() []any { return l.views(l.Held()) }

// ListNamespace returns the cached objects of namespace in the held
// partitions, each once.
func (l *Labelled) ListNamespace(namespace string) ([]any, error) {
	return l.ByIndex(toolscache.NamespaceIndex, namespace)
}

// ByIndex returns the held objects whose index name has value, each once.
func (l *Labelled) ByIndex(name, value string) ([]any, error) {
	l.mu.Lock()
	segItems, err := l.segs.ByIndex(name, value)
	if err != nil {
		l.mu.Unlock()
		return nil, err
	}
	held := l.held.Clone()
	var unl []any
	if v := l.speaker(); v != nil {
		if unl, err = v.inf.GetIndexer().ByIndex(name, value); err != nil {
			l.mu.Unlock()
			return nil, err
		}
	}
	var pend []any
	if index := l.indexFunc(name); index != nil {
		for _, p := range l.pending {
			if values, err := index(p.obj); err == nil && slices.Contains(values, value) {
				pend = append(pend, p.obj)
			}
		}
	}
	l.mu.Unlock()
	return l.merge(held, segItems, unl, pend), nil
}

// indexFunc returns the index function of the index name (nil if none):
// pending objects are in no view's indexer, so reads by index apply it.
func (l *Labelled) indexFunc(name string) toolscache.IndexFunc {
	if name == toolscache.NamespaceIndex {
		return toolscache.MetaNamespaceIndexFunc
	}
	return l.opts.Indexers[name]
}

// GetByKey returns the newest cached object of key ("namespace/name") if
// its request partition is held.
func (l *Labelled) GetByKey(key string) (any, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	found, err := l.newest(key)
	if err != nil || found == nil {
		return nil, false, err
	}
	if p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, found); !ok || !l.held.Has(p) {
		return nil, false, nil
	}
	return found, true, nil
}

// newest returns the newest state of key that the views or the pending set
// hold, whatever its partition (nil for none). A pending state loses a tie:
// made from a DELETED event, it carries the resourceVersion of the change
// that took the object out of its view but the content from before it, while
// a view's state at that resourceVersion is the change's. Call with l.mu
// held.
func (l *Labelled) newest(key string) (any, error) {
	var found any
	consider := func(obj any) {
		if found == nil || newer(obj, found) {
			found = obj
		}
	}
	if obj, ok, err := l.segs.GetByKey(key); err != nil {
		return nil, err
	} else if ok {
		consider(obj)
	}
	if v := l.speaker(); v != nil {
		if obj, ok, err := v.inf.GetStore().GetByKey(key); err != nil {
			return nil, err
		} else if ok {
			consider(obj)
		}
	}
	if p, ok := l.pending[key]; ok {
		consider(p.obj)
	}
	return found, nil
}

// CountPartitions adds to counts[p] how many held objects the cache serves
// in partition p (a balanced ring's weights).
func (l *Labelled) CountPartitions(counts []int) {
	for _, obj := range l.List() {
		if p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj); ok && p < len(counts) {
			counts[p]++
		}
	}
}

// GetStore returns a read-only view of the held objects.
func (l *Labelled) GetStore() toolscache.Store { return cachekit.ReadOnlyStore{S: l} }
