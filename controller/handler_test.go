package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/testwait"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// listQueue records added requests.
type listQueue []Request

func (q *listQueue) Add(r Request) { *q = append(*q, r) }

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

func ownedSecret(refs ...metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "s", OwnerReferences: refs}}
}

func ref(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, Controller: &controller}
}

func TestEnqueueRequestForObject(t *testing.T) {
	var q listQueue
	h := EnqueueRequestForObject{}
	cm := configMap("a", "one")
	h.Create(context.Background(), CreateEvent{Object: cm}, &q)
	h.Update(context.Background(), UpdateEvent{ObjectOld: configMap("a", "old"), ObjectNew: cm}, &q)
	h.Delete(context.Background(), DeleteEvent{Object: cm}, &q)
	h.Generic(context.Background(), GenericEvent{Object: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}}, &q)
	h.Create(context.Background(), CreateEvent{}, &q) // nil object: ignored
	want := listQueue{req("a", "one"), req("a", "one"), req("a", "one"), req("", "cluster")}
	if len(q) != len(want) {
		t.Fatalf("got %v, want %v", q, want)
	}
	for i := range want {
		if q[i] != want[i] {
			t.Fatalf("got %v, want %v", q, want)
		}
	}
}

func TestEnqueueRequestForOwner(t *testing.T) {
	scheme := clientgoscheme.Scheme
	cmOwner, err := EnqueueRequestForOwner(scheme, testMapper(), &corev1.ConfigMap{}, OnlyControllerOwner())
	if err != nil {
		t.Fatal(err)
	}
	anyOwner, _ := EnqueueRequestForOwner(scheme, testMapper(), &corev1.ConfigMap{})
	clusterOwner, err := EnqueueRequestForOwner(scheme, testMapper(), &rbacv1.ClusterRole{})
	if err != nil {
		t.Fatal(err)
	}
	metaOwner, err := EnqueueRequestForOwner(nil, testMapper(), &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}})
	if err != nil {
		t.Fatalf("metadata-only owner type: %v", err)
	}
	cases := []struct {
		name string
		h    EventHandler
		obj  Object
		want []Request
	}{
		{"controller owner", cmOwner, ownedSecret(ref("v1", "ConfigMap", "cm", true)), []Request{req("team", "cm")}},
		{"non-controller owner skipped", cmOwner, ownedSecret(ref("v1", "ConfigMap", "cm", false)), nil},
		{"non-controller owner kept without the option", anyOwner, ownedSecret(ref("v1", "ConfigMap", "cm", false)), []Request{req("team", "cm")}},
		{"other kind", cmOwner, ownedSecret(ref("v1", "Secret", "x", true)), nil},
		{"other group", cmOwner, ownedSecret(ref("example.com/v1", "ConfigMap", "cm", true)), nil},
		{"cluster-scoped owner", clusterOwner, ownedSecret(ref("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", false)), []Request{req("", "admin")}},
		{"version may differ", clusterOwner, ownedSecret(ref("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "admin", false)), []Request{req("", "admin")}},
		{"metadata-only owner type", metaOwner, ownedSecret(ref("v1", "ConfigMap", "cm", true)), []Request{req("team", "cm")}},
		{"namespaced owner of a cluster-scoped object names nothing", anyOwner,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", OwnerReferences: []metav1.OwnerReference{ref("v1", "ConfigMap", "cm", true)}}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q listQueue
			tc.h.Create(context.Background(), CreateEvent{Object: tc.obj}, &q)
			if len(q) != len(tc.want) {
				t.Fatalf("got %v, want %v", q, tc.want)
			}
			for i := range q {
				if q[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", q, tc.want)
				}
			}
		})
	}

	// An update enqueues the owners of both versions, each once.
	var q listQueue
	oldS := ownedSecret(ref("v1", "ConfigMap", "a", true))
	newS := ownedSecret(ref("v1", "ConfigMap", "a", true), ref("v1", "ConfigMap", "b", false))
	anyOwner.Update(context.Background(), UpdateEvent{ObjectOld: oldS, ObjectNew: newS}, &q)
	if len(q) != 2 || q[0] != req("team", "a") || q[1] != req("team", "b") {
		t.Fatalf("update enqueued %v, want team/a and team/b once each", q)
	}
}

func TestEnqueueRequestForOwnerErrors(t *testing.T) {
	type unknown struct{ corev1.ConfigMap }
	cases := map[string]struct {
		owner  Object
		mapper meta.RESTMapper
		want   string
	}{
		"unknown type":    {&unknown{}, testMapper(), "not registered in the scheme"},
		"not served":      {&corev1.Pod{}, testMapper(), "does not serve"},
		"nil mapper":      {&corev1.ConfigMap{}, nil, "RESTMapper is nil"},
		"nil owner":       {nil, testMapper(), "object is nil"},
		"meta without TM": {&metav1.PartialObjectMetadata{}, testMapper(), "no TypeMeta"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := EnqueueRequestForOwner(clientgoscheme.Scheme, tc.mapper, tc.owner)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEnqueueRequestsFromMapFunc(t *testing.T) {
	h := EnqueueRequestsFromMapFunc(func(_ context.Context, o Object) []Request {
		return []Request{req("x", o.GetName()), req("x", "shared")}
	})
	var q listQueue
	h.Update(context.Background(), UpdateEvent{ObjectOld: configMap("a", "old"), ObjectNew: configMap("a", "new")}, &q)
	want := listQueue{req("x", "new"), req("x", "shared"), req("x", "old")}
	if len(q) != len(want) || q[0] != want[0] || q[1] != want[1] || q[2] != want[2] {
		t.Fatalf("got %v, want %v (both objects mapped, duplicates once)", q, want)
	}
	q = nil
	EnqueueRequestsFromMapFunc(nil).Create(context.Background(), CreateEvent{Object: configMap("a", "b")}, &q)
	if len(q) != 0 {
		t.Fatal("a nil MapFunc must enqueue nothing")
	}
}

func TestPredicates(t *testing.T) {
	withMeta := func(gen int64, rv string, labels, ann map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: gen, ResourceVersion: rv, Labels: labels, Annotations: ann}}
	}
	base := withMeta(1, "10", map[string]string{"a": "1"}, map[string]string{"n": "1"})
	cases := []struct {
		name string
		p    Predicate
		new  *corev1.ConfigMap
		want bool
	}{
		{"generation same", GenerationChangedPredicate{}, withMeta(1, "11", nil, nil), false},
		{"generation changed", GenerationChangedPredicate{}, withMeta(2, "11", nil, nil), true},
		{"rv same", ResourceVersionChangedPredicate{}, withMeta(2, "10", nil, nil), false},
		{"rv changed", ResourceVersionChangedPredicate{}, withMeta(1, "11", nil, nil), true},
		{"labels same", LabelChangedPredicate{}, withMeta(2, "11", map[string]string{"a": "1"}, nil), false},
		{"labels changed", LabelChangedPredicate{}, withMeta(1, "10", map[string]string{"a": "2"}, nil), true},
		{"annotations same", AnnotationChangedPredicate{}, withMeta(2, "11", nil, map[string]string{"n": "1"}), false},
		{"annotations changed", AnnotationChangedPredicate{}, withMeta(1, "10", nil, map[string]string{"n": "2"}), true},
		{"and", And(GenerationChangedPredicate{}, LabelChangedPredicate{}), withMeta(2, "11", map[string]string{"a": "1"}, nil), false},
		{"or", Or(GenerationChangedPredicate{}, LabelChangedPredicate{}), withMeta(2, "11", map[string]string{"a": "1"}, nil), true},
		{"not", Not(GenerationChangedPredicate{}), withMeta(2, "11", nil, nil), false},
		{"empty or", Or(), base, false},
		{"empty and", And(nil), base, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Update(UpdateEvent{ObjectOld: base, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	for _, p := range []Predicate{GenerationChangedPredicate{}, ResourceVersionChangedPredicate{}, LabelChangedPredicate{}, AnnotationChangedPredicate{}} {
		if !p.Create(CreateEvent{Object: base}) || !p.Delete(DeleteEvent{Object: base}) || !p.Generic(GenericEvent{Object: base}) {
			t.Fatalf("%T must admit non-update events", p)
		}
	}
	named := NewPredicateFuncs(func(o Object) bool { return o.GetName() == "keep" })
	if !named.Create(CreateEvent{Object: configMap("a", "keep")}) || named.Delete(DeleteEvent{Object: configMap("a", "drop")}) {
		t.Fatal("NewPredicateFuncs must apply the filter to the event's object")
	}
	if named.Update(UpdateEvent{ObjectOld: configMap("a", "keep"), ObjectNew: configMap("a", "drop")}) {
		t.Fatal("NewPredicateFuncs must filter updates on the new object")
	}
	if Not(nil).Create(CreateEvent{Object: base}) {
		t.Fatal("Not(nil) must admit nothing")
	}
}

func TestEventAdapterHandlesTombstonesAndPredicates(t *testing.T) {
	var q listQueue
	var sawUnknown bool
	h := &recordingHandler{onDelete: func(e DeleteEvent) { sawUnknown = e.DeleteStateUnknown }}
	a := &eventAdapter{ctx: context.Background(), handler: h, q: &q,
		preds: []Predicate{NewPredicateFuncs(func(o Object) bool { return o.GetName() != "filtered" })}}
	a.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: configMap("ns", "gone")})
	if !sawUnknown || len(h.deletes) != 1 || h.deletes[0] != "gone" {
		t.Fatalf("tombstone not unwrapped: deletes=%v unknown=%v", h.deletes, sawUnknown)
	}
	a.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/junk", Obj: "not an object"})
	a.OnAdd("not an object", false)
	a.OnAdd(configMap("ns", "filtered"), false)
	a.OnUpdate(configMap("ns", "x"), configMap("ns", "filtered"))
	if len(h.deletes) != 1 || h.creates != 0 || h.updates != 0 {
		t.Fatalf("junk or filtered events reached the handler: %+v", h)
	}
	a.OnUpdate(configMap("ns", "x"), configMap("ns", "y"))
	if h.updates != 1 {
		t.Fatal("an admitted update did not reach the handler")
	}
}

type recordingHandler struct {
	creates, updates int
	deletes          []string
	onDelete         func(DeleteEvent)
}

func (r *recordingHandler) Create(context.Context, CreateEvent, Queue) { r.creates++ }
func (r *recordingHandler) Update(context.Context, UpdateEvent, Queue) { r.updates++ }
func (r *recordingHandler) Delete(_ context.Context, e DeleteEvent, _ Queue) {
	r.deletes = append(r.deletes, e.Object.GetName())
	r.onDelete(e)
}
func (r *recordingHandler) Generic(context.Context, GenericEvent, Queue) {}

func TestChannelSource(t *testing.T) {
	ch := make(chan GenericEvent)
	calls := newCounter()
	h := startController(t, ReconcilerFunc(func(_ context.Context, r Request) (Result, error) {
		calls.inc(r)
		return Result{}, nil
	}), Options{}, Channel(ch, EnqueueRequestForObject{}, NewPredicateFuncs(func(o Object) bool { return o.GetName() != "skip" })))
	ch <- GenericEvent{Object: configMap("ext", "skip")}
	ch <- GenericEvent{}
	ch <- GenericEvent{Object: configMap("ext", "hook")}
	testwait.True(t, 10*time.Second, "external event reconciled", func() bool { return calls.get(req("ext", "hook")) == 1 })
	if calls.get(req("ext", "skip")) != 0 {
		t.Fatal("a filtered generic event was reconciled")
	}
	_ = h
}
