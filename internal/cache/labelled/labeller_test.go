package labelled

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kshard/kshard/internal/cache/cachekit"
	"github.com/kshard/kshard/shard"
)

type nopClient struct{}

func (nopClient) Get(context.Context, string, string) (runtime.Object, error) { return nil, nil }
func (nopClient) PatchLabels(context.Context, string, string, map[string]string) (string, error) {
	return "", nil
}

func newTestLabelled(t *testing.T, route shard.Route) *Labelled {
	t.Helper()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	l, err := New(Options{
		LabelKey: "r.kshard.io/xx1-key-p8", Partitioner: shard.NewPartitioner(8), Route: route,
		ListWatch: lw, Example: &corev1.ConfigMap{}, Client: nopClient{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func cm(ns, name string, labels map[string]string, owner string, rv string) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, ResourceVersion: rv}}
	if owner != "" {
		yes := true
		c.OwnerReferences = []metav1.OwnerReference{{Kind: "Widget", Name: owner, Controller: &yes}}
	}
	return c
}

// The labeller writes a label only where it is missing or wrong, and only
// on a replica where the partition it must name, or the one it names, is
// active: one writer at a time.
func TestLabellerWants(t *testing.T) {
	p := shard.NewPartitioner(8)
	own := p.Partition("ns/a")
	other := (own + 1) % 8
	ownerP := p.Partition("ns/boss")
	key := "r.kshard.io/xx1-key-p8"
	for _, tc := range []struct {
		name   string
		route  shard.Route
		active []int
		obj    *corev1.ConfigMap
		want   string // the value to write; "" for none
	}{
		{"unlabelled, active here", shard.RouteSelf, []int{own}, cm("ns", "a", nil, "", "1"), shard.PartitionLabelValue(own)},
		{"unlabelled, not active here", shard.RouteSelf, []int{other}, cm("ns", "a", nil, "", "1"), ""},
		{"labelled right", shard.RouteSelf, []int{own}, cm("ns", "a", map[string]string{key: shard.PartitionLabelValue(own)}, "", "1"), ""},
		{"stray seen by the named partition's owner", shard.RouteSelf, []int{other}, cm("ns", "a", map[string]string{key: shard.PartitionLabelValue(other)}, "", "1"), shard.PartitionLabelValue(own)},
		{"garbage value", shard.RouteSelf, []int{own}, cm("ns", "a", map[string]string{key: "x"}, "", "1"), shard.PartitionLabelValue(own)},
		{"owned: the owner's partition", shard.RouteOwner, []int{ownerP}, cm("ns", "a", nil, "boss", "1"), shard.PartitionLabelValue(ownerP)},
		{"owner route without an owner: its own", shard.RouteOwner, []int{own}, cm("ns", "a", nil, "", "1"), shard.PartitionLabelValue(own)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLabelled(t, tc.route)
			l.active = shard.NewPartitionSet(8, tc.active...)
			_, value, ok := l.labeller.wants(tc.obj)
			if got := map[bool]string{true: value}[ok]; got != tc.want {
				t.Errorf("wants = %q (ok %v), want %q", value, ok, tc.want)
			}
		})
	}
}

// A label just written is not written again while events still show the
// object's older versions, and is once a newer version shows it wrong.
func TestLabellerSkipsLabelsOnTheirWay(t *testing.T) {
	l := newTestLabelled(t, shard.RouteSelf)
	p := shard.NewPartitioner(8).Partition("ns/a")
	l.active = shard.NewPartitionSet(8, p)
	l.labeller.wrote("ns/a", "10")
	if _, _, ok := l.labeller.wants(cm("ns", "a", nil, "", "9")); ok {
		t.Error("an event older than the patch asked for another write")
	}
	if _, _, ok := l.labeller.wants(cm("ns", "a", nil, "", "11")); !ok {
		t.Error("a newer version without the label (stripped again) was not labelled")
	}
}

// An object's older state arriving in a view does not end a newer pending
// state: that state came from a later change that takes the object out of
// the view again (a label stripped, then another partition's written), and
// dropping it from the pending set would leave the object in no view once
// the view applies that change, though it exists.
func TestArrivalOfAnOlderStateKeepsANewerPendingOne(t *testing.T) {
	l := newTestLabelled(t, shard.RouteSelf)
	p := shard.NewPartitioner(8).Partition("ns/a")
	l.held = shard.NewPartitionSet(8, p)
	l.mu.Lock()
	l.markPending("ns/a", "", cm("ns", "a", nil, "", "3"), time.Now())
	l.mu.Unlock()

	l.arrived(nil, cm("ns", "a", nil, "", "2"))
	if _, ok := l.pending["ns/a"]; !ok {
		t.Fatal("the arrival of version 2 ended the pending version 3")
	}
	if obj, ok, err := l.GetByKey("ns/a"); err != nil || !ok || cachekit.ResourceVersion(obj) != 3 {
		t.Fatalf("GetByKey = %v, %v, %v; want version 3, found", obj, ok, err)
	}

	label := map[string]string{l.opts.LabelKey: shard.PartitionLabelValue(p)}
	segmentWith(l, l.held, cm("ns", "a", label, "", "3"))
	l.arrived(nil, cm("ns", "a", label, "", "3"))
	if _, ok := l.pending["ns/a"]; ok {
		t.Fatal("the arrival of version 3 left the pending version 3 (a pending state loses ties)")
	}
}

// segmentWith adds to l's label segments a synced one of parts that has
// listed objs, as if its informer had, and returns its store.
func segmentWith(l *Labelled, parts shard.PartitionSet, objs ...*corev1.ConfigMap) toolscache.Store {
	ros := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ros[i] = o
	}
	return l.segs.AddSyncedSegmentForTest(&corev1.ConfigMap{}, parts, ros...)
}

// An object labelled with a partition this replica releases while its key
// maps to one it keeps (a third party's edit) stays served after the
// release hides its segment, however late that segment's arrival of it is
// handled: before, the late arrival ended the pending state the release
// had made, and reads returned NotFound for an object that exists.
func TestArrivalIntoAReleasedSegmentStaysServed(t *testing.T) {
	l := newTestLabelled(t, shard.RouteSelf)
	own := shard.NewPartitioner(8).Partition("ns/a")
	other := (own + 1) % 8
	both := shard.NewPartitionSet(8, own, other)
	l.held = both
	stray := cm("ns", "a", map[string]string{l.opts.LabelKey: shard.PartitionLabelValue(other)}, "", "5")
	segmentWith(l, shard.NewPartitionSet(8, other), stray)
	if _, ok, _ := l.GetByKey("ns/a"); !ok {
		t.Fatal("the stray is not served before the release")
	}

	l.Hold(shard.NewPartitionSet(8, own))
	if _, ok, _ := l.GetByKey("ns/a"); !ok {
		t.Fatal("the release of the stray's labelled partition hid it")
	}
	// The segment's handler of the ADDED that brought the stray in runs
	// only now.
	l.arrived(nil, stray)
	if obj, ok, err := l.GetByKey("ns/a"); err != nil || !ok || cachekit.ResourceVersion(obj) != 5 {
		t.Fatalf("GetByKey after the late arrival = %v, %v, %v; want version 5, found", obj, ok, err)
	}
	if _, ok := l.pending["ns/a"]; !ok {
		t.Fatal("the stray is not pending: nothing would confirm or relabel it")
	}
}

// A label edited from one partition of a segment to another is sent as
// MODIFIED, not as a DELETED and an ADDED: the segment's store keeps the
// object, under a partition that may no longer be held (a segment lists
// its released partitions until it stops). Before, such an object vanished
// from reads with no deletion; now the segment tells the Labelled first,
// which serves it as pending until a view shows it again.
func TestLabelMovedWithinASegmentStaysServed(t *testing.T) {
	l := newTestLabelled(t, shard.RouteSelf)
	own := shard.NewPartitioner(8).Partition("ns/a")
	kept, released := (own+1)%8, (own+2)%8
	label := func(p int) map[string]string { return map[string]string{l.opts.LabelKey: shard.PartitionLabelValue(p)} }
	l.held = shard.NewPartitionSet(8, own, kept)
	first := cm("ns", "a", label(own), "", "5")
	store := segmentWith(l, shard.NewPartitionSet(8, own, kept, released), first)
	l.segs.SetHeldForTest(l.held) // released: still listed by the segment, hidden

	for _, tc := range []struct {
		obj  *corev1.ConfigMap
		want bool
	}{
		{cm("ns", "a", label(own), "", "6"), false},
		{cm("ns", "a", label(kept), "", "6"), true},
		{cm("ns", "a", label(released), "", "6"), true},
	} {
		if got := l.segs.MovesWithinForTest(tc.obj); got != tc.want {
			t.Errorf("movesWithin(label %s) = %v, want %v", tc.obj.Labels[l.opts.LabelKey], got, tc.want)
		}
	}

	// The watch filter tells the Labelled, then the store takes the state.
	moved := cm("ns", "a", label(released), "", "6")
	l.leaving(nil, moved)
	_ = store.Update(moved)
	if obj, ok, err := l.GetByKey("ns/a"); err != nil || !ok || cachekit.ResourceVersion(obj) != 6 {
		t.Fatalf("GetByKey after the label moved to a released partition = %v, %v, %v; want version 6, found", obj, ok, err)
	}
	// Relabelled to its own partition: the segment serves it again.
	back := cm("ns", "a", label(own), "", "7")
	_ = store.Update(back)
	l.updated(nil, back)
	if _, pending := l.pending["ns/a"]; pending {
		t.Error("still pending once its segment serves it again")
	}
	if obj, ok, err := l.GetByKey("ns/a"); err != nil || !ok || cachekit.ResourceVersion(obj) != 7 {
		t.Fatalf("GetByKey after the relabel = %v, %v, %v; want version 7, found", obj, ok, err)
	}
}
