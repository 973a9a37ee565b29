package labelled

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/internal/partitionlabel"
	"github.com/kshard/kshard/shard"
)

// speaker returns the unlabelled view that is read and whose events pass:
// the newest synced one, or the newest. Call with l.mu held.
func (l *Labelled) speaker() *unlabelledView {
	for i := len(l.unlabelled) - 1; i >= 0; i-- {
		if l.unlabelled[i].synced.Load() {
			return l.unlabelled[i]
		}
	}
	if len(l.unlabelled) == 0 {
		return nil
	}
	return l.unlabelled[len(l.unlabelled)-1]
}

// startUnlabelled lists and watches the unlabelled objects, keeping those
// of keeps; views it replaces stop once it has synced, as does an older
// replacement still listing. Call with l.mu held.
func (l *Labelled) startUnlabelled(keeps shard.PartitionSet) {
	l.stats.UnlabelledLists.Add(1)
	ctx, cancel := context.WithCancel(l.ctx)
	v := &unlabelledView{cancel: cancel, keeps: keeps, dirty: shard.NewPartitionSet(keeps.Size())}
	// A replacement that has not synced yet is superseded at once.
	l.unlabelled = slices.DeleteFunc(l.unlabelled, func(o *unlabelledView) bool {
		if !o.synced.Load() {
			o.cancel()
			return true
		}
		return false
	})
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for name, f := range l.opts.Indexers {
		indexers[name] = f
	}
	v.inf = toolscache.NewSharedIndexInformerWithOptions(l.unlabelledListWatch(v), l.opts.Example, toolscache.SharedIndexInformerOptions{Indexers: indexers})
	if l.opts.Transform != nil {
		_ = v.inf.SetTransform(l.opts.Transform)
	}
	_, _ = v.inf.AddEventHandler(l.viewHandler(v))
	l.unlabelled = append(l.unlabelled, v)
	l.log.V(1).Info("listing the unlabelled objects", "keeps", keeps.Len(), "views", len(l.unlabelled))
	l.wg.Go(func() { v.inf.RunWithContext(ctx) })
	l.wg.Go(func() {
		if !toolscache.WaitForCacheSync(ctx.Done(), v.inf.HasSynced) {
			return
		}
		l.mu.Lock()
		if !slices.Contains(l.unlabelled, v) {
			l.mu.Unlock()
			return
		}
		l.takeOver(l.speaker(), v)
		v.synced.Store(true)
		l.unlabelled = slices.DeleteFunc(l.unlabelled, func(o *unlabelledView) bool {
			if o != v {
				o.cancel()
				return true
			}
			return false
		})
		l.signal()
		l.log.V(1).Info("unlabelled view synced", "keeps", v.keeps.Intersect(l.held).Len(), "held", l.held.Len(), "dropped", v.dirty.Len())
		rescan := !l.active.Intersect(v.keeps).IsEmpty()
		l.mu.Unlock()
		if rescan {
			l.rescan() // label what it listed of the active partitions
		}
	})
}

// takeOver makes pending what the unlabelled view old serves and nothing
// else does once next replaces it: an object stripped of its label after
// next listed, whose ADDED has not reached next yet, and whose label
// segment dropped it while old still served it (so leaving found it held
// and made nothing pending). Without this, reads would miss it until
// next's watch catches up. Pending, it stays served until it arrives in
// a view or a live read finds it gone. Call with l.mu held, before next
// becomes the speaker.
func (l *Labelled) takeOver(old, next *unlabelledView) {
	if old == nil || old == next {
		return
	}
	now := l.opts.Clock.Now()
	for _, obj := range old.inf.GetStore().List() {
		ro, ok := obj.(runtime.Object)
		if !ok {
			continue
		}
		p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, ro)
		if !ok || !l.held.Has(p) {
			continue
		}
		key, uid := keyAndUID(obj)
		if held, ok, _ := next.inf.GetStore().GetByKey(key); ok && uidOf(held) == uid && !newer(obj, held) {
			continue
		}
		if held, ok, _ := l.segs.GetByKey(key); ok && uidOf(held) == uid && !newer(obj, held) {
			continue
		}
		l.markPending(key, uid, obj, now)
	}
}

// keep decides whether view v stores obj, and marks the partition dirty
// when it does not (the view's store is then incomplete for it).
func (l *Labelled) keep(v *unlabelledView, obj runtime.Object, deleted bool) bool {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.keeps.Has(p) {
		return true
	}
	if !deleted {
		v.dirty.Add(p)
	}
	return false
}

// unlabelledListWatch lists page by page (listInPages), each page filtered
// to the view's partitions before the next is read, and watches with the
// same filter.
func (l *Labelled) unlabelledListWatch(v *unlabelledView) toolscache.ListerWatcher {
	selector := partitionlabel.SelectorUnlabelled(l.opts.LabelKey, l.opts.Partitioner.Count())
	inner := l.opts.ListWatch
	return cachekit.ListingListWatch{ListWatch: &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = cachekit.AndSelectors(o.LabelSelector, selector)
			list, err := cachekit.ListInPages(ctx, inner, o, func(it runtime.Object) bool { return l.keep(v, it, false) })
			if err != nil {
				return nil, err
			}
			kept, err := meta.ExtractList(list)
			if err != nil {
				return nil, err
			}
			cachekit.ReportVanished(v.inf.GetStore(), kept, func(obj runtime.Object) { l.leaving(v, obj) })
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = cachekit.AndSelectors(o.LabelSelector, selector)
			w, err := inner.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				switch ev.Type {
				case watch.Added, watch.Modified:
					return ev, l.keep(v, ev.Object, false)
				case watch.Deleted:
					keep := l.keep(v, ev.Object, true)
					if keep {
						l.leaving(v, ev.Object)
					}
					return ev, keep
				}
				return ev, true
			}), nil
		},
	}}
}
