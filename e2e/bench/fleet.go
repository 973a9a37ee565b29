package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kshard/kshard/shard"
)

// fleet is the replicas of one system in one scenario, sharing a ring (or
// leader election Lease) name of their own.
type fleet struct {
	b        *bench
	sys      *system
	name     string
	latency  time.Duration
	workers  int
	ids      []string
	replicas map[string]*replica
	// withPods runs each replica in a Pod object whose kubelet the bench
	// plays (phase 6, restart.go).
	withPods bool
	pods     podsOf
	// gone sums fleetCounters as last read from the processes restart
	// stopped (counters).
	gone map[string]float64
	// partitions is the ring's partition count (kshard; default
	// shard.DefaultPartitions).
	partitions int
}

// fleetCounters are the kshard counters counters sums over every process
// a fleet has run.
var fleetCounters = []string{
	"kshard_cache_listed_objects_total", "kshard_handoff_seconds_count", "kshard_fences_total",
	"kshard_coordinator_step_seconds_count", "kshard_coordinator_step_seconds_sum",
	"kshard_cache_label_patches_total", "kshard_cache_confirm_reads_total",
}

// counters sums fleetCounters over the live processes and the last reading
// of those restart stopped: what the fleet's processes did so far.
func (f *fleet) counters(ctx context.Context) (map[string]float64, error) {
	total := maps.Clone(f.gone)
	if total == nil {
		total = map[string]float64{}
	}
	for _, r := range f.live() {
		if err := f.addCounters(ctx, r, total); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func (f *fleet) addCounters(ctx context.Context, r *replica, into map[string]float64) error {
	m, err := scrape(ctx, r.metricsAddr)
	if err != nil {
		return err
	}
	for _, name := range fleetCounters {
		into[name] += m.sum(name, nil)
	}
	return nil
}

// partitionStates says, for each live replica, how many partitions it has
// in each state (kshard_partitions): what a run that timed out waiting for
// reconciles reports, so that a partition that never activated shows.
func (f *fleet) partitionStates(ctx context.Context) string {
	states := []string{"target", "claimed", "active", "caching", "blocked", "draining", "handing_over"}
	var out []string
	for _, r := range f.live() {
		m, err := scrape(ctx, r.metricsAddr)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r.id, err))
			continue
		}
		var counts []string
		for _, state := range states {
			counts = append(counts, fmt.Sprintf("%s %.0f", state, m.sum("kshard_partitions", map[string]string{"state": state})))
		}
		out = append(out, r.id+": "+strings.Join(counts, ", "))
	}
	return "partitions by state: " + strings.Join(out, "; ")
}

// fleetSpec is how a fleet's replicas reconcile: the simulated latency,
// the workers per replica (0: params.Workers) and whether each runs in a
// Pod object (phase 6).
type fleetSpec struct {
	latency  time.Duration
	workers  int
	withPods bool
}

// newFleet is an empty fleet of sys named after scenario.
func (b *bench) newFleet(sys *system, scenario string, spec fleetSpec) *fleet {
	return &fleet{b: b, sys: sys, name: fmt.Sprintf("%s-%s", sys.short, scenario), latency: spec.latency,
		workers: cmp.Or(spec.workers, b.p.Workers), withPods: spec.withPods, replicas: map[string]*replica{}}
}

// startFleet starts n replicas of sys, one after the other, as spec says.
func (b *bench) startFleet(sys *system, scenario string, n int, spec fleetSpec) (*fleet, error) {
	f := b.newFleet(sys, scenario, spec)
	for i := range n {
		id := fmt.Sprintf("r-%d", i)
		f.ids = append(f.ids, id)
		if err := f.start(id); err != nil {
			f.kill()
			return nil, err
		}
	}
	return f, nil
}

// startFleetTogether starts n replicas of sys at once, as the pods of a
// StatefulSet with podManagementPolicy Parallel (deploy/statefulset.yaml) or
// of a Deployment start, rather than one after the other as startFleet does.
func (b *bench) startFleetTogether(sys *system, scenario string, n int) (*fleet, error) {
	f := b.newFleet(sys, scenario, fleetSpec{})
	started := make([]*replica, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("r-%d", i)
		f.ids = append(f.ids, id)
		wg.Go(func() { started[i], errs[i] = f.launch(id) })
	}
	wg.Wait()
	for i, r := range started {
		if r != nil {
			f.replicas[f.ids[i]] = r
		}
	}
	if err := errors.Join(errs...); err != nil {
		f.kill()
		return nil, err
	}
	return f, nil
}

func (f *fleet) start(id string) error {
	r, err := f.launch(id)
	if err != nil {
		return err
	}
	f.replicas[id] = r
	return nil
}

// launch starts replica id and waits until it serves its metrics and
// probes.
func (f *fleet) launch(id string) (*replica, error) {
	p := f.b.p
	ring := f.name
	if f.sys.kshard && f.b.ring != "" {
		ring = f.b.ring
	}
	args := []string{
		"--kubeconfig=" + f.b.cp.KubeconfigPath(),
		"--name=" + ring,
		"--namespace=" + f.b.ns,
		"--latency=" + f.latency.String(),
		"--workers=" + strconv.Itoa(f.workers),
		"--qps=" + strconv.FormatFloat(p.QPS, 'f', -1, 64),
		"--burst=" + strconv.Itoa(p.Burst),
		"--lease-duration=" + p.LeaseDuration.String(),
		"--renew-deadline=" + p.RenewDeadline.String(),
		"--renew-period=" + p.RenewPeriod.String(),
		"--drain-grace=" + p.DrainGrace.String(),
	}
	args = append(args, f.b.fleetArgs...)
	if f.withPods {
		extra, err := f.b.preparePod(f, id)
		if err != nil {
			return nil, err
		}
		args = append(args, extra...)
	}
	logPath := filepath.Join(f.b.dir, "logs", fmt.Sprintf("%s-%s-%d.log", f.name, id, time.Now().UnixNano()))
	return startReplica(context.Background(), id, f.sys.bin, logPath, args)
}

// stopAll stops every replica at once, gracefully.
func (f *fleet) stopAll() error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.ids))
	for i, id := range f.ids {
		r := f.replicas[id]
		wg.Go(func() { _, errs[i] = r.stop(f.b.p.StopTimeout) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// kill kills every replica; for cleanup after a failure.
func (f *fleet) kill() {
	for _, r := range f.replicas {
		r.kill()
	}
}

func (f *fleet) live() []*replica {
	var out []*replica
	for _, id := range f.ids {
		if r := f.replicas[id]; r != nil && r.running() {
			out = append(out, r)
		}
	}
	return out
}

// readiness says what waitReady waits for beyond the system being formed
// (kshard: every live replica active in a ring of all of them, all
// partitions active; controller-runtime: one live leader).
type readiness struct {
	// minReconciles is the least sum of reconciles the live replicas must
	// have done (the initial pass over every object).
	minReconciles float64
	// leaderWarm (controller-runtime) also waits until the leader itself
	// has reconciled at least that many times, so that a new leader counts
	// only once its controller has started and gone through its initial
	// list, as a kshard partition counts only once active.
	leaderWarm float64
	// quiet also waits for empty queues (and, for kshard, replay
	// backlogs), idle workers and no reconcile between two polls.
	quiet bool
	// poll is the interval between polls (default 100ms).
	poll time.Duration
}

// waitReady polls the live replicas until the fleet is formed as r asks. It
// fails when a replica exits or the timeout passes, saying what was missing.
func (f *fleet) waitReady(ctx context.Context, rd readiness, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if rd.poll == 0 {
		rd.poll = 100 * time.Millisecond
	}
	tick := time.NewTicker(rd.poll)
	defer tick.Stop()
	prevTotal := -1.0
	var why string
	lastSaid := time.Now()
	for {
		live := f.live()
		if len(live) != len(f.ids) {
			for _, id := range f.ids {
				if r := f.replicas[id]; !r.running() {
					exit, _ := r.proc.Exited()
					return fmt.Errorf("%s %s %s; last log lines:\n%s", f.name, id, exit, r.proc.Tail(20))
				}
			}
		}
		now := f.check(ctx, live, rd, &prevTotal)
		if now == "" {
			return nil
		}
		if ctx.Err() == nil {
			why = now
		}
		if time.Since(lastSaid) > 10*time.Second {
			progress("  %s not formed yet: %s", f.name, why)
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %s", f.name, timeout, why)
		case <-tick.C:
		}
	}
}

// check returns "" when the fleet is ready, else what is missing.
func (f *fleet) check(ctx context.Context, live []*replica, rd readiness, prevTotal *float64) string {
	var depth, active, total, activeParts, leaders, leaderTotal float64
	for _, r := range live {
		if !r.ready(ctx) {
			return r.id + " not ready"
		}
		m, err := scrape(ctx, r.metricsAddr)
		if err != nil {
			return err.Error()
		}
		depth += m.sum("workqueue_depth", nil) + m.sum("kshard_replay_backlog", nil)
		active += m.sum("controller_runtime_active_workers", nil)
		total += m.sum("controller_runtime_reconcile_total", nil)
		if f.sys.kshard {
			if got := m.sum("kshard_ring_members", nil); int(got) != len(live) {
				return fmt.Sprintf("%s sees %v ring members, want %d", r.id, got, len(live))
			}
			part := func(state string) float64 { return m.sum("kshard_partitions", map[string]string{"state": state}) }
			if act, tgt := part("active"), part("target"); act != tgt || part("blocked") != 0 || part("draining") != 0 {
				return fmt.Sprintf("%s is rebalancing (target %v, active %v, blocked %v, draining %v)", r.id, tgt, act, part("blocked"), part("draining"))
			}
			// A balanced ring places partitions by their object counts:
			// formed once every partition's is known, and the moves it
			// made are done (above).
			if f.balanced() {
				if got := m.sum("kshard_ring_weighed_partitions", nil); int(got) != f.partitionCount() {
					return fmt.Sprintf("%s knows the object counts of %v of %d partitions", r.id, got, f.partitionCount())
				}
			}
			activeParts += part("active")
		} else {
			if m.sum("leader_election_master_status", nil) > 0 {
				leaders++
				leaderTotal += m.sum("controller_runtime_reconcile_total", nil)
			}
		}
	}
	switch {
	case f.sys.kshard && int(activeParts) != f.partitionCount():
		return fmt.Sprintf("%v of %d partitions active", activeParts, f.partitionCount())
	case !f.sys.kshard && leaders != 1:
		return fmt.Sprintf("%v leaders", leaders)
	case !f.sys.kshard && leaderTotal < rd.leaderWarm:
		return fmt.Sprintf("the leader has done %v of %v initial reconciles", leaderTotal, rd.leaderWarm)
	case total < rd.minReconciles:
		return fmt.Sprintf("%v of at least %v initial reconciles done", total, rd.minReconciles)
	}
	if rd.quiet {
		prev := *prevTotal
		*prevTotal = total
		if depth != 0 || active != 0 || total != prev {
			return fmt.Sprintf("still working (queue depth %v, active workers %v, reconciles %v)", depth, active, total)
		}
	}
	return ""
}

// restart stops id gracefully, starts it again and waits for the fleet to
// be formed again; it returns how long the graceful stop took.
func (f *fleet) restart(ctx context.Context, id string) (time.Duration, error) {
	if f.sys.kshard {
		// Read last: the process leaves the ring and does nothing more
		// that counts.
		if f.gone == nil {
			f.gone = map[string]float64{}
		}
		if err := f.addCounters(ctx, f.replicas[id], f.gone); err != nil {
			return 0, err
		}
	}
	took, err := f.replicas[id].stop(f.b.p.StopTimeout)
	if err != nil {
		return took, err
	}
	if err := f.start(id); err != nil {
		return took, err
	}
	return took, f.waitReady(ctx, readiness{leaderWarm: float64(len(f.b.gens))}, f.b.p.ReadyTimeout)
}

// balanced reports whether the replicas run a balanced ring (--balance).
func (f *fleet) balanced() bool {
	return f.sys.kshard && slices.ContainsFunc(f.b.fleetArgs, func(a string) bool {
		return strings.HasPrefix(a, "--balance=") && a != "--balance=0"
	})
}

func (f *fleet) partitionCount() int {
	if f.partitions == 0 {
		return shard.DefaultPartitions
	}
	return f.partitions
}

// stats reads every live replica's CPU time and peak RSS.
func (f *fleet) stats() (map[string]procStats, error) {
	out := map[string]procStats{}
	for _, r := range f.live() {
		s, err := r.stats()
		if err != nil {
			return nil, err
		}
		out[r.id] = s
	}
	return out, nil
}
