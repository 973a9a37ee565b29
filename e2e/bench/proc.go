package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kshard/kshard/e2e/controlplane"
)

// system is one of the two operators under test.
type system struct {
	name   string // for reports
	short  string // for identities and Lease names
	bin    string
	kshard bool
}

// replica is one operator process, in its own process group.
type replica struct {
	id          string
	metricsAddr string
	probeAddr   string
	logPath     string
	cmd         *exec.Cmd
	started     time.Time
	exited      chan struct{} // closed once reaped; code is set before
	code        int
}

func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// startReplica starts bin with args. The goroutine it starts is owned by the
// replica: every path that ends the process waits for exited.
func startReplica(id, bin, logPath string, args []string) (*replica, error) {
	ports, err := controlplane.FreePorts(2)
	if err != nil {
		return nil, err
	}
	r := &replica{
		id:          id,
		metricsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		probeAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		logPath:     logPath,
		exited:      make(chan struct{}),
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args = append(args, "--identity="+id, "--metrics-addr="+r.metricsAddr, "--probe-addr="+r.probeAddr)
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// Own process group so a kill ends everything it spawned; Pdeathsig
	// ends it if the bench dies without cleaning up.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", id, err)
	}
	r.started = time.Now()
	go func() {
		_ = r.cmd.Wait()
		logFile.Close()
		r.code = r.cmd.ProcessState.ExitCode()
		close(r.exited)
	}()
	return r, nil
}

// stop sends SIGTERM and waits up to timeout for the exit, then kills. It
// returns how long the graceful exit took and an error if it was not clean.
func (r *replica) stop(timeout time.Duration) (time.Duration, error) {
	if !r.running() {
		return 0, nil
	}
	at := time.Now()
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.kill()
		return time.Since(at), fmt.Errorf("%s did not exit within %s of SIGTERM; killed (log %s)", r.id, timeout, r.logPath)
	}
	took := time.Since(at)
	if r.code != 0 {
		return took, fmt.Errorf("%s exited with code %d after SIGTERM; last log lines:\n%s", r.id, r.code, controlplane.TailFile(r.logPath, 15))
	}
	return took, nil
}

// kill ends the process group at once, as a crash, and waits for the reap.
func (r *replica) kill() {
	if r.running() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-r.exited
}

// procStats are a live process's CPU time and peak resident set.
type procStats struct {
	CPUSeconds float64
	PeakRSS    int64 // bytes (VmHWM)
}

func (r *replica) stats() (procStats, error) {
	pid := r.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStats{}, err
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line, in clock ticks (100 Hz on Linux).
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return procStats{}, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	out := procStats{CPUSeconds: (ut + st) / 100}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStats{}, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				out.PeakRSS = kb * 1024
			}
		}
	}
	return out, nil
}

// ready reports whether the replica's /readyz answers 200.
func (r *replica) ready(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.probeAddr+"/readyz", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// metrics is one scrape of a Prometheus endpoint.
type metrics map[string]*dto.MetricFamily

func scrape(ctx context.Context, addr string) (metrics, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", addr, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(in interface{ Read([]byte) (int, error) }) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(in)
	if err != nil {
		return nil, err
	}
	return metrics(mfs), nil
}

// sum adds the values of name's series whose labels include every pair of
// match.
func (m metrics) sum(name string, match map[string]string) float64 {
	mf := m[name]
	if mf == nil {
		return 0
	}
	var total float64
series:
	for _, s := range mf.GetMetric() {
		for k, v := range match {
			found := false
			for _, l := range s.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
					break
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case s.Counter != nil:
			total += s.GetCounter().GetValue()
		case s.Gauge != nil:
			total += s.GetGauge().GetValue()
		case s.Untyped != nil:
			total += s.GetUntyped().GetValue()
		}
	}
	return total
}

// buildOperators builds both operator binaries into dir: kshardop from the
// root module, the baseline from its own module.
func buildOperators(ctx context.Context, root, dir string) (kshardBin, baselineBin string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("the go tool is needed to build the operators: %w", err)
	}
	kshardBin, baselineBin = filepath.Join(dir, "kshardop"), filepath.Join(dir, "baseline")
	builds := []struct{ dir, out, pkg string }{
		{root, kshardBin, "./e2e/bench/kshardop"},
		{filepath.Join(root, "e2e", "bench", "baseline"), baselineBin, "."},
	}
	errs := make([]error, len(builds))
	done := make(chan struct{}, len(builds))
	for i, b := range builds {
		go func() {
			defer func() { done <- struct{}{} }()
			cmd := exec.CommandContext(ctx, goTool, "build", "-o", b.out, b.pkg)
			cmd.Dir = b.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("building %s in %s: %w\n%s", b.pkg, b.dir, err, out)
			}
		}()
	}
	for range builds {
		<-done
	}
	return kshardBin, baselineBin, errors.Join(errs...)
}
