package cachekit

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// pagingServer serves a LIST of n ConfigMaps the way the API server does
// with a limit: limit items per response and a continue token while more
// remain. It records every request's options.
type pagingServer struct {
	n        int
	requests []metav1.ListOptions
}

func (p *pagingServer) listWatch() *toolscache.ListWatch {
	return &toolscache.ListWatch{ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
		p.requests = append(p.requests, o)
		from := 0
		if o.Continue != "" {
			var err error
			if from, err = strconv.Atoi(o.Continue); err != nil {
				return nil, fmt.Errorf("bad continue %q", o.Continue)
			}
		}
		to := p.n
		if o.Limit > 0 {
			to = min(from+int(o.Limit), p.n)
		}
		list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}}
		for i := from; i < to; i++ {
			list.Items = append(list.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%05d", i)}})
		}
		if to < p.n {
			list.Continue = strconv.Itoa(to)
			remaining := int64(p.n - to)
			list.RemainingItemCount = &remaining
		}
		return list, nil
	}}
}

func TestListInPagesReadsEveryPageAsAConsistentRead(t *testing.T) {
	server := &pagingServer{n: 2*ListPageSize + 7}
	even := func(o runtime.Object) bool {
		n, _ := strconv.Atoi(o.(*corev1.ConfigMap).Name[3:])
		return n%2 == 0
	}
	// The reflector's first LIST asks for ResourceVersion "0", served
	// whole by the watch cache whatever the limit.
	asked := metav1.ListOptions{ResourceVersion: "0", LabelSelector: "a=b"}
	got, err := ListInPages(context.Background(), server.listWatch(), asked, even)
	if err != nil {
		t.Fatal(err)
	}
	if len(server.requests) != 3 {
		t.Fatalf("%d requests, want 3 pages of %d", len(server.requests), ListPageSize)
	}
	for i, o := range server.requests {
		if o.ResourceVersion != "" || o.Limit != ListPageSize || o.LabelSelector != "a=b" {
			t.Errorf("request %d: resourceVersion %q limit %d selector %q, want a consistent read of %d items with the caller's selector", i, o.ResourceVersion, o.Limit, o.LabelSelector, ListPageSize)
		}
	}
	if server.requests[0].Continue != "" || server.requests[2].Continue != strconv.Itoa(2*ListPageSize) {
		t.Errorf("continue tokens sent: %q, %q, %q", server.requests[0].Continue, server.requests[1].Continue, server.requests[2].Continue)
	}
	list := got.(*corev1.ConfigMapList)
	if list.Continue != "" || list.RemainingItemCount != nil || list.ResourceVersion != "42" {
		t.Errorf("merged list: continue %q remaining %v resourceVersion %q, want no continuation and the snapshot's resourceVersion", list.Continue, list.RemainingItemCount, list.ResourceVersion)
	}
	if want := (server.n + 1) / 2; len(list.Items) != want {
		t.Fatalf("%d items, want the %d kept", len(list.Items), want)
	}
	for i, cm := range list.Items {
		if want := fmt.Sprintf("cm-%05d", 2*i); cm.Name != want {
			t.Fatalf("item %d is %s, want %s (in order)", i, cm.Name, want)
		}
	}

	// Without a filter every item is kept.
	server = &pagingServer{n: ListPageSize + 1}
	got, err = ListInPages(context.Background(), server.listWatch(), metav1.ListOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.(*corev1.ConfigMapList).Items); n != server.n || len(server.requests) != 2 {
		t.Errorf("unfiltered: %d items in %d requests; want %d in 2", n, len(server.requests), server.n)
	}
}

func TestListInPagesReturnsAPageError(t *testing.T) {
	server := &pagingServer{n: 3 * ListPageSize}
	lw := server.listWatch()
	inner := lw.ListWithContextFunc
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if o.Continue != "" {
			return nil, fmt.Errorf("the continue token has expired")
		}
		return inner(ctx, o)
	}
	if _, err := ListInPages(context.Background(), lw, metav1.ListOptions{}, nil); err == nil {
		t.Fatal("a failing second page gave no error: the reflector would store a partial list")
	}
}
