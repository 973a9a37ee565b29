package shardprobe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/shard"
)

// fakeServer answers every LIST with a ConfigMapList whose ShardInfo is what
// echo returns for the request's shardSelector ("" for none), or with a
// status error when status is set.
func fakeServer(t *testing.T, echo func(sel string) string, status *metav1.Status) dynamic.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if status != nil {
			w.WriteHeader(int(status.Code))
			_ = json.NewEncoder(w).Encode(status)
			return
		}
		if r.URL.Query().Get("limit") != "1" {
			t.Errorf("probe LIST without limit=1: %s", r.URL)
		}
		list := map[string]any{"kind": "ConfigMapList", "apiVersion": "v1", "items": []any{}, "metadata": map[string]any{}}
		if e := echo(r.URL.Query().Get("shardSelector")); e != "" {
			list["metadata"] = map[string]any{"shardInfo": map[string]any{"selector": e}}
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return dynamic.NewForConfigOrDie(&rest.Config{Host: srv.URL})
}

var cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

const sel = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"

func TestProbeTrustsOnlyAnExactEcho(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		echo     func(string) string
		filtered bool
		reason   string
	}{
		{"exact echo", func(s string) string { return s }, true, ""},
		{"no ShardInfo", func(string) string { return "" }, false, "echoed no ShardInfo"},
		{"another selector echoed", func(string) string {
			return "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
		}, false, "echoed another shard selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Selector(ctx, fakeServer(t, tt.echo, nil), cmGVR, "", sel)
			if err != nil {
				t.Fatal(err)
			}
			if p.Filtered != tt.filtered || !strings.Contains(p.Reason, tt.reason) || (tt.reason == "") != (p.Reason == "") {
				t.Fatalf("probe = %+v; want filtered %v, reason containing %q", p, tt.filtered, tt.reason)
			}
		})
	}
}

func TestProbeErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Selector(ctx, fakeServer(t, nil, nil), cmGVR, "", ""); err == nil || !strings.Contains(err.Error(), "empty shard selector") {
		t.Fatalf("probe with an empty selector = %v, want an error: it would select everything", err)
	}
	// Kubernetes 1.36 reports an unparsable selector as 500.
	rejected := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: "Internal error occurred: invalid shard selector: CEL parse error: expression code point size exceeds limit"}
	if _, err := Selector(ctx, fakeServer(t, nil, rejected), cmGVR, "", sel); !errors.Is(err, ErrShardSelectorRejected) {
		t.Fatalf("probe answered %q = %v, want ErrShardSelectorRejected", rejected.Message, err)
	}
	forbidden := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: "forbidden"}
	if _, err := Selector(ctx, fakeServer(t, nil, forbidden), cmGVR, "", sel); err == nil || errors.Is(err, ErrShardSelectorRejected) {
		t.Fatalf("probe answered 403 = %v, want a plain error", err)
	}
}

func TestShardMatcher(t *testing.T) {
	rp, err := shard.NewRangePartitioner(shard.SchemeUID, 4)
	if err != nil {
		t.Fatal(err)
	}
	set := shard.NewPartitionSet(4, 0, 1, 3)
	m, err := NewMatcher(rp, set)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := rp.Selector(set); m.String() != want {
		t.Fatalf("matcher selector %q, want %q", m.String(), want)
	}
	for _, uid := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "0b7e6bb0-5a36-4c8a-9f55-2b1f8a1c9d3e", "5d2c1f0e-8b7a-4c3d-9e1f-0a1b2c3d4e5f"} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "y", UID: types.UID(uid)}}
		p, _ := rp.PartitionOfObject("x", uid)
		if got, err := m.Matches(obj); err != nil || got != set.Has(p) {
			t.Fatalf("Matches(uid %s) = %v, %v; partition %d in set is %v", uid, got, err, p, set.Has(p))
		}
		if got := m.Contains("x", uid); got != set.Has(p) {
			t.Fatalf("Contains(uid %s) = %v; partition %d in set is %v", uid, got, p, set.Has(p))
		}
	}
	if m.Contains("x", "") {
		t.Fatal("an object without UID matched under the uid scheme")
	}
	if _, err := NewMatcher(rp, shard.NewPartitionSet(4)); !errors.Is(err, shard.ErrNoPartitions) {
		t.Fatalf("NewMatcher(empty) = %v, want ErrNoPartitions", err)
	}
	if _, err := (Matcher{}).Matches(&corev1.ConfigMap{}); err == nil {
		t.Fatal("the zero Matcher matched")
	}
}

// The per-event client-side check: sharding's Matches resolves the field
// through meta.Accessor and formats the hash as hex; compare the gate's
// allocation-free BenchmarkPartitionOfObjectUID36 in controller/gate.
func BenchmarkShardMatcherUID(b *testing.B) {
	rp, err := shard.NewRangePartitioner(shard.SchemeUID, shard.DefaultPartitions)
	if err != nil {
		b.Fatal(err)
	}
	set := shard.NewPartitionSet(shard.DefaultPartitions)
	for p := 0; p < shard.DefaultPartitions; p += 3 {
		set.Add(p) // a replica's third of the ring, scattered: 91 ranges
	}
	m, err := NewMatcher(rp, set)
	if err != nil {
		b.Fatal(err)
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns", UID: "0b7e6bb0-5a36-4c8a-9f55-2b1f8a1c9d3e"}}
	b.Run("Matches", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Matches(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Contains", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = m.Contains(obj.Namespace, string(obj.UID))
		}
	})
}

var benchSink bool
