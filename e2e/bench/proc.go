package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kshard/kshard/internal/process"
)

// system is one of the operators under test: kshard-native, the
// leader-elected controller-runtime baseline, or the baseline converted
// with controller/crshard (the adapter).
type system struct {
	name   string // for reports
	short  string // for identities and Lease names
	bin    string
	kshard bool // sharded: formed when every partition is active
}

// replica is one operator process, in its own process group.
type replica struct {
	id          string
	metricsAddr string // bound on port 0, read from the replica's log
	probeAddr   string
	debugAddr   string // the bench debug server (e2e/bench/benchkit/heap.go)
	proc        *process.Process
}

// debugServer is the name of the operators' bench debug server in their
// "serving" line (e2e/bench/benchkit/heap.go).
const debugServer = "bench debug"

func (r *replica) running() bool { return r.proc.Running() }

// bindTimeout bounds the wait for a started replica to log the addresses of
// its servers, which it binds before anything else.
const bindTimeout = time.Minute

// startReplica starts bin with args and waits until it has bound its
// metrics and probe servers on ports the kernel chose.
func startReplica(ctx context.Context, id, bin, logPath string, args []string) (*replica, error) {
	args = append(args, "--identity="+id, "--metrics-addr=127.0.0.1:0", "--probe-addr=127.0.0.1:0", "--debug-addr=127.0.0.1:0")
	proc, err := process.Start(process.Options{Name: id, Path: bin, Args: args, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	r := &replica{id: id, proc: proc}
	ctx, cancel := context.WithTimeout(ctx, bindTimeout)
	defer cancel()
	if r.metricsAddr, err = proc.ServingAddr(ctx, process.ServerMetrics); err == nil {
		if r.probeAddr, err = proc.ServingAddr(ctx, process.ServerProbe); err == nil {
			r.debugAddr, err = proc.ServingAddr(ctx, debugServer)
		}
	}
	if err != nil {
		proc.Kill()
		return nil, err
	}
	return r, nil
}

// stop sends SIGTERM and waits up to timeout for the exit, then kills. It
// returns how long the graceful exit took and an error if it was not clean.
func (r *replica) stop(timeout time.Duration) (time.Duration, error) {
	if !r.running() {
		return 0, nil
	}
	at := time.Now()
	exit, err := r.proc.Stop(timeout)
	took := time.Since(at)
	if err != nil {
		return took, err
	}
	if exit.Code != 0 {
		return took, fmt.Errorf("%s %s after SIGTERM; last log lines:\n%s", r.id, exit, r.proc.Tail(15))
	}
	return took, nil
}

// kill ends the process group at once, as a crash, and waits for the reap.
func (r *replica) kill() { r.proc.Kill() }

// procStats are a live process's CPU time and its peak and current
// resident set.
type procStats struct {
	CPUSeconds float64
	PeakRSS    int64 // bytes (VmHWM)
	RSS        int64 // bytes (VmRSS)
}

func (r *replica) stats() (procStats, error) {
	pid := r.proc.Pid()
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
	out.PeakRSS, out.RSS = statusBytes(status, "VmHWM:"), statusBytes(status, "VmRSS:")
	return out, nil
}

// cpuSample is, at one moment, the machine's CPU time in clock ticks over
// every core (busy but for niced user time; niced user time; in all) and a
// fleet's processes' CPU seconds: two samples bound a window whose share of
// busy time says whether the run was bound by the CPU that the API server,
// etcd and the operators share.
type cpuSample struct{ busy, nice, total, fleet float64 }

// sampleCPU reads /proc/stat's first line and f's processes.
func sampleCPU(f *fleet) (cpuSample, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	busy, nice, total, err := parseProcStat(stat)
	if err != nil {
		return cpuSample{}, err
	}
	stats, err := f.stats()
	if err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{busy: busy, nice: nice, total: total}
	for _, st := range stats {
		s.fleet += st.CPUSeconds
	}
	return s, nil
}

// parseProcStat reads the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq and steal ticks (guest time is already counted
// in user). Idle and iowait are not busy; nice (user time of processes at a
// positive nice value) is returned apart from busy, so that a report can
// say how much of the load was niced background work; it takes the CPU
// from the run all the same (throughputResult.MachineBusy).
func parseProcStat(stat []byte) (busy, nice, total float64, err error) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, fmt.Errorf("unexpected first line of /proc/stat: %q", line)
	}
	var v [8]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i+1], 64); err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/stat field %d: %w", i+1, err)
		}
		total += v[i]
	}
	return total - v[1] - v[3] - v[4], v[1], total, nil
}

// statusBytes reads the field named by prefix (kB) from /proc/<pid>/status
// in bytes; 0 when it is absent.
func statusBytes(status []byte, prefix string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// heapStats is a replica's memory after a forced collection (its /heap).
type heapStats struct {
	// LiveHeap is the Go heap still allocated after the collection.
	LiveHeap int64 `json:"heap_alloc_bytes"`
	// RSS is the resident set once the freed pages went back to the
	// kernel (VmRSS read after the answer).
	RSS int64 `json:"-"`
}

// liveHeap asks the replica to collect garbage and return the freed memory
// to the kernel (its bench debug server's /heap) and reads what is left:
// figures that do not move with the collector's timing, as peak RSS does.
func (r *replica) liveHeap(ctx context.Context) (heapStats, error) {
	var h heapStats
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.debugAddr+"/heap", nil)
	// A collection over a large heap takes longer than a scrape.
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return h, fmt.Errorf("%s: live heap: %w", r.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("%s: live heap: %s", r.id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("%s: live heap: %w", r.id, err)
	}
	s, err := r.stats()
	h.RSS = s.RSS
	return h, err
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
// A histogram's name_count and name_sum read its sample count and sum, as
// in the text format.
func (m metrics) sum(name string, match map[string]string) float64 {
	mf, part := m[name], ""
	if mf == nil {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && m[base].GetType() == dto.MetricType_HISTOGRAM {
				mf, part = m[base], suffix
			}
		}
	}
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
		case part == "_count":
			total += float64(s.GetHistogram().GetSampleCount())
		case part == "_sum":
			total += s.GetHistogram().GetSampleSum()
		}
	}
	return total
}

// buildOperators builds the three operator binaries into dir, each in its
// own module: kshardop, the baseline and the adapter's crshardop.
func buildOperators(ctx context.Context, root, dir string) (kshardBin, baselineBin, adapterBin string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", "", "", fmt.Errorf("the go tool is needed to build the operators: %w", err)
	}
	kshardBin, baselineBin, adapterBin = filepath.Join(dir, "kshardop"), filepath.Join(dir, "baseline"), filepath.Join(dir, "crshardop")
	builds := []struct{ dir, out, pkg string }{
		{filepath.Join(root, "e2e", "bench", "kshardop"), kshardBin, "."},
		{filepath.Join(root, "e2e", "bench", "baseline"), baselineBin, "."},
		{filepath.Join(root, "e2e", "bench", "crshardop"), adapterBin, "."},
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
	return kshardBin, baselineBin, adapterBin, errors.Join(errs...)
}

// niceOf reads a process's nice value from its /proc/<pid>/stat (field
// 19 of the whole line).
func niceOf(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected stat line %q", stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 17 {
		return 0, fmt.Errorf("unexpected stat line %q", stat)
	}
	return strconv.Atoi(fields[16])
}

// warnIfNiced warns when the benchmark itself runs at a positive nice
// value: its operators, API server and etcd then count as background
// (niced) time.
func (b *bench) warnIfNiced() {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	if n, err := niceOf(stat); err == nil && n > 0 {
		b.warn("the benchmark ran at nice %d: its own processes' CPU counts as background_busy; run measured runs at nice 0 on a machine left alone", n)
	}
}
