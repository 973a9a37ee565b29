package cachetest

import (
	"context"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// SelectorServer is the part of an API server a sharded cache's views see:
// LISTs and watches of ConfigMaps by label selector, where a change that
// takes an object out of a selector reaches that watch as DELETED with its
// last matching content at the change's resourceVersion, as the watch
// cache sends it. Tests set every resourceVersion themselves, and can make
// watches lag (Pause) to build the races the caches must survive.
type SelectorServer struct {
	mu       sync.Mutex
	objs     map[string]*corev1.ConfigMap
	rv       int // the newest resourceVersion applied; a LIST's
	watchers []*selectorWatcher
}

type selectorWatcher struct {
	sel    labels.Selector
	w      *watch.FakeWatcher
	paused bool // its events are not sent: the watch lags
}

// NewSelectorServer serves objs (keyed by namespace/name) before any
// watch is open.
func NewSelectorServer(objs ...*corev1.ConfigMap) *SelectorServer {
	s := &SelectorServer{objs: map[string]*corev1.ConfigMap{}}
	for _, obj := range objs {
		s.objs[shard.KeyOf(obj.Namespace, obj.Name)] = obj.DeepCopy()
		rv, _ := strconv.Atoi(obj.ResourceVersion)
		s.rv = max(s.rv, rv)
	}
	return s
}

// send delivers ev to the watcher unless it is paused or stopped.
func (w *selectorWatcher) send(ev watch.Event) {
	if w.w.IsStopped() || w.paused {
		return
	}
	w.w.Action(ev.Type, ev.Object)
}

// Get returns a copy of the object of namespace/name, if it exists.
func (s *SelectorServer) Get(namespace, name string) (*corev1.ConfigMap, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objs[shard.KeyOf(namespace, name)]
	if !ok {
		return nil, false
	}
	return obj.DeepCopy(), true
}

// Pause stops sending events to the watches whose selector matches
// labelled, as if they lagged until their informers stop.
func (s *SelectorServer) Pause(labelled map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		if w.sel.Matches(labels.Set(labelled)) {
			w.paused = true
		}
	}
}

// ListWatch lists and watches the server by the options' label selector.
func (s *SelectorServer) ListWatch() *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel, err := labels.Parse(o.LabelSelector)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(max(s.rv, 1))}}
			for _, obj := range s.objs {
				if sel.Matches(labels.Set(obj.Labels)) {
					list.Items = append(list.Items, *obj.DeepCopy())
				}
			}
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel, err := labels.Parse(o.LabelSelector)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			w := watch.NewFakeWithChanSize(16, false)
			s.watchers = append(s.watchers, &selectorWatcher{sel: sel, w: w})
			return w, nil
		},
	}
}

// Apply stores obj and sends every watch what the change means to it.
func (s *SelectorServer) Apply(obj *corev1.ConfigMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := shard.KeyOf(obj.Namespace, obj.Name)
	old := s.objs[key]
	s.objs[key] = obj.DeepCopy()
	rv, _ := strconv.Atoi(obj.ResourceVersion)
	s.rv = max(s.rv, rv)
	for _, w := range s.watchers {
		wasIn := old != nil && w.sel.Matches(labels.Set(old.Labels))
		isIn := w.sel.Matches(labels.Set(obj.Labels))
		switch {
		case wasIn && isIn:
			w.send(watch.Event{Type: watch.Modified, Object: obj.DeepCopy()})
		case isIn:
			w.send(watch.Event{Type: watch.Added, Object: obj.DeepCopy()})
		case wasIn:
			last := old.DeepCopy()
			last.ResourceVersion = obj.ResourceVersion
			w.send(watch.Event{Type: watch.Deleted, Object: last})
		}
	}
}

// Remove deletes the object of key at resourceVersion rv.
func (s *SelectorServer) Remove(key string, rv int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.objs[key]
	delete(s.objs, key)
	s.rv = max(s.rv, rv)
	for _, w := range s.watchers {
		if old != nil && w.sel.Matches(labels.Set(old.Labels)) {
			last := old.DeepCopy()
			last.ResourceVersion = strconv.Itoa(rv)
			w.send(watch.Event{Type: watch.Deleted, Object: last})
		}
	}
}
