package cli_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kshardBin is the kshard binary TestMain builds for every test, and
// operatorBin the example operator next to it, where `kshard demo` finds it.
var kshardBin, operatorBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here runs the built binaries: none is a unit test.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "kshard-cli-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kshardBin, operatorBin = filepath.Join(dir, "kshard"), filepath.Join(dir, "example-operator")
	out, err := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"github.com/kshard/kshard/cmd/kshard", "github.com/kshard/kshard/cmd/example-operator").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building kshard and the example operator: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipIfShort skips a test of the built binaries under -short, which means
// unit tests only; TestMain builds nothing then.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: runs the kshard and example-operator binaries (and a control plane); -short runs unit tests only")
	}
}

// result is one finished kshard run.
type result struct {
	code           int
	stdout, stderr string
}

// kshard runs the binary to completion within timeout. On timeout it is
// interrupted like a user's Ctrl-C, so that it cleans up, and killed if it
// does not exit within a minute of that.
func kshard(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kshardBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	err := cmd.Run()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("kshard %s did not finish within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, r.stdout, r.stderr)
	}
	if err != nil && r.code < 0 {
		t.Fatalf("kshard %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// processesMentioning lists running processes whose command line contains
// s, so a test can prove nothing it started is left behind.
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.Contains(line, s) {
			found = append(found, e.Name()+": "+line)
		}
	}
	return found
}
