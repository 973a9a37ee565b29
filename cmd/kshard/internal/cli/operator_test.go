package cli

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A build that takes a while says so while it runs, and its output is
// returned whole; a cancelled context stops it.
func TestRunWithProgress(t *testing.T) {
	var progress strings.Builder
	cmd := exec.CommandContext(context.Background(), "sh", "-c", "sleep 0.3; echo built")
	out, err := runWithProgress(cmd, &progress, 20*time.Millisecond, func(d time.Duration) string { return "still building " + d.String() })
	if err != nil || string(out) != "built\n" {
		t.Fatalf("out %q, err %v", out, err)
	}
	if !strings.HasPrefix(progress.String(), "still building ") {
		t.Errorf("no progress line during a 300ms command ticking every 20ms: %q", progress.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cmd = exec.CommandContext(ctx, "sleep", "60")
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, err := runWithProgress(cmd, &progress, time.Hour, func(time.Duration) string { return "" }); err == nil {
		t.Error("a cancelled build reported success")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the cancelled build took %s to stop", d)
	}
}
