package process_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kshard/kshard/internal/process"
	"github.com/kshard/kshard/internal/testwait"
)

// sh starts a shell script as a process logging to a temporary file.
func sh(t *testing.T, script string, onExit func(process.Exit)) *process.Process {
	t.Helper()
	p, err := process.Start(process.Options{
		Name: "script", Path: "/bin/sh", Args: []string{"-c", script},
		LogPath: filepath.Join(t.TempDir(), "script.log"), OnExit: onExit,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartValidates(t *testing.T) {
	if _, err := process.Start(process.Options{LogPath: "x"}); err == nil || !strings.Contains(err.Error(), "Path") {
		t.Errorf("no Path: got %v", err)
	}
	if _, err := process.Start(process.Options{Path: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "LogPath") {
		t.Errorf("no LogPath: got %v", err)
	}
	if _, err := process.Start(process.Options{Path: "/nonexistent/bin", LogPath: filepath.Join(t.TempDir(), "l")}); err == nil {
		t.Error("a missing executable started")
	}
}

func TestWaitLogAndServingAddr(t *testing.T) {
	// The line comes after a pause and in two writes, so WaitLog must read
	// a growing file and join a line split across reads.
	p := sh(t, `echo starting; sleep 0.3; printf '{"level":0,"msg":"serving","server":"health probe",'; sleep 0.2; echo '"address":"[::]:41234"}'; sleep 30`, nil)
	addr, err := p.ServingAddr(ctxFor(t, 10*time.Second), process.ServerProbe)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1:41234" {
		t.Errorf("address = %q, want 127.0.0.1:41234", addr)
	}
	line, err := p.WaitLog(ctxFor(t, 10*time.Second), "start line", func(l []byte) bool { return string(l) == "starting" })
	if err != nil || string(line) != "starting" {
		t.Errorf("WaitLog = %q, %v", line, err)
	}
	// Never logged: the context ends it, and the error says what was missing.
	_, err = p.ServingAddr(ctxFor(t, 300*time.Millisecond), process.ServerMetrics)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"metrics" server address`) {
		t.Errorf("missing line: got %v", err)
	}
}

func TestWaitLogFailsWhenProcessExits(t *testing.T) {
	p := sh(t, `echo boom; exit 3`, nil)
	_, err := p.WaitLog(ctxFor(t, 10*time.Second), "ready line", func(l []byte) bool { return string(l) == "ready" })
	if err == nil || !strings.Contains(err.Error(), "exited 3") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("got %v, want an error naming the exit and quoting the log", err)
	}
	// An unterminated last line still counts once the process is gone.
	q := sh(t, `printf ready`, nil)
	if _, err := q.WaitLog(ctxFor(t, 10*time.Second), "ready", func(l []byte) bool { return string(l) == "ready" }); err != nil {
		t.Errorf("unterminated last line: %v", err)
	}
}

func TestStopGraceful(t *testing.T) {
	var seen process.Exit
	p := sh(t, `trap 'echo leaving; exit 0' TERM; echo up; while :; do sleep 0.05; done`, func(e process.Exit) { seen = e })
	if _, err := p.WaitLog(ctxFor(t, 10*time.Second), "up", func(l []byte) bool { return string(l) == "up" }); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Stop(10 * time.Second)
	if err != nil || exit.Code != 0 || exit.Signal != 0 {
		t.Fatalf("Stop = %v, %v; want exited 0", exit, err)
	}
	if seen != exit {
		t.Errorf("OnExit saw %v, Stop returned %v", seen, exit)
	}
	if p.Running() {
		t.Error("still running after Stop")
	}
	if !strings.Contains(p.Tail(5), "leaving") {
		t.Errorf("log tail %q lacks the trap's line", p.Tail(5))
	}
	// Stopping again is harmless.
	if again, err := p.Stop(time.Second); err != nil || again != exit {
		t.Errorf("second Stop = %v, %v", again, err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := sh(t, `trap '' TERM; echo up; while :; do sleep 0.05; done`, nil)
	if _, err := p.WaitLog(ctxFor(t, 10*time.Second), "up", func(l []byte) bool { return string(l) == "up" }); err != nil {
		t.Fatal(err)
	}
	exit, err := p.Stop(200 * time.Millisecond)
	if !errors.Is(err, process.ErrKilled) {
		t.Errorf("Stop error = %v, want ErrKilled", err)
	}
	if exit.Signal != syscall.SIGKILL || exit.String() != "killed by killed" {
		t.Errorf("exit = %+v (%s), want killed by SIGKILL", exit, exit)
	}
}

// state reads the process state letter from /proc (T: stopped).
func state(t *testing.T, pid int) byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	return s[strings.LastIndexByte(s, ')')+2]
}

func awaitState(t *testing.T, p *process.Process, want func(byte) bool, what string) {
	t.Helper()
	// /proc cannot be awaited: polled.
	testwait.For(t, 10*time.Second, "the process to become "+what, func() (bool, string) {
		s := state(t, p.Pid())
		return want(s), fmt.Sprintf("state %c", s)
	})
}

func TestPauseResumeAndKill(t *testing.T) {
	// exec: a shell that forks could be stopped inside vfork, in state D.
	p := sh(t, `exec sleep 60`, nil)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	awaitState(t, p, func(s byte) bool { return s == 'T' }, "stopped")
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	awaitState(t, p, func(s byte) bool { return s != 'T' }, "running again")
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	// SIGKILL ends a stopped process too.
	if exit := p.Kill(); exit.Signal != syscall.SIGKILL || exit.Code != -1 {
		t.Errorf("Kill = %+v", exit)
	}
	if _, ok := p.Exited(); !ok {
		t.Error("Exited reports no exit after Kill")
	}
	if err := p.Pause(); err != nil {
		t.Errorf("signalling a reaped process: %v", err)
	}
}

func TestStopResumesPausedProcess(t *testing.T) {
	// A loop without forks: a shell stopped inside vfork would sit in D.
	p := sh(t, `trap 'exit 0' TERM; echo up; while :; do :; done`, nil)
	if _, err := p.WaitLog(ctxFor(t, 10*time.Second), "up", func(l []byte) bool { return string(l) == "up" }); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	awaitState(t, p, func(s byte) bool { return s == 'T' }, "stopped")
	if exit, err := p.Stop(10 * time.Second); err != nil || exit.Code != 0 {
		t.Errorf("Stop of a paused process = %v, %v; want a graceful exit", exit, err)
	}
}

func TestParseServing(t *testing.T) {
	for _, tc := range []struct {
		line, server, want string
		ok                 bool
	}{
		{`{"msg":"serving","server":"metrics","address":"[::]:8080"}`, "metrics", "127.0.0.1:8080", true},
		{`{"msg":"serving","server":"metrics","address":"0.0.0.0:8080"}`, "metrics", "127.0.0.1:8080", true},
		{`{"msg":"serving","server":"metrics","address":"127.0.0.2:9"}`, "metrics", "127.0.0.2:9", true},
		{`{"msg":"serving","server":"health probe","address":"[::1]:81"}`, "health probe", "[::1]:81", true},
		{`{"msg":"serving","server":"health probe","address":"[::]:81"}`, "metrics", "", false},
		{`{"msg":"started","server":"metrics","address":"[::]:8080"}`, "metrics", "", false},
		{`{"msg":"serving","server":"metrics","address":"nonsense"}`, "metrics", "", false},
		{`serving metrics [::]:8080`, "metrics", "", false},
		{``, "metrics", "", false},
	} {
		got, ok := process.ParseServing([]byte(tc.line), tc.server)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseServing(%s, %q) = %q, %v; want %q, %v", tc.line, tc.server, got, ok, tc.want, tc.ok)
		}
	}
}
