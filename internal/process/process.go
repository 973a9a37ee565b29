package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options describe a process to start.
type Options struct {
	// Name names the process in errors, e.g. "replica-1". Defaults to the
	// base name of Path.
	Name string
	// Path is the executable. Required.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is added to this process's environment (later entries win).
	Env []string
	// Dir is the working directory. Defaults to this process's.
	Dir string
	// LogPath receives stdout and stderr, appended. Required: the log is
	// how a caller learns addresses and diagnoses failures.
	LogPath string
	// OnExit, if set, is called once with the exit on the goroutine that
	// reaped the process, before Done is closed, so that whatever it
	// records happens-before every waiter sees the exit.
	OnExit func(Exit)
}

// Exit is how a process ended.
type Exit struct {
	// At is when the process was reaped.
	At time.Time
	// Code is the exit code, -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, 0 if it exited.
	Signal syscall.Signal
}

// String describes the exit: "exited 0", or "killed by killed" for SIGKILL.
func (e Exit) String() string {
	if e.Signal != 0 {
		return "killed by " + e.Signal.String()
	}
	return fmt.Sprintf("exited %d", e.Code)
}

// Process is one started child process.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	started time.Time

	done chan struct{} // closed after exit is set
	exit Exit

	// sigMu orders signals with the reap: once the process is reaped its
	// pid (and group id) may be reused, so no signal may follow.
	sigMu  sync.Mutex
	reaped bool
}

// Start starts the process. It does not wait for anything; see WaitLog
// and ServingAddr.
func Start(opts Options) (*Process, error) {
	if opts.Path == "" {
		return nil, errors.New("process: Options.Path is required")
	}
	if opts.LogPath == "" {
		return nil, errors.New("process: Options.LogPath is required")
	}
	if opts.Name == "" {
		opts.Name = opts.Path[strings.LastIndexByte(opts.Path, '/')+1:]
	}
	logFile, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("process: log of %s: %w", opts.Name, err)
	}
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Dir = opts.Dir
	if len(opts.Env) > 0 {
		cmd.Env = append(os.Environ(), opts.Env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A group of its own lets signals reach everything it spawned and
	// keeps a terminal's Ctrl-C away from it (the owner stops it, in
	// order); Pdeathsig ends it if the owner dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", opts.Name, opts.Path, err)
	}
	p := &Process{name: opts.Name, logPath: opts.LogPath, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() { // owned by p: Kill, Stop and Wait all wait for done
		err := cmd.Wait()
		// Children the leader left behind would hold the log and ports:
		// end the group. Its id cannot have been reused while any member
		// lives, and an empty group answers ESRCH.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		logFile.Close()
		exit := Exit{At: time.Now(), Code: cmd.ProcessState.ExitCode()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				exit.Signal = ws.Signal()
			}
		}
		p.sigMu.Lock()
		p.reaped = true
		p.exit = exit
		p.sigMu.Unlock()
		if opts.OnExit != nil {
			opts.OnExit(exit)
		}
		close(p.done)
	}()
	return p, nil
}

// Name is the name given in Options.
func (p *Process) Name() string { return p.name }

// Pid is the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file receiving the process's output.
func (p *Process) LogPath() string { return p.logPath }

// Started is when the process was started.
func (p *Process) Started() time.Time { return p.started }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not been reaped yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited returns how the process ended, once it has.
func (p *Process) Exited() (Exit, bool) {
	select {
	case <-p.done:
		return p.exit, true
	default:
		return Exit{}, false
	}
}

// Signal sends sig to the process's group. It does nothing once the process
// has been reaped (its ids may belong to someone else by then).
func (p *Process) Signal(sig syscall.Signal) error {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		return nil
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	return nil
}

// Kill ends the process group at once with SIGKILL, as a crash, and waits
// until the process is reaped. Safe to call on a process that has exited.
func (p *Process) Kill() Exit {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
	return p.exit
}

// ErrKilled is returned by Stop when the process outlived its grace period
// and was killed.
var ErrKilled = errors.New("did not exit within its grace period after SIGTERM and was killed")

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it and returns ErrKilled (wrapped). A process that has already
// exited is not signalled. Once the leader is reaped, whatever else is left
// in its group is killed.
func (p *Process) Stop(grace time.Duration) (Exit, error) {
	_ = p.Signal(syscall.SIGTERM)
	// A stopped (paused) process does not act on SIGTERM until continued.
	_ = p.Signal(syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exit, nil
	case <-t.C:
		exit := p.Kill()
		return exit, fmt.Errorf("%s %w after %s (log %s)", p.name, ErrKilled, grace, p.logPath)
	}
}

// Pause freezes the process group with SIGSTOP: it keeps its sockets and
// memory but runs nothing, as in a long GC pause or a stopped VM.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume continues a paused process group with SIGCONT.
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return TailFile(p.logPath, n) }

// TailFile returns the last n lines of the file at path, or a note saying
// why it could not be read: for errors that quote a process's log.
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
