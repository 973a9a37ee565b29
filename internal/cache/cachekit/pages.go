package cachekit

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// ListPageSize is the page size of the cache's paged LISTs (label
// segments and unlabelled views).
const ListPageSize = 500

// ListInPages lists through inner a page at a time and returns one list of
// the items keep accepts (all of them when keep is nil), with no continue
// token.
//
// Why pages: the reflector's first LIST asks for ResourceVersion "0", which
// the watch cache serves whole, ignoring any limit; a replica starting on
// tens of thousands of objects then holds the whole response body and its
// decoding beside the store it fills, and that transient sets its peak RSS.
// Here each request is a consistent read (ResourceVersion ""), which the
// watch cache serves page by page from one snapshot (the continue token
// carries its resourceVersion), so the list is as fresh as any the
// reflector could ask for. A page whose items keep partly rejected is
// copied out, kept items only, so that the rejected ones are not held
// until the last page arrives.
func ListInPages(ctx context.Context, inner toolscache.ListerWatcherWithContext, o metav1.ListOptions, keep func(runtime.Object) bool) (runtime.Object, error) {
	var first runtime.Object
	var kept []runtime.Object
	listed, pages := 0, 0
	err := EachPage(ctx, inner.ListWithContext, o, func(page runtime.Object, items []runtime.Object) error {
		listed += len(items)
		pages++
		n := len(kept)
		for _, it := range items {
			if keep == nil || keep(it) {
				kept = append(kept, it)
			}
		}
		if len(kept)-n < len(items) {
			// The kept items point into the page's item array; copies let
			// the page, rejected items included, be collected.
			for i := n; i < len(kept); i++ {
				kept[i] = kept[i].DeepCopyObject()
			}
		}
		if first == nil {
			first = page
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// One page kept whole is already the list.
	if pages > 1 || len(kept) < listed {
		if err := meta.SetList(first, kept); err != nil {
			return nil, err
		}
	}
	if lm, err := meta.ListAccessor(first); err == nil {
		lm.SetContinue("")
		lm.SetRemainingItemCount(nil)
	}
	return first, nil
}

// ListFunc is one LIST request of a resource.
type ListFunc func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)

// EachPage lists through list a page of ListPageSize at a time, as a
// consistent read (see ListInPages), and hands each response and its items
// to page before it asks for the next; an error of page ends the list.
func EachPage(ctx context.Context, list ListFunc, o metav1.ListOptions, page func(page runtime.Object, items []runtime.Object) error) error {
	o.ResourceVersion, o.ResourceVersionMatch, o.Limit, o.Continue = "", "", ListPageSize, ""
	for {
		resp, err := list(ctx, o)
		if err != nil {
			return err
		}
		items, err := meta.ExtractList(resp)
		if err != nil {
			return err
		}
		lm, err := meta.ListAccessor(resp)
		if err != nil {
			return err
		}
		next := lm.GetContinue()
		if err := page(resp, items); err != nil {
			return err
		}
		if o.Continue = next; next == "" {
			return nil
		}
	}
}
