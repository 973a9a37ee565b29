package chaos

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kshard/kshard/e2e/harness"
)

// inPlaceOptions are the harness options of the proof-of-death scenarios:
// pods with the harness as their kubelet, and the manager's default timings
// (LeaseDuration 10s), so that a failover that waited the Lease out stands
// apart from one the kubelet's word allowed.
var inPlaceOptions = harness.Options{Pods: true, LeaseDuration: 10 * time.Second, RenewDeadline: 6600 * time.Millisecond, RenewPeriod: 2 * time.Second}

// TestCrashRestartInPlace SIGKILLs replicas and restarts them in their pods
// as the kubelet does (status 1s after the kill, restart 1s later; see
// harness.CrashInPlace) while a writer keeps updating 300 ConfigMaps. The
// restarted replica proves its predecessor's death from the pod's status and
// takes its Lease over at once: the crashed process's partitions must be
// active elsewhere well before its Lease could have expired
// (LeaseDuration − RenewPeriod after the kill), with no overlap and no lost
// update.
func TestCrashRestartInPlace(t *testing.T) {
	scenario(t, "inplace", func(r *round) {
		h := r.harness(inPlaceOptions)
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(300), 40)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		var gaps []time.Duration
		for range 3 {
			r.pause(time.Second, 3*time.Second)
			live := h.Live()
			victim := live[r.rng.IntN(len(live))]
			exit, next := h.CrashInPlace(victim)
			r.faults++
			gap := awaitTakeover(r, h, exit, opts.LeaseDuration+takeoverTolerance)
			gaps = append(gaps, gap)
			r.t.Logf("SIGKILL %s, restarted in place as %s: its partitions active elsewhere %s after the kill", exit.Process, next.Process, gap.Round(time.Millisecond))
			if limit := opts.LeaseDuration - opts.RenewPeriod; gap >= limit {
				r.t.Errorf("failover from %s took %s, not less than LeaseDuration − RenewPeriod (%s): the kubelet's proof of death was not used", exit.Process, gap.Round(time.Millisecond), limit)
			}
			h.WaitReady(victim)
			text, err := os.ReadFile(next.LogPath)
			if err != nil {
				r.t.Fatal(err)
			}
			if !bytes.Contains(text, []byte(proofLogLine)) {
				r.t.Errorf("%s did not log the proof of its predecessor's death (%s)", next.Process, next.LogPath)
			}
			r.converge(h)
		}
		r.t.Logf("restart-in-place failovers (SIGKILL → partitions active elsewhere): %v", roundAll(gaps))
		r.finish(h, writer)
	})
}

// TestForceDeletedPodWaitsTheLease: the node of a replica is lost; its
// process dies, the pod garbage collector force-deletes the pod before any
// kubelet reported anything, the StatefulSet controller creates the pod
// again (new UID) and a new process starts in it. A pod that is gone proves
// nothing (its containers might still run on the lost node), so the new
// incarnation and the peers wait the Lease out: the process's partitions
// may move only after LeaseDuration − RenewPeriod from the kill.
func TestForceDeletedPodWaitsTheLease(t *testing.T) {
	scenario(t, "forcedelete", func(r *round) {
		h := r.harness(inPlaceOptions)
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(100), 20)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		r.pause(time.Second, 3*time.Second)
		victim := ids[r.rng.IntN(len(ids))]
		oldPod := h.PodUID(victim)
		exit := h.Kill(victim)
		r.faults++
		h.ForceDeletePod(victim)
		time.Sleep(time.Until(exit.Signalled.Add(harness.KubeletStatusDelay + harness.KubeletRestartDelay))) // the recreated pod's start, as in CrashInPlace
		next := h.Start(victim)
		r.t.Logf("SIGKILL %s, pod %s force-deleted and recreated as %s, new process %s", exit.Process, oldPod, h.PodUID(victim), next.Process)
		gap := awaitTakeover(r, h, exit, opts.LeaseDuration+takeoverTolerance)
		r.t.Logf("%s's partitions active elsewhere %s after the kill", exit.Process, gap.Round(time.Millisecond))
		// The victim's last renew before the kill was sent at most
		// RenewPeriod earlier, or one more period with a retry under load.
		if limit := opts.LeaseDuration - 2*opts.RenewPeriod; gap < limit {
			r.t.Errorf("failover from %s took %s, less than LeaseDuration − 2×RenewPeriod (%s): a gone pod was taken for proof of death", exit.Process, gap.Round(time.Millisecond), limit)
		}
		h.WaitReady(victim)
		// And no replica logged a proof: the kubelet said nothing.
		logs, err := filepath.Glob(filepath.Join(filepath.Dir(next.LogPath), "*.log"))
		if err != nil || len(logs) < len(ids)+1 {
			r.t.Fatalf("replica logs: %v (%d found)", err, len(logs))
		}
		for _, path := range logs {
			text, err := os.ReadFile(path)
			if err != nil {
				r.t.Fatal(err)
			}
			if bytes.Contains(text, []byte(proofLogLine)) {
				r.t.Errorf("%s logged a proof of death although no kubelet reported one", path)
			}
		}
		r.converge(h)
		r.finish(h, writer)
	})
}

// TestCrashedPodProvenByPeers: a replica is SIGKILLed and its kubelet
// reports the container terminated (1s later) but does not restart it (a
// crash-loop back-off, say). The peers, after RenewDeadline/2 of silence,
// read its pod, find the kubelet's word and void its claims: its
// partitions move well before its Lease could have expired.
func TestCrashedPodProvenByPeers(t *testing.T) {
	scenario(t, "provenbypeers", func(r *round) {
		h := r.harness(inPlaceOptions)
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(100), 20)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		r.pause(time.Second, 3*time.Second)
		victim := ids[r.rng.IntN(len(ids))]
		exit, _ := h.CrashReported(victim)
		r.faults++
		gap := awaitTakeover(r, h, exit, opts.LeaseDuration+takeoverTolerance)
		r.t.Logf("SIGKILL %s, reported terminated, not restarted: its partitions active elsewhere %s after the kill", exit.Process, gap.Round(time.Millisecond))
		if limit := opts.LeaseDuration - opts.RenewPeriod; gap >= limit {
			r.t.Errorf("failover from %s took %s, not less than LeaseDuration − RenewPeriod (%s): the peers did not use the kubelet's proof", exit.Process, gap.Round(time.Millisecond), limit)
		}
		h.StartReady(victim)
		r.converge(h)
		r.finish(h, writer)
	})
}

// proofLogLine is what the manager logs when a proof of death voids a
// Lease (shard/ring/proof.go).
const proofLogLine = "the kubelet reports the process terminated"

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
