package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/shard"
)

// observer watches the benchmark objects' metadata and keeps, for each (by
// "namespace/name"), the generation and epoch its reconciler last
// recorded; it times updates the writer registered until their reconcile
// is seen. With a label check (watchLabels) it also counts the objects
// that carry their partition label.
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
	// labels checks partition labels (nil: no check); labelled counts the
	// objects whose label names their own partition.
	labels   *labelCheck
	labelled int
}

type seen struct {
	gen, epoch int
	by         string
	labelled   bool
}

// labelCheck is a ring's partition label (phase 10): its key and the
// partition function whose value each object's label must name.
type labelCheck struct {
	key         string
	partitioner shard.Partitioner
}

// watchLabels makes the observer count the objects labelled with their
// partition under ring's label for cfg. Call it before run.
func (o *observer) watchLabels(ring string, cfg shard.Config) error {
	key, err := shard.PartitionLabelKey(ring, cfg)
	if err != nil {
		return err
	}
	p, err := shard.PartitionerFor(cfg)
	if err != nil {
		return err
	}
	o.labels = &labelCheck{key: key, partitioner: p}
	return nil
}

// has reports whether m's partition label names its own partition.
func (c *labelCheck) has(m metav1.Object) bool {
	want := shard.PartitionLabelValue(c.partitioner.Partition(shard.KeyOf(m.GetNamespace(), m.GetName())))
	return m.GetLabels()[c.key] == want
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

// run watches the objects of kind in ns ("": every namespace) until ctx
// ends; it returns once the informer has synced (or ctx ended). The
// informer's goroutines are owned by ctx: wait on done.
func (o *observer) run(ctx context.Context, cfg *rest.Config, kind objectKind, ns string) (done <-chan struct{}, err error) {
	closed := make(chan struct{})
	close(closed)
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return closed, err
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, ns,
		func(lo *metav1.ListOptions) { lo.LabelSelector = labelKey + "=" + labelObject })
	inf := factory.ForResource(kind.GVR).Informer()
	// The observer reads names, labels and annotations: the store need
	// not keep managed fields.
	if err := inf.SetTransform(func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		return closed, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.observe(obj) },
		UpdateFunc: func(_, obj any) { o.observe(obj) },
		DeleteFunc: func(obj any) { o.forget(obj) },
	}); err != nil {
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
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	now := time.Now()
	key := m.GetNamespace() + "/" + m.GetName()
	annotations := m.GetAnnotations()
	gen, epoch := parseObserved(annotations[annObserved])
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, had := o.objs[key]
	if had {
		o.epochCount[prev.epoch]--
		if prev.labelled {
			o.labelled--
		}
	}
	by := annotations[annReconciler]
	labelled := o.labels != nil && o.labels.has(m)
	if labelled {
		o.labelled++
	}
	o.objs[key] = seen{gen: gen, epoch: epoch, by: by, labelled: labelled}
	o.epochCount[epoch]++
	if !had || epoch > prev.epoch {
		o.recordShare(epoch, by, now)
	}
	if ps := o.pending[key]; len(ps) > 0 {
		keep := ps[:0]
		for _, p := range ps {
			if p.gen <= gen {
				o.delays = append(o.delays, delay{sent: p.sent, d: now.Sub(p.sent)})
			} else {
				keep = append(keep, p)
			}
		}
		if len(keep) == 0 {
			delete(o.pending, key)
		} else {
			o.pending[key] = keep
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// forget drops a deleted object (shrinkObjects): it no longer counts at
// its epoch, nor as labelled. Its share of past epochs stays.
func (o *observer) forget(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, had := o.objs[key]
	if !had {
		return
	}
	o.epochCount[prev.epoch]--
	if prev.labelled {
		o.labelled--
	}
	delete(o.objs, key)
	delete(o.pending, key)
	close(o.changed)
	o.changed = make(chan struct{})
}

// holdsAny reports whether any of keys ("namespace/name") is among the
// objects seen and not deleted (lock held).
func (o *observer) holdsAny(keys []string) bool {
	for _, k := range keys {
		if _, ok := o.objs[k]; ok {
			return true
		}
	}
	return false
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

// expect registers an update of key ("namespace/name") to gen, sent at
// sent.
func (o *observer) expect(key string, gen int, sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending[key] = append(o.pending[key], expectation{gen: gen, sent: sent})
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
		return fmt.Errorf("%d updates never seen reconciled (%s): %w", o.pendingCount(), o.describePending(5), err)
	}
	return nil
}

// describePending names up to max of the objects with updates not seen
// reconciled yet: what was sent, when, and what was seen last, so that a
// failed run says which key to look for in the replicas' logs.
func (o *observer) describePending(max int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := slices.Sorted(maps.Keys(o.pending))
	var out []string
	for _, key := range keys[:min(max, len(keys))] {
		ps, last := o.pending[key], o.objs[key]
		out = append(out, fmt.Sprintf("%s: %d updates up to generation %d, the first sent %s ago; last seen at generation %d, reconciled by %q",
			key, len(ps), ps[len(ps)-1].gen, time.Since(ps[0].sent).Round(time.Millisecond), last.gen, last.by))
	}
	if len(keys) > max {
		out = append(out, fmt.Sprintf("and %d more", len(keys)-max))
	}
	return strings.Join(out, "; ")
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

// get returns what was last seen of key ("namespace/name").
func (o *observer) get(key string) seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.objs[key]
}

// waitLabelled waits until n objects carry their partition label
// (watchLabels), returning when the last was seen.
func (o *observer) waitLabelled(ctx context.Context, n int) (time.Time, error) {
	var at time.Time
	err := o.wait(ctx, func() bool {
		if o.labelled >= n {
			at = time.Now()
			return true
		}
		return false
	})
	if err != nil {
		o.mu.Lock()
		got := o.labelled
		o.mu.Unlock()
		return at, fmt.Errorf("%d of %d objects labelled with their partition: %w", got, n, err)
	}
	return at, nil
}

// labelledCount is how many objects carry their partition label now.
func (o *observer) labelledCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.labelled
}
