package labelled

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// viewHandler is the handler of one view: the label segments (v nil) or an
// unlabelled view. It passes events of held partitions on to the users'
// handlers, merged: an object that moves between views is updated, never
// deleted and added again.
func (l *Labelled) viewHandler(v *unlabelledView) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, _ bool) {
			l.labeller.consider(obj)
			if l.serves(v, obj) {
				l.arrived(v, obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			l.labeller.consider(obj)
			if l.serves(v, obj) {
				l.updated(v, obj)
				l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnUpdate(old, obj) })
			}
		},
		DeleteFunc: func(obj any) {
			if l.serves(v, obj) {
				l.left(v, obj)
			}
		},
	}
}

// serves reports whether an event of view v about obj is passed on: obj's
// request partition is held, and v is the speaking unlabelled view (the
// label segments pick their speaker themselves).
func (l *Labelled) serves(v *unlabelledView, obj any) bool {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Has(p) {
		return false
	}
	return v == nil || (l.speaker() == v && v.keeps.Has(p))
}

// arrived passes on an object that a view now holds: an update if the
// users' handlers knew it from another view (or as pending), else an add.
func (l *Labelled) arrived(v *unlabelledView, obj any) {
	key, uid := keyAndUID(obj)
	var before any
	l.mu.Lock()
	if p, ok := l.pending[key]; ok {
		// A pending state newer than the one arriving stays pending: it
		// came from a later change that takes the object out of this view
		// too (its DELETED is already behind this ADDED in the view's
		// queue), and the view is about to drop it again.
		if p.uid != uid || !newer(p.obj, obj) {
			delete(l.pending, key)
		}
		before = p.obj
	} else if m, ok := l.moved[key]; ok {
		delete(l.moved, key)
		before = m.obj
	} else {
		before = l.otherView(key, v)
	}
	if !l.viewHolds(v, key, uid) {
		// Handlers run after the store changed, and the view no longer
		// serves the object: its segment was released since (Hold hides a
		// released segment without a deletion), or a later change took
		// it out again. The arrival proves it exists but no view keeps
		// it: pending, it stays served until a view shows it or a live
		// read finds it gone.
		l.markPending(key, uid, obj, l.opts.Clock.Now())
	}
	l.mu.Unlock()
	switch {
	case before == nil:
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnAdd(obj, false) })
	case uidOf(before) != uid:
		// The name was deleted and created again meanwhile.
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnDelete(before) })
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnAdd(obj, false) })
	default:
		l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnUpdate(before, obj) })
	}
}

// viewHolds reports whether view v (nil: the label segments) serves the
// object of key and uid now. Call with l.mu held.
func (l *Labelled) viewHolds(v *unlabelledView, key string, uid types.UID) bool {
	var obj any
	var ok bool
	if v == nil {
		obj, ok, _ = l.segs.GetByKey(key)
	} else {
		obj, ok, _ = v.inf.GetStore().GetByKey(key)
	}
	return ok && uidOf(obj) == uid
}

// updated ends the pending state of an object that view v still serves at
// a state at least as new: its label moved it within one label segment
// (leaving made it pending, in case the move hid it), and the segment
// shows it still.
func (l *Labelled) updated(v *unlabelledView, obj any) {
	key, uid := keyAndUID(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.pending[key]; ok && p.uid == uid && !newer(p.obj, obj) && l.viewHolds(v, key, uid) {
		delete(l.pending, key)
	}
}

// leaving is told, before view v's store drops it, of an object that left
// v. If another view holds it, it moved there: nothing is lost. Otherwise
// it becomes pending: still served, until it shows up in a view or a live
// read finds it gone. It runs in v's watch (or list) goroutine, before the
// store changes, so no read in between misses an object that exists.
func (l *Labelled) leaving(v *unlabelledView, obj runtime.Object) {
	p, ok := requestPartition(l.opts.Partitioner, l.opts.Route, obj)
	if !ok {
		return
	}
	key, uid := keyAndUID(obj)
	now := l.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Has(p) || (v != nil && l.speaker() != v) {
		return
	}
	// The other view must hold it at this state or a later one: a copy
	// older than the one leaving is a state the object has left too, and
	// the other view is about to drop it (its own leaving may already
	// have looked here, seen this view still holding the object, and
	// passed over it).
	if other := l.otherView(key, v); other != nil && uidOf(other) == uid && !newer(obj, other) {
		return
	}
	l.markPending(key, uid, l.asStored(obj), now)
}

// asStored is a copy of obj as the views store it (transformed): obj is
// the watch event's, which the view's transform changes in place on its
// way to the store while readers may already read the pending copy.
func (l *Labelled) asStored(obj runtime.Object) any {
	cp := obj.DeepCopyObject()
	if l.opts.Transform == nil {
		return cp
	}
	if out, err := l.opts.Transform(cp); err == nil {
		return out
	}
	return cp
}

// markPending makes obj pending, or updates its pending state. Call with
// l.mu held.
func (l *Labelled) markPending(key string, uid types.UID, obj any, now time.Time) {
	if old, ok := l.pending[key]; ok && old.uid == uid {
		if !newer(old.obj, obj) {
			old.obj = obj
		}
		return
	}
	l.pending[key] = &pendingObject{obj: obj, uid: uid, since: now, nextCheck: now.Add(l.opts.ConfirmAfter)}
	select {
	case l.confirm <- struct{}{}:
	default:
	}
}

// left handles the users' side of an object that left view v: when another
// view holds it, its arrival there is passed on as an update from this
// state (leaving has kept it served meanwhile, and a pending object's
// deletion is passed on by the confirmation).
func (l *Labelled) left(v *unlabelledView, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key, uid := keyAndUID(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, pending := l.pending[key]; pending {
		return
	}
	if other := l.otherView(key, v); other != nil && uidOf(other) == uid {
		l.moved[key] = movedObject{obj: obj, uid: uid, at: l.opts.Clock.Now()}
	}
}

// otherView returns the object of key that a view other than from holds
// (nil for none). Call with l.mu held.
func (l *Labelled) otherView(key string, from *unlabelledView) any {
	if from != nil {
		if obj, ok, _ := l.segs.GetByKey(key); ok {
			return obj
		}
	}
	if v := l.speaker(); v != nil && v != from {
		if obj, ok, _ := v.inf.GetStore().GetByKey(key); ok {
			return obj
		}
	}
	return nil
}
