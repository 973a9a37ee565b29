package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// observer watches the benchmark objects and keeps, for each, the
// generation and epoch its reconciler last recorded; it times updates the
// writer registered until their reconcile is seen.
type observer struct {
	mu         sync.Mutex
	objs       map[string]seen
	epochCount map[int]int // objects whose recorded epoch is the key
	// epochBy holds, per epoch, each reconciler's share (annotation
	// bench.kshard.io/by): the objects it brought to that epoch first.
	epochBy map[int]map[string]*replicaShare
	pending map[string][]expectation
	delays  []delay
	changed chan struct{} // closed and replaced on every change
}

type seen struct {
	gen, epoch int
	by         string
}

type expectation struct {
	gen  int
	sent time.Time
}

// delay is one update's time from being sent to its reconcile being seen.
type delay struct {
	sent time.Time
	d    time.Duration
}

func newObserver() *observer {
	return &observer{objs: map[string]seen{}, epochCount: map[int]int{}, epochBy: map[int]map[string]*replicaShare{}, pending: map[string][]expectation{}, changed: make(chan struct{})}
}

// run watches until ctx ends; it returns once the informer has synced (or
// ctx ended). The informer's goroutines are owned by ctx: wait on done.
func (o *observer) run(ctx context.Context, client kubernetes.Interface, ns string) (done <-chan struct{}, err error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = labelKey + "=" + labelObject }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.observe(obj) },
		UpdateFunc: func(_, obj any) { o.observe(obj) },
	}); err != nil {
		closed := make(chan struct{})
		close(closed)
		return closed, err
	}
	factory.Start(ctx.Done())
	ch := make(chan struct{})
	go func() {
		// Shutdown blocks until ctx has ended and the informer's
		// goroutines have returned.
		factory.Shutdown()
		close(ch)
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ch, fmt.Errorf("observer: informer did not sync: %w", ctx.Err())
	}
	return ch, nil
}

func (o *observer) observe(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	now := time.Now()
	gen, epoch := parseObserved(cm.Annotations[annObserved])
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, had := o.objs[cm.Name]
	if had {
		o.epochCount[prev.epoch]--
	}
	by := cm.Annotations[annReconciler]
	o.objs[cm.Name] = seen{gen: gen, epoch: epoch, by: by}
	o.epochCount[epoch]++
	if !had || epoch > prev.epoch {
		o.recordShare(epoch, by, now)
	}
	if ps := o.pending[cm.Name]; len(ps) > 0 {
		keep := ps[:0]
		for _, p := range ps {
			if p.gen <= gen {
				o.delays = append(o.delays, delay{sent: p.sent, d: now.Sub(p.sent)})
			} else {
				keep = append(keep, p)
			}
		}
		if len(keep) == 0 {
			delete(o.pending, cm.Name)
		} else {
			o.pending[cm.Name] = keep
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// replicaShare is what one reconciler did of one epoch: the objects it
// brought to the epoch and when the last of them was seen.
type replicaShare struct {
	ID      string `json:"id"`
	Objects int    `json:"objects"`
	// FirstSeconds and Seconds: from the epoch write to its first and its
	// last object (set by shares).
	FirstSeconds float64 `json:"first_seconds"`
	Seconds      float64 `json:"seconds"`
	first, last  time.Time
}

// recordShare counts an object that reached epoch by reconciler by at now
// (lock held).
func (o *observer) recordShare(epoch int, by string, now time.Time) {
	m := o.epochBy[epoch]
	if m == nil {
		m = map[string]*replicaShare{}
		o.epochBy[epoch] = m
	}
	s := m[by]
	if s == nil {
		s = &replicaShare{ID: by, first: now}
		m[by] = s
	}
	s.Objects++
	s.last = now
}

// shares returns each reconciler's share of epoch e, timed from sent,
// largest share first.
func (o *observer) shares(e int, sent time.Time) []replicaShare {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []replicaShare
	for _, s := range o.epochBy[e] {
		c := *s
		c.FirstSeconds, c.Seconds = s.first.Sub(sent).Seconds(), s.last.Sub(sent).Seconds()
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b replicaShare) int { return cmp.Or(b.Objects-a.Objects, strings.Compare(a.ID, b.ID)) })
	return out
}

// parseObserved reads "<gen>/<epoch>"; anything else reads as 0/0.
func parseObserved(s string) (gen, epoch int) {
	g, e, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0
	}
	gen, _ = strconv.Atoi(g)
	epoch, _ = strconv.Atoi(e)
	return gen, epoch
}

// expect registers an update of name to gen, sent at sent.
func (o *observer) expect(name string, gen int, sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending[name] = append(o.pending[name], expectation{gen: gen, sent: sent})
}

// wait blocks until cond (called with the lock held) holds or ctx ends.
func (o *observer) wait(ctx context.Context, cond func() bool) error {
	for {
		o.mu.Lock()
		ok := cond()
		ch := o.changed
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// atEpoch counts the objects whose recorded epoch is at least e (lock held).
func (o *observer) atEpoch(e int) int {
	n := 0
	for epoch, c := range o.epochCount {
		if epoch >= e {
			n += c
		}
	}
	return n
}

// waitEpoch waits until all n objects record epoch e or later, returning
// when the last was seen.
func (o *observer) waitEpoch(ctx context.Context, e, n int) (time.Time, error) {
	var at time.Time
	err := o.wait(ctx, func() bool {
		if o.atEpoch(e) >= n {
			at = time.Now()
			return true
		}
		return false
	})
	if err != nil {
		o.mu.Lock()
		got := o.atEpoch(e)
		o.mu.Unlock()
		return at, fmt.Errorf("%d of %d objects reached epoch %d: %w", got, n, e, err)
	}
	return at, nil
}

// waitNoPending waits until every registered update has been seen.
func (o *observer) waitNoPending(ctx context.Context) error {
	err := o.wait(ctx, func() bool { return len(o.pending) == 0 })
	if err != nil {
		return fmt.Errorf("%d updates never seen reconciled: %w", o.pendingCount(), err)
	}
	return nil
}

// pendingCount is how many registered updates have not been seen yet.
func (o *observer) pendingCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ps := range o.pending {
		n += len(ps)
	}
	return n
}

// takeDelays returns and forgets the delays recorded so far, by send time.
func (o *observer) takeDelays() []delay {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.delays
	o.delays = nil
	sort.Slice(out, func(i, j int) bool { return out[i].sent.Before(out[j].sent) })
	return out
}

// get returns what was last seen of name.
func (o *observer) get(name string) seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.objs[name]
}
