package segmented

import (
	"context"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
)

// listWatchFor is the resource's list and watch restricted to parts: the
// selector sent to the server when it filters, and a client-side check of
// every item and event in any case.
func (s *Segmented) listWatchFor(parts shard.PartitionSet, seg *segment) toolscache.ListerWatcher {
	matcher := func(obj runtime.Object) bool {
		p, ok := s.PartitionOf(obj)
		return ok && parts.Has(p)
	}
	shardSelector, labelSelector := "", ""
	switch {
	case s.opts.LabelKey != "":
		labelSelector, _ = partitionlabel.SelectorIn(s.opts.LabelKey, parts)
	case s.filtered:
		shardSelector, _ = s.opts.Partitioner.Selector(parts)
	}
	selector := shardSelector // the one whose application is checked
	setSelector := func(o *metav1.ListOptions) {
		o.ShardSelector = shardSelector
		o.LabelSelector = cachekit.AndSelectors(o.LabelSelector, labelSelector)
	}
	inner := s.opts.ListWatch
	return cachekit.ListingListWatch{ListWatch: &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			setSelector(&o)
			var list runtime.Object
			var err error
			if labelSelector != "" {
				// In pages: a segment listing a replica's whole share at
				// its start would otherwise arrive as one response.
				list, err = cachekit.ListInPages(ctx, inner, o, nil)
			} else {
				list, err = inner.ListWithContext(ctx, o)
			}
			if err != nil {
				return nil, err
			}
			if lm, err := meta.ListAccessor(list); err == nil {
				rv, _ := strconv.ParseUint(lm.GetResourceVersion(), 10, 64)
				raise(&seg.listRV, rv)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			listed := len(items)
			s.listed.Add(int64(listed))
			kept := slices.DeleteFunc(items, func(o runtime.Object) bool { return !matcher(o) })
			if selector != "" && (len(kept) < listed || echoesAnother(list, selector)) {
				// Another API server behind the same address may lack the
				// gate: the client-side check keeps the store exact.
				if s.unfiltered.Add(1) == 1 {
					s.log.Info("the API server returned objects outside the shard selector to a LIST; filtering on the client (HA control plane with the ShardedListAndWatch gate on some servers only?)")
				}
			}
			if s.opts.Leaving != nil {
				cachekit.ReportVanished(seg.inf.GetStore(), kept, s.opts.Leaving)
				for _, o := range kept {
					if s.movesWithin(seg, o) {
						s.opts.Leaving(o)
					}
				}
			}
			if len(kept) < listed {
				if err := meta.SetList(list, kept); err != nil {
					return nil, err
				}
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			setSelector(&o)
			w, err := inner.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
				default:
					return ev, true // bookmarks and errors carry no object of a partition
				}
				if !matcher(ev.Object) {
					return ev, false
				}
				if s.opts.Leaving != nil && (ev.Type == watch.Deleted || ev.Type == watch.Modified && s.movesWithin(seg, ev.Object)) {
					s.opts.Leaving(ev.Object)
				}
				raise(&seg.received, objectRV(ev.Object))
				return ev, true
			}), nil
		},
	}}
}

// movesWithin reports whether obj, a new state of an object that seg
// lists, is stored under a partition no longer held (seg still lists the
// released partitions of its own until it stops, hiding their objects), or
// under another partition than seg's stored copy (a label edited from one
// of seg's partitions to another, which the server sends as MODIFIED, not
// as a DELETED and an ADDED). Either way the object may vanish from reads
// with no deletion, which the Labelled must hear of first. The stored copy
// may lag the event; a later state arriving through the handlers settles
// what a lagging comparison got wrong.
func (s *Segmented) movesWithin(seg *segment, obj runtime.Object) bool {
	p, ok := s.PartitionOf(obj)
	if !ok {
		return false
	}
	s.mu.Lock()
	held := s.held.Has(p)
	s.mu.Unlock()
	if !held {
		return true
	}
	stored, exists, err := seg.inf.GetStore().Get(obj)
	if err != nil || !exists {
		return false
	}
	was, ok := s.PartitionOf(stored)
	return ok && was != p
}

// echoesAnother reports whether a LIST response says the server applied
// another selector than the one sent. No echo at all says nothing: the
// server filters custom resources without one (Kubernetes 1.36).
func echoesAnother(list runtime.Object, selector string) bool {
	a, ok := list.(metav1.ListMetaAccessor)
	if !ok {
		return false
	}
	m, ok := a.GetListMeta().(*metav1.ListMeta)
	return ok && m.ShardInfo != nil && m.ShardInfo.Selector != selector
}
