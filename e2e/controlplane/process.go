package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane executable running in its own process group,
// with its output in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// A process group per child lets Stop kill anything it spawned; Pdeathsig
	// stops it if the test binary itself dies without running cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop asks the process group to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if p == nil || !p.running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
	// Reap stragglers of the group that outlived their leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// kill ends the process group at once, as a crash would.
func (p *process) kill() {
	if p == nil || !p.running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// tail returns the last n lines of the process log.
func (p *process) tail(n int) string {
	return TailFile(p.logPath, n)
}

// TailFile returns the last n lines of the file at path, or a note saying
// why it could not be read: for test failures that quote a process's log.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errAddrInUse marks a start that failed because a port was taken between
// choosing it and binding it; the caller retries with new ports.
var errAddrInUse = errors.New("address already in use")

func (p *process) exitError() error {
	log := p.tail(30)
	if strings.Contains(log, "address already in use") {
		return fmt.Errorf("%s: %w\n%s", p.name, errAddrInUse, log)
	}
	return fmt.Errorf("%s exited early (%v); last log lines (%s):\n%s", p.name, p.waitErr, p.logPath, log)
}
