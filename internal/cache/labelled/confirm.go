package labelled

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// confirmLoop reads the pending objects from the API server, each once
// ConfirmAfter has passed without it showing up in a view: gone, it is
// deleted for the users' handlers; still there, it stays served and is
// labelled again, and read again later.
func (l *Labelled) confirmLoop(ctx context.Context) {
	timer := l.opts.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := l.confirmDue(ctx)
		if next.IsZero() {
			next = l.opts.Clock.Now().Add(time.Minute)
		}
		timer.Reset(next.Sub(l.opts.Clock.Now()))
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-l.confirm:
		}
	}
}

// confirmReread is how long an object confirmed to exist outside every view
// waits before it is read again.
const confirmReread = 5 * time.Second

// confirmDue checks the pending objects that are due and returns when the
// next one is.
func (l *Labelled) confirmDue(ctx context.Context) time.Time {
	now := l.opts.Clock.Now()
	type due struct {
		key string
		uid types.UID
		obj any
	}
	var dues []due
	var next time.Time
	l.mu.Lock()
	for key, p := range l.pending {
		if !p.nextCheck.After(now) {
			dues = append(dues, due{key, p.uid, p.obj})
		} else if next.IsZero() || p.nextCheck.Before(next) {
			next = p.nextCheck
		}
	}
	for key, m := range l.moved {
		if now.Sub(m.at) > time.Minute {
			delete(l.moved, key)
		}
	}
	l.mu.Unlock()
	for _, d := range dues {
		if ctx.Err() != nil {
			return next
		}
		ns, name, _ := toolscache.SplitMetaNamespaceKey(d.key)
		l.stats.ConfirmReads.Add(1)
		live, err := l.opts.Client.Get(ctx, ns, name)
		gone := apierrors.IsNotFound(err) || (err == nil && uidOf(live) != d.uid)
		l.mu.Lock()
		p, still := l.pending[d.key]
		if !still || p.uid != d.uid {
			l.mu.Unlock()
			continue // it showed up in a view meanwhile
		}
		inView := false
		if err == nil && !gone {
			// A view may hold it at its live state already, its add
			// having come before the other view's delete: it is no
			// longer out of every view. The view's state must also be
			// at least the pending one: while the read ran, the object
			// may have left that view again (its leaving made this
			// pending state, newer than the read), and the view drops
			// it the moment its watch catches up.
			held := l.otherView(d.key, nil)
			if held == nil {
				held, _, _ = l.segs.GetByKey(d.key)
			}
			inView = held != nil && uidOf(held) == d.uid && !newer(live, held) && !newer(p.obj, held)
		}
		switch {
		case gone, inView:
			delete(l.pending, d.key)
		case err != nil:
			p.nextCheck = l.opts.Clock.Now().Add(confirmReread)
		default:
			if l.opts.Transform != nil {
				if t, terr := l.opts.Transform(live); terr == nil {
					if o, ok := t.(runtime.Object); ok {
						live = o
					}
				}
			}
			if !newer(p.obj, live) {
				p.obj = live // else a view's leaving saw a later state while the read ran
			}
			p.nextCheck = l.opts.Clock.Now().Add(confirmReread)
		}
		if !gone && !inView && (next.IsZero() || p.nextCheck.Before(next)) {
			next = p.nextCheck
		}
		l.mu.Unlock()
		switch {
		case gone:
			l.stats.ConfirmedGone.Add(1)
			l.dispatch(func(h toolscache.ResourceEventHandler) { h.OnDelete(d.obj) })
		case err != nil:
			l.log.V(1).Info("reading an object that left the cache's views failed; retrying", "key", d.key, "error", err.Error())
		default:
			// It exists: labelled for a partition no view here selects
			// (edited by hand, say), or held by a view with a wrong
			// label, it is labelled for its own.
			l.labeller.consider(live)
		}
	}
	return next
}
