package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"time"
)

const (
	operatorName    = "example-operator"
	operatorPackage = "github.com/kshard/kshard/cmd/example-operator"
	kshardModule    = "github.com/kshard/kshard"
)

// exampleOperator finds the example-operator binary the demo's replicas
// run, or builds it. Found: an example-operator next to this binary (where
// `go install` of both puts it, and where kshard's tests build it). Built,
// into a temporary directory that cleanup removes: with `go install
// …/cmd/example-operator@VERSION` when this binary is a released kshard, or
// with `go build` in the current directory's module otherwise (`go run
// ./cmd/kshard demo` in a checkout). Only ctx bounds the build, which, like
// the control plane's, does not count against --timeout.
func exampleOperator(ctx context.Context, progress io.Writer, prog string) (path string, cleanup func(), err error) {
	cleanup = func() {}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), operatorName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, cleanup, nil
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", cleanup, fmt.Errorf("the demo runs %s replicas: install it next to %s (go install %s@latest) or put the go tool on PATH to build it", operatorName, prog, operatorPackage)
	}
	dir, err := os.MkdirTemp("", "kshard-demo-operator-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	args := []string{"build", "-o", filepath.Join(dir, operatorName), operatorPackage}
	var env []string
	if v := releasedVersion(); v != "" {
		args = []string{"install", operatorPackage + "@" + v}
		env = []string{"GOBIN=" + dir}
	}
	start := time.Now()
	fmt.Fprintf(progress, "%s: building the example operator (go %s %s); --timeout does not count it\n", prog, args[0], args[len(args)-1])
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := runWithProgress(cmd, progress, buildProgressEvery, func(elapsed time.Duration) string {
		return fmt.Sprintf("%s: still building the example operator, %s elapsed (a cold Go build cache takes minutes)", prog, elapsed.Round(time.Second))
	})
	if err != nil {
		cleanup()
		if ctx.Err() != nil {
			return "", func() {}, ctx.Err()
		}
		return "", func() {}, fmt.Errorf("building %s failed (run the demo from a kshard checkout, or install it next to %s: go install %s@latest): %w\n%s", operatorName, prog, operatorPackage, err, out)
	}
	fmt.Fprintf(progress, "%s: example operator built in %s\n", prog, time.Since(start).Round(100*time.Millisecond))
	return filepath.Join(dir, operatorName), cleanup, nil
}

// releasedVersion is this binary's kshard module version when it was built
// from a released module (go install …@version), "" for a build from a
// checkout.
func releasedVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Path != kshardModule || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return ""
	}
	return info.Main.Version
}

// buildProgressEvery is how often a build that is still running says so.
const buildProgressEvery = 15 * time.Second

// runWithProgress runs cmd to completion and returns its combined output,
// writing line(elapsed) to progress every interval meanwhile, so that a
// long build is never silent. The command stops with its context.
func runWithProgress(cmd *exec.Cmd, progress io.Writer, interval time.Duration, line func(elapsed time.Duration) string) ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	start := time.Now()
	done := make(chan result, 1)
	go func() { // owned here: its result is received before returning
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.out, r.err
		case <-tick.C:
			fmt.Fprintln(progress, line(time.Since(start)))
		}
	}
}
