package cache

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

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
	l, err := NewLabelled(LabelledOptions{
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
