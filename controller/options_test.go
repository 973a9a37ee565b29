package controller

import (
	"github.com/kshard/kshard/shard"

	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/kshard/kshard/controller/gate"
)

// A controller built without a Logger (outside a Builder) logs like manager
// and lease do, JSON lines on stderr, instead of discarding its logs.
func TestDefaultLoggerWritesJSONToStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	func() {
		defer func() { os.Stderr = stderr }()
		Options{}.withDefaults().Logger.WithValues("controller", "c").Info("hello")
	}()
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(out, &line); err != nil {
		t.Fatalf("stderr %q is not one JSON line: %v", out, err)
	}
	if line["msg"] != "hello" || line["controller"] != "c" {
		t.Fatalf("logged %v, want msg hello and controller c", line)
	}
}

// A controller drains by the ring's defaults (shard.Timing's grace period,
// the drain loop's report time), whether a manager runs it or not.
func TestDrainDefaultsAreTheRings(t *testing.T) {
	o := Options{}.withDefaults()
	if want := (shard.Timing{}).WithDefaults().DrainGracePeriod; o.DrainGracePeriod != want {
		t.Errorf("DrainGracePeriod %v; want shard.Timing's %v", o.DrainGracePeriod, want)
	}
	if o.DrainReportAfter != gate.DefaultDrainReportAfter {
		t.Errorf("DrainReportAfter %v; want gate.DefaultDrainReportAfter %v", o.DrainReportAfter, gate.DefaultDrainReportAfter)
	}
}
