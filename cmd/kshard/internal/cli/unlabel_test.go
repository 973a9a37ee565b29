package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeLabelStore holds objects' labels and serves them in pages, as the
// API server does; failPatch, when set, decides a patch's error first.
type fakeLabelStore struct {
	objects   []metav1.PartialObjectMetadata // in list order
	pageSize  int
	lists     []metav1.ListOptions
	patches   []string // "namespace/name patch"
	failPatch func(name string) error
	listErr   error
}

func (f *fakeLabelStore) list(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	f.lists = append(f.lists, opts)
	if f.listErr != nil {
		return nil, f.listErr
	}
	var matching []metav1.PartialObjectMetadata
	for _, o := range f.objects {
		if _, has := o.Labels[opts.LabelSelector]; opts.LabelSelector == "" || has {
			matching = append(matching, *o.DeepCopy())
		}
	}
	start := 0
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	end := min(start+f.pageSize, len(matching))
	out := &metav1.PartialObjectMetadataList{Items: matching[start:end]}
	if end < len(matching) {
		out.Continue = strconv.Itoa(end)
	}
	return out, nil
}

func (f *fakeLabelStore) patch(_ context.Context, namespace, name string, patch []byte, dryRun bool) error {
	if f.failPatch != nil {
		if err := f.failPatch(name); err != nil {
			return err
		}
	}
	f.patches = append(f.patches, fmt.Sprintf("%s/%s %s", namespace, name, patch))
	if dryRun {
		return nil
	}
	var p struct {
		Metadata struct {
			Labels map[string]*string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	for i := range f.objects {
		if f.objects[i].Namespace == namespace && f.objects[i].Name == name {
			for k, v := range p.Metadata.Labels {
				if v != nil {
					return fmt.Errorf("the patch sets %s instead of removing it", k)
				}
				delete(f.objects[i].Labels, k)
			}
		}
	}
	return nil
}

func (f *fakeLabelStore) labelsOf(name string) map[string]string {
	for _, o := range f.objects {
		if o.Name == name {
			return o.Labels
		}
	}
	return nil
}

const (
	curKey = "ops.kshard.io/xx1-key-p271"
	oldKey = "ops.kshard.io/xx1-key-p13"
)

// fixtureStore holds, in two namespaces: objects with the ring's current
// key, with an old key, with both, with another ring's key, and bare ones.
func fixtureStore() *fakeLabelStore {
	f := &fakeLabelStore{pageSize: 2}
	add := func(ns, name string, labels map[string]string) {
		f.objects = append(f.objects, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}})
	}
	add("a", "cur", map[string]string{curKey: "5", "app": "x"})
	add("a", "old", map[string]string{oldKey: "2"})
	add("a", "both", map[string]string{curKey: "7", oldKey: "1"})
	add("b", "other-ring", map[string]string{"opsx.kshard.io/xx1-key-p271": "3", "other.kshard.io/xx1-key-p271": "3"})
	add("b", "bare", map[string]string{"app": "y"})
	return f
}

func runUnlabeller(f *fakeLabelStore, o unlabelOptions) (unlabelResult, string) {
	var progress bytes.Buffer
	if o.ring == "" {
		o.ring = "ops"
	}
	if o.dryRun == "" {
		o.dryRun = dryRunNone
	}
	u := &unlabeller{store: f, opts: o, gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, progress: &progress}
	res := unlabelResult{Resource: "configmaps", Keys: map[string]int{}}
	u.run(context.Background(), &res)
	return res, progress.String()
}

// Every key of the ring's domain goes, from every page, in one patch per
// object that carries one; other labels, other rings' keys and bare objects
// are left alone, and a second run finds nothing to do.
func TestUnlabelRemovesTheRingsKeys(t *testing.T) {
	f := fixtureStore()
	res, progress := runUnlabeller(f, unlabelOptions{})
	if res.Scanned != 5 || res.Labelled != 3 || res.Unlabelled != 3 || res.Failed != 0 || res.Error != "" {
		t.Errorf("result %+v", res)
	}
	if want := map[string]int{curKey: 2, oldKey: 2}; !maps.Equal(res.Keys, want) {
		t.Errorf("keys %v, want %v", res.Keys, want)
	}
	if len(f.lists) != 3 || f.lists[1].Continue == "" || f.lists[0].Limit != unlabelPageSize {
		t.Errorf("lists %+v: want three pages of the fake's 2, each asking for %d", f.lists, unlabelPageSize)
	}
	if len(f.patches) != 3 || f.patches[2] != `a/both {"metadata":{"labels":{"ops.kshard.io/xx1-key-p13":null,"ops.kshard.io/xx1-key-p271":null}}}` {
		t.Errorf("patches %q", f.patches)
	}
	for name, want := range map[string]map[string]string{
		"cur": {"app": "x"}, "old": {}, "both": {}, "bare": {"app": "y"},
		"other-ring": {"opsx.kshard.io/xx1-key-p271": "3", "other.kshard.io/xx1-key-p271": "3"},
	} {
		if got := f.labelsOf(name); !maps.Equal(got, want) {
			t.Errorf("%s: labels %v, want %v", name, got, want)
		}
	}
	if !strings.Contains(progress, "configmaps in every namespace: 5 scanned, 3 unlabelled") {
		t.Errorf("progress %q", progress)
	}
	f.patches = nil
	if res, _ := runUnlabeller(f, unlabelOptions{}); res.Labelled != 0 || len(f.patches) != 0 {
		t.Errorf("a second run found %d labelled objects and sent %d patches, want none", res.Labelled, len(f.patches))
	}
}

// --key removes that key only, listing only the objects that carry it.
func TestUnlabelOneKey(t *testing.T) {
	f := fixtureStore()
	res, _ := runUnlabeller(f, unlabelOptions{key: oldKey})
	if res.Scanned != 2 || res.Labelled != 2 || res.Unlabelled != 2 || f.lists[0].LabelSelector != oldKey {
		t.Errorf("result %+v, first list %+v", res, f.lists[0])
	}
	if got := f.labelsOf("both"); !maps.Equal(got, map[string]string{curKey: "7"}) {
		t.Errorf("both: labels %v, want the current key kept", got)
	}
}

// A client dry run sends no patch and counts what it would do; a server
// dry run sends them marked so, and the objects keep their labels.
func TestUnlabelDryRun(t *testing.T) {
	f := fixtureStore()
	res, progress := runUnlabeller(f, unlabelOptions{dryRun: dryRunClient})
	if res.Labelled != 3 || res.Unlabelled != 0 || len(f.patches) != 0 || !strings.Contains(progress, "3 would be unlabelled") {
		t.Errorf("client dry run: %+v, %d patches, progress %q", res, len(f.patches), progress)
	}
	res, _ = runUnlabeller(f, unlabelOptions{dryRun: dryRunServer})
	if res.Unlabelled != 3 || len(f.patches) != 3 || f.labelsOf("cur")[curKey] != "5" {
		t.Errorf("server dry run: %+v, %d patches, cur's labels %v", res, len(f.patches), f.labelsOf("cur"))
	}
}

// A forbidden patch stops the resource at once, naming the permission; an
// object deleted meanwhile is counted gone, not failed; other failures are
// counted and the resource goes on, until too many come in a row.
func TestUnlabelErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	f := fixtureStore()
	f.failPatch = func(string) error { return apierrors.NewForbidden(gr, "x", errors.New("RBAC")) }
	res, _ := runUnlabeller(f, unlabelOptions{})
	if res.Failed != 1 || res.Unlabelled != 0 || len(f.lists) != 1 ||
		!strings.Contains(res.Error, "may not patch configmaps") || !strings.Contains(res.Error, "kubectl auth can-i patch configmaps") {
		t.Errorf("forbidden patch: %+v after %d lists", res, len(f.lists))
	}

	f = fixtureStore()
	f.failPatch = func(name string) error {
		switch name {
		case "cur":
			return apierrors.NewNotFound(gr, name)
		case "old":
			return apierrors.NewInternalError(errors.New("etcd hiccup"))
		}
		return nil
	}
	res, _ = runUnlabeller(f, unlabelOptions{})
	if res.Gone != 1 || res.Failed != 1 || res.Unlabelled != 1 || !strings.Contains(res.Error, "etcd hiccup") || res.ok() {
		t.Errorf("mixed failures: %+v", res)
	}

	f = &fakeLabelStore{pageSize: 100}
	for i := range 20 {
		f.objects = append(f.objects, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprint(i), Labels: map[string]string{curKey: "1"}}})
	}
	f.failPatch = func(string) error { return apierrors.NewServiceUnavailable("down") }
	res, _ = runUnlabeller(f, unlabelOptions{})
	if res.Failed != unlabelFailureLimit || !strings.Contains(res.Error, "in a row failed") {
		t.Errorf("an API server refusing every patch: %+v, want a stop after %d", res, unlabelFailureLimit)
	}

	f = fixtureStore()
	f.listErr = apierrors.NewForbidden(gr, "", errors.New("RBAC"))
	res, _ = runUnlabeller(f, unlabelOptions{})
	if !strings.Contains(res.Error, "may not list configmaps cluster-wide") || !strings.Contains(res.Error, "-A") {
		t.Errorf("forbidden list: %+v", res)
	}
}

func TestUnlabelUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"unlabel", "widgets", "-A"}, "unlabel needs --ring"},
		{[]string{"unlabel", "--ring", "ops", "-A"}, "give the resources to unlabel"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--object-namespace", "a"}, "give -A or --object-namespace, not both"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "-n", "a", "--lease-namespace", "b"}, "-n a names neither the objects (-A takes every namespace) nor the Leases"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "--object-namespace", "a", "-n", "b", "--lease-namespace", "c"}, "-n b names neither the objects (--object-namespace does)"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-n", "Bad_NS"}, `-n/--namespace "Bad_NS" is not a namespace name`},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-o", "xml"}, `-o "xml"`},
		{[]string{"unlabel", "--ring", "ops", "widgets", "--object-namespace", "a,a"}, "given twice"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "--object-namespace", "Not_A_NS"}, "not a namespace name"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--key", "other.kshard.io/xx1-key-p271"}, "not one of ring ops's partition labels"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--key", "ops.kshard.io/bad key"}, "not a label key"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--qps", "0"}, "--qps 0"},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--dry-run=maybe"}, `--dry-run="maybe"`},
		{[]string{"unlabel", "--ring", "ops", "widgets", "-A", "--dry-run", "server"}, "write --dry-run=server"},
		{[]string{"unlabel", "--ring", "ops", "widgets,,configmaps", "-A"}, "empty name"},
		{[]string{"unlabel", "--ring", "Ops", "widgets", "-A"}, "not a valid ring name"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The table names each resource and namespace, the keys found, and the
// errors; a dry run says nothing was changed.
func TestUnlabelTable(t *testing.T) {
	var b bytes.Buffer
	err := writeUnlabelResults(&b, "table", unlabelJSON{Ring: "ops", DryRun: dryRunClient, Results: []unlabelResult{
		{Resource: "configmaps", Scanned: 5, Labelled: 3, Keys: map[string]int{curKey: 2, oldKey: 2}},
		{Resource: "widgets.demo.kshard.io", Namespace: "a", Error: "forbidden: this user may not list widgets"},
	}})
	out := b.String()
	if err != nil || !strings.Contains(out, "dry run (client): nothing was sent") ||
		!strings.Contains(out, "configmaps              (all)") || !strings.Contains(out, oldKey+" (2), "+curKey+" (2)") ||
		!strings.Contains(out, "error: widgets.demo.kshard.io: forbidden") {
		t.Errorf("table:\n%s", out)
	}
}
