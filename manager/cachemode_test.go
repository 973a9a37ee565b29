package manager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kshard/kshard/shard/cache"
)

// CacheCheckInterval: 0 is the default, negative turns the check off, and
// a positive interval below a second is refused, naming the way out.
func TestCacheCheckIntervalValidation(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string // "" for valid
	}{
		{0, ""},
		{-1, ""},
		{time.Second, ""},
		{10 * time.Minute, ""},
		{500 * time.Millisecond, "CacheCheckInterval 500ms is below a second"},
	} {
		o := Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns", CacheMode: CacheLabels, CacheCheckInterval: tc.interval}
		o.applyDefaults()
		err := o.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CacheCheckInterval %v: %v", tc.interval, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CacheCheckInterval %v: %v, want an error naming %q", tc.interval, err, tc.want)
		}
	}
}

// /readyz fails while the last self-check of a kind cached by labels found
// objects missing, naming the kind, the count and the objects; it passes
// when nothing is missing, when the check is off, and for other modes.
func TestReadyzFailsWhileTheCacheMissesObjects(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "example.kshard.io", Version: "v1", Kind: "Widget"}
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	report := []cache.KindMode{
		{Kind: configMaps, Mode: cache.ModeFull},
		{Kind: widgets, Mode: cache.ModeLabels}, // check off
	}
	var ready checks
	if err := ready.add("cache-complete", cacheComplete(func() []cache.KindMode { return report })); err != nil {
		t.Fatal(err)
	}
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		ready.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("with no check: %d %q, want ready", code, body)
	}
	report[1].SelfCheck = &cache.CheckReport{Checks: 3}
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("nothing missing: %d %q, want ready", code, body)
	}
	report[1].SelfCheck = &cache.CheckReport{Checks: 4, Missing: 2, Examples: []string{"ns/a", "ns/b"}, Relists: 1}
	code, body := probe()
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]cache-complete failed: 2 objects of example.kshard.io/v1, Kind=Widget (ns/a, ns/b)") {
		t.Fatalf("2 missing: %d %q, want a failure naming the kind, count and objects", code, body)
	}
}

// A manager with a sharded cache has the readiness check; one with a full
// cache has no self-check to report.
func TestCacheCompleteIsRegisteredWithTheShardedCache(t *testing.T) {
	for mode, want := range map[CacheMode]bool{CacheLabels: true, CacheFull: false} {
		m, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Ring: "ring", Identity: "r-0", LeaseNamespace: "ns",
			CacheMode: mode, MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, got := m.readyz.checks["cache-complete"]; got != want {
			t.Errorf("CacheMode %q: cache-complete registered %v, want %v", mode, got, want)
		}
	}
}
