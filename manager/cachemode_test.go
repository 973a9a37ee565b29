package manager

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The object counts walk the whole cache: scrapes less than maxAge apart
// reuse them, later ones count again, so a fast scraper costs one walk per
// maxAge and a Prometheus scrape always sees fresh counts.
func TestObjectCountsAreReusedBriefly(t *testing.T) {
	now := time.Unix(1000, 0)
	walks := 0
	m := &cacheModeCollector{maxAge: objectCountsMaxAge, now: func() time.Time { return now },
		countFor: func() map[schema.GroupVersionKind]int {
			walks++
			return map[schema.GroupVersionKind]int{{Version: "v1", Kind: "ConfigMap"}: walks}
		}}
	for range 10 {
		m.objectCounts()
		now = now.Add(objectCountsMaxAge / 10)
	}
	if walks != 1 {
		t.Fatalf("%d walks for 10 scrapes within %v; want 1", walks, objectCountsMaxAge)
	}
	now = now.Add(objectCountsMaxAge)
	if got := m.objectCounts()[schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}]; walks != 2 || got != 2 {
		t.Fatalf("after %v: %d walks, count %d; want a fresh count", objectCountsMaxAge, walks, got)
	}
}
