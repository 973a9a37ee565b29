package cachemetrics

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kshard/kshard/shard/cache"
)

// The object counts walk the whole cache: scrapes less than maxAge apart
// reuse them, later ones count again, so a fast scraper costs one walk per
// maxAge and a Prometheus scrape always sees fresh counts.
func TestObjectCountsAreReusedBriefly(t *testing.T) {
	now := time.Unix(1000, 0)
	walks := 0
	m := &Collector{maxAge: countsMaxAge, now: func() time.Time { return now },
		countFor: func() map[schema.GroupVersionKind]int {
			walks++
			return map[schema.GroupVersionKind]int{{Version: "v1", Kind: "ConfigMap"}: walks}
		}}
	for range 10 {
		m.objectCounts()
		now = now.Add(countsMaxAge / 10)
	}
	if walks != 1 {
		t.Fatalf("%d walks for 10 scrapes within %v; want 1", walks, countsMaxAge)
	}
	now = now.Add(countsMaxAge)
	if got := m.objectCounts()[schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}]; walks != 2 || got != 2 {
		t.Fatalf("after %v: %d walks, count %d; want a fresh count", countsMaxAge, walks, got)
	}
}

// A kind cached by labels exports what labelling costs — the label patches
// sent and the live reads that confirm an object gone — and what its
// self-check found, beside its mode; kinds in other modes export no such
// series, and a full kind no listed count either.
func TestLabelledKindsExportLabellingCosts(t *testing.T) {
	crs := schema.GroupVersionKind{Group: "bench.kshard.io", Version: "v1", Kind: "BenchObject"}
	cms := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	m := &Collector{maxAge: countsMaxAge, now: time.Now,
		countFor: func() map[schema.GroupVersionKind]int { return nil },
		modes: func() []cache.KindMode {
			return []cache.KindMode{
				{Kind: crs, Mode: cache.ModeLabels, ObjectsListed: 120, LabelPatches: 40, ConfirmReads: 3, LabelBacklog: 5,
					SelfCheck: &cache.CheckReport{Checks: 12, Failed: 1, Missing: 2, Relists: 1}},
				{Kind: cms, Mode: cache.ModeFull, Reason: "mapped by a function", LabelPatches: 7},
			}
		}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	want := map[string]float64{
		"kshard_cache_mode{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,mode=labels,version=v1}":     1,
		"kshard_cache_mode{group=,kind=/v1, Kind=ConfigMap,kind_name=ConfigMap,mode=full,version=v1}":                                         1,
		"kshard_cache_listed_objects_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}": 120,
		"kshard_cache_label_patches_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":  40,
		"kshard_cache_confirm_reads_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":  3,
		"kshard_cache_missing_objects{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":      2,
		"kshard_cache_checks_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":         12,
		"kshard_cache_check_failures_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}": 1,
		"kshard_cache_label_backlog{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":        5,
		"kshard_cache_check_relists_total{group=bench.kshard.io,kind=bench.kshard.io/v1, Kind=BenchObject,kind_name=BenchObject,version=v1}":  1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("collected %v\nwant %v", got, want)
	}
}
