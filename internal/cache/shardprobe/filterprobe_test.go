package shardprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/shard"
)

var probedGVR = schema.GroupVersionResource{Group: "example.kshard.io", Version: "v1", Resource: "widgets"}

// probedServer is an API server of one resource for Filtering:
// it answers LISTs (limit, namespace, field selector metadata.name, shard
// selectors of one partition) from objects, as its flags say a server
// does, and lets a test change the objects after each answer (after).
type probedServer struct {
	t       *testing.T
	rp      shard.RangePartitioner
	filters bool // applies the shard selector
	echoes  bool // echoes ShardInfo when it applies one
	// echo, when set, is what it echoes for the selector sent.
	echo func(sent string) string
	// ignoresNames: answers as if no field selector were sent (a server
	// that does not support it); blindToNames: answers nothing to any
	// LIST with one (a broken aggregated API).
	ignoresNames, blindToNames bool
	// after runs after each answer, with the request and what it
	// returned, under the server's lock: it may change objects.
	after func(s *probedServer, q url.Values, returned []probeObject)

	mu       sync.Mutex
	objects  []probeObject // in the server's order (namespace, then name)
	requests []url.Values
}

func newProbedServer(t *testing.T, scheme shard.Scheme, partitions int, objects []probeObject) *probedServer {
	t.Helper()
	rp, err := shard.NewRangePartitioner(scheme, partitions)
	if err != nil {
		t.Fatal(err)
	}
	s := &probedServer{t: t, rp: rp, objects: objects}
	s.sort()
	return s
}

func (s *probedServer) sort() {
	slices.SortFunc(s.objects, func(a, b probeObject) int { return strings.Compare(a.String(), b.String()) })
}

// selected returns the partition a single-partition selector selects.
func (s *probedServer) selected(sel string) (int, bool) {
	for p := range s.rp.Count() {
		if want, _ := s.rp.Selector(shard.NewPartitionSet(s.rp.Count(), p)); want == sel {
			return p, true
		}
	}
	return -1, false
}

func (s *probedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	s.requests = append(s.requests, q)
	if q.Get("limit") != "1" {
		s.t.Errorf("probe LIST without limit=1: %s", r.URL)
	}
	namespace := ""
	if rest, ok := strings.CutPrefix(r.URL.Path, "/apis/example.kshard.io/v1/namespaces/"); ok {
		namespace, _, _ = strings.Cut(rest, "/")
	}
	name := ""
	if fs := q.Get("fieldSelector"); fs != "" {
		sel, err := fields.ParseSelector(fs)
		if err != nil {
			s.t.Errorf("unparsable field selector %q", fs)
		}
		name, _ = sel.RequiresExactMatch("metadata.name")
	}
	part, sharded := -1, q.Get("shardSelector") != ""
	if sharded {
		var ok bool
		if part, ok = s.selected(q.Get("shardSelector")); !ok {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 500, Message: "invalid shard selector"})
			return
		}
	}
	var returned []probeObject
	for _, o := range s.objects {
		p, _ := s.rp.PartitionOfObject(o.namespace, o.uid)
		switch {
		case namespace != "" && o.namespace != namespace:
		case name != "" && s.blindToNames:
		case name != "" && !s.ignoresNames && o.name != name:
		case sharded && s.filters && p != part:
		default:
			returned = append(returned, o)
		}
		if len(returned) == 1 {
			break
		}
	}
	items := []any{}
	for _, o := range returned {
		items = append(items, map[string]any{"apiVersion": "example.kshard.io/v1", "kind": "Widget",
			"metadata": map[string]any{"namespace": o.namespace, "name": o.name, "uid": o.uid}})
	}
	meta := map[string]any{}
	if sharded && s.filters && s.echoes {
		echoed := q.Get("shardSelector")
		if s.echo != nil {
			echoed = s.echo(echoed)
		}
		meta["shardInfo"] = map[string]any{"selector": echoed}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "example.kshard.io/v1", "kind": "WidgetList", "metadata": meta, "items": items})
	if s.after != nil {
		s.after(s, q, returned)
	}
}

func (s *probedServer) client(t *testing.T) dynamic.Interface {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return dynamic.NewForConfigOrDie(&rest.Config{Host: srv.URL})
}

// remove deletes o (by UID). Call under s.mu (from after).
func (s *probedServer) remove(o probeObject) {
	s.objects = slices.DeleteFunc(s.objects, func(x probeObject) bool { return x.uid == o.uid })
}

// uidIn returns a UID in partition p under the uid scheme.
func (s *probedServer) uidIn(p int, salt string) string {
	for i := 0; ; i++ {
		uid := fmt.Sprintf("%s-%d", salt, i)
		if q, _ := s.rp.PartitionOfObject("", uid); q == p {
			return uid
		}
	}
}

// widgets returns n objects spread over namespaces namespaces.
func widgets(n, namespaces int) []probeObject {
	out := make([]probeObject, n)
	for i := range out {
		out[i] = probeObject{namespace: fmt.Sprintf("n%d-probe", i%namespaces), name: "w" + strconv.Itoa(i), uid: fmt.Sprintf("0b7e6bb0-5a36-4c8a-9f55-%012d", i)}
	}
	return out
}

// deleteWitnesses deletes the object a probe LIST without field selector
// returned (the probe's next witness) right after it is answered, the
// first max times.
func deleteWitnesses(max int) func(*probedServer, url.Values, []probeObject) {
	deleted := 0
	return func(s *probedServer, q url.Values, returned []probeObject) {
		if q.Get("fieldSelector") == "" && len(returned) > 0 && deleted < max {
			deleted++
			s.remove(returned[0])
		}
	}
}

// TestProbeShardFilteringDecides: the decision rule against servers that
// filter or not, echo or not, and objects that change under the probe.
// "filtered" is never concluded unless the server left out an object that
// existed, and every probe costs at most ten LISTs of limit 1.
func TestProbeShardFilteringDecides(t *testing.T) {
	type want struct {
		filtered, echoed, retry bool
		reason                  string // in Reason; "" when filtered
		maxRequests             int
	}
	tests := []struct {
		name    string
		scheme  shard.Scheme
		objects []probeObject
		setup   func(*probedServer)
		want    want
	}{
		{"built-in kind, gate on: the echo decides in one LIST", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.filters, s.echoes = true, true },
			want{filtered: true, echoed: true, maxRequests: 1}},
		{"built-in kind, gate on, empty: the echo still decides", shard.SchemeNamespace, nil,
			func(s *probedServer) { s.filters, s.echoes = true, true },
			want{filtered: true, echoed: true, maxRequests: 1}},
		{"custom resource, gate on (uid)", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.filters = true },
			want{filtered: true, maxRequests: 4}},
		{"custom resource, gate on (namespace)", shard.SchemeNamespace, widgets(40, 12),
			func(s *probedServer) { s.filters = true },
			want{filtered: true, maxRequests: 4}},
		{"custom resource, gate on, every object in one namespace", shard.SchemeNamespace, widgets(40, 1),
			func(s *probedServer) { s.filters = true },
			want{filtered: true, maxRequests: 4}},
		{"gate off", shard.SchemeUID, widgets(40, 5),
			func(*probedServer) {},
			want{reason: "does not filter", maxRequests: 3}},
		{"gate off, every object in one namespace (the selector may include them all)", shard.SchemeNamespace, widgets(40, 1),
			func(*probedServer) {},
			want{reason: "does not filter", maxRequests: 3}},
		{"gate off, one object", shard.SchemeNamespace, widgets(1, 1),
			func(*probedServer) {},
			want{reason: "does not filter", maxRequests: 3}},
		{"empty kind, gate on, no echo: probe again at its first object", shard.SchemeNamespace, nil,
			func(s *probedServer) { s.filters = true },
			want{retry: true, reason: "no widgets.example.kshard.io exists", maxRequests: 2}},
		{"empty kind, gate off", shard.SchemeUID, nil,
			func(*probedServer) {},
			want{retry: true, reason: "no widgets.example.kshard.io exists", maxRequests: 2}},
		{"another selector echoed", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) {
				s.filters, s.echoes = true, true
				s.echo = func(sent string) string { return strings.Replace(sent, "0x2000000000000000", "0x4000000000000000", 1) }
			},
			want{echoed: true, reason: "another shard selector", maxRequests: 1}},
		// The witness vanishes before the exclusion LIST: a server without
		// the gate then returns nothing too, as a filtering one would.
		// The confirmation LIST tells them apart.
		{"gate off, each of the first two witnesses deleted after it is listed", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.after = deleteWitnesses(2) },
			want{reason: "does not filter", maxRequests: 10}},
		{"gate on, the first witness deleted after it is listed", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.filters = true; s.after = deleteWitnesses(1) },
			want{filtered: true, maxRequests: 7}},
		{"gate on, every witness deleted after it is listed", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.filters = true; s.after = deleteWitnesses(40) },
			want{retry: true, reason: "could not decide", maxRequests: 10}},
		{"gate on, the only object deleted after it is listed", shard.SchemeNamespace, widgets(1, 1),
			func(s *probedServer) { s.filters = true; s.after = deleteWitnesses(1) },
			want{retry: true, reason: "no widgets.example.kshard.io exists", maxRequests: 5}},
		{"gate on, the witness replaced by a namesake in the excluded partition", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) {
				s.filters = true
				replaced := false
				s.after = func(s *probedServer, q url.Values, returned []probeObject) {
					if replaced || q.Get("fieldSelector") != "" || len(returned) == 0 {
						return
					}
					replaced = true
					w := returned[0]
					p, _ := s.rp.PartitionOfObject(w.namespace, w.uid)
					s.remove(w)
					s.objects = append(s.objects, probeObject{namespace: w.namespace, name: w.name, uid: s.uidIn((p+1)%s.rp.Count(), "new")})
					s.sort()
				}
			},
			want{filtered: true, maxRequests: 6}},
		{"gate on, the witness replaced by a namesake in its own partition", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) {
				s.filters = true
				replaced := false
				s.after = func(s *probedServer, q url.Values, returned []probeObject) {
					name, isByName := strings.CutPrefix(q.Get("fieldSelector"), "metadata.name=")
					if replaced || !isByName || len(returned) > 0 {
						return
					}
					// Between the exclusion LIST and the confirmation.
					replaced = true
					i := slices.IndexFunc(s.objects, func(o probeObject) bool { return o.name == name })
					p, _ := s.rp.PartitionOfObject(s.objects[i].namespace, s.objects[i].uid)
					s.objects[i].uid = s.uidIn(p, "same")
				}
			},
			want{filtered: true, maxRequests: 7}},
		// Aggregated APIs: filtered only when proven.
		{"a server that ignores field selectors and the shard selector", shard.SchemeUID, widgets(40, 5),
			func(s *probedServer) { s.ignoresNames = true },
			want{reason: "does not filter", maxRequests: 3}},
		{"a server that answers nothing to field selectors, no shard filter", shard.SchemeNamespace, widgets(40, 1),
			func(s *probedServer) { s.blindToNames = true },
			want{retry: true, reason: "could not decide", maxRequests: 10}},
		{"a server that ignores field selectors but filters by shard", shard.SchemeNamespace, widgets(40, 12),
			func(s *probedServer) { s.ignoresNames, s.filters = true, true },
			want{filtered: true, maxRequests: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newProbedServer(t, tt.scheme, 8, tt.objects)
			tt.setup(s)
			rp, _ := shard.NewRangePartitioner(tt.scheme, 8)
			p, err := Filtering(context.Background(), s.client(t), probedGVR, "", rp)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if p.Filtered != w.filtered || (p.Echoed != "") != w.echoed || p.Retry != w.retry ||
				!strings.Contains(p.Reason, w.reason) || (w.reason == "") != (p.Reason == "") {
				t.Fatalf("probe = %+v; want filtered %v, echoed %v, retry %v, reason containing %q", p, w.filtered, w.echoed, w.retry, w.reason)
			}
			if n := len(s.requests); n > w.maxRequests {
				t.Fatalf("the probe sent %d LISTs, want at most %d: %v", n, w.maxRequests, s.requests)
			}
		})
	}
}

// The probe's errors: a ring it cannot test with, a refused shard selector
// (wrapped as ErrShardSelectorRejected), and a refused field selector
// (not blamed on the shard selector).
func TestProbeShardFilteringErrors(t *testing.T) {
	ctx := context.Background()
	one, _ := shard.NewRangePartitioner(shard.SchemeNamespace, 1)
	if _, err := Filtering(ctx, nil, probedGVR, "", one); err == nil || !strings.Contains(err.Error(), "at least 2 partitions") {
		t.Fatalf("probe with one partition = %v, want an error naming the 2 partitions needed", err)
	}
	rp, _ := shard.NewRangePartitioner(shard.SchemeNamespace, 8)
	rejected := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: "Internal error occurred: invalid shard selector: CEL parse error"}
	if _, err := Filtering(ctx, fakeServer(t, nil, rejected), probedGVR, "", rp); !errors.Is(err, ErrShardSelectorRejected) {
		t.Fatalf("probe answered %q = %v, want ErrShardSelectorRejected", rejected.Message, err)
	}
	// Only LISTs with a field selector are refused, with 400.
	s := newProbedServer(t, shard.SchemeNamespace, 8, widgets(10, 3))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fieldSelector") != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest, Message: `field label not supported: metadata.name`})
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.filters = true
	_, err := Filtering(ctx, dynamic.NewForConfigOrDie(&rest.Config{Host: srv.URL}), probedGVR, "", rp)
	if err == nil || errors.Is(err, ErrShardSelectorRejected) || !strings.Contains(err.Error(), "field label not supported") {
		t.Fatalf("probe of a server refusing the field selector = %v, want its error, not ErrShardSelectorRejected", err)
	}
}
