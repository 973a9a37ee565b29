package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/internal/testwait"
)

// fenceExitMessage is what the manager logs (shard/ring/coordinator.go)
// before it exits with code 1 because reconciles of a fenced replica were still
// running at the stop deadline: its designed answer to renewals that stall
// for longer than RenewDeadline, which an overloaded machine can cause
// without any injected fault.
const fenceExitMessage = "reconciles of a fenced replica are still running at the stop deadline"

// maxReplicas bounds the identities a scenario uses (r-0…r-5).
const maxReplicas = 6

// revive restarts, as a StatefulSet would, every replica that exited by
// itself after a fence (see fenceExitMessage), and fails the round on any
// other exit the scenario did not cause. The records of a fence exit stay
// checked like any other: its abandoned reconciles end at the exit, and
// their windows must not overlap a peer's.
func (r *round) revive(h *harness.Harness) {
	r.t.Helper()
	for i := range maxReplicas {
		id := harness.Identity(i)
		rep := h.Replica(id)
		if rep == nil {
			continue
		}
		exit, done := rep.Exited()
		if !done || !exit.Signalled.IsZero() {
			continue
		}
		logText, err := os.ReadFile(rep.LogPath)
		if err != nil {
			r.t.Fatal(err)
		}
		if (exit.Code != 1 || !bytes.Contains(logText, []byte(fenceExitMessage))) && r.restartAnyExit {
			if r.selfExits == nil {
				r.selfExits = map[recorder.Process]int{}
			}
			// Back off as a kubelet does for a crash loop: one more second
			// per earlier self-exit of this identity, up to five.
			earlier := 0
			for p := range r.selfExits {
				if p.Replica == id && p != exit.Process {
					earlier++
				}
			}
			r.selfExits[exit.Process] = exit.Code
			if time.Since(exit.Exited) < time.Duration(min(earlier, 5))*time.Second {
				continue
			}
			r.t.Logf("%s exited by itself with code %d (log %s); restarting it as a StatefulSet would", exit.Process, exit.Code, rep.LogPath)
			h.Start(id)
			continue
		}
		if exit.Code != 1 || !bytes.Contains(logText, []byte(fenceExitMessage)) {
			r.t.Fatalf("%s exited by itself with code %d, and not after a fence; its log is %s", exit.Process, exit.Code, rep.LogPath)
		}
		if r.fenceExits == nil {
			r.fenceExits = map[recorder.Process]bool{}
		}
		r.fenceExits[exit.Process] = true
		r.t.Logf("%s exited after a fence whose reconciles outlived the stop deadline (its renewals stalled); restarting it", exit.Process)
		h.Start(id)
	}
}

// crashLooping reports whether identity has exited by itself (not after a
// fence) in this round.
func (r *round) crashLooping(identity string) bool {
	for p := range r.selfExits {
		if p.Replica == identity {
			return true
		}
	}
	return false
}

// converge waits until the ring has converged on the live replicas,
// reviving fence exits meanwhile, and returns the ring. The round's first
// convergence also checks that the replicas cache as its setup says.
func (r *round) converge(h *harness.Harness) harness.Ring {
	r.t.Helper()
	var ring harness.Ring
	err := testwait.Poll(100*time.Millisecond, convergeTimeout, func() error {
		r.revive(h)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		ring, err = h.Converged(ctx)
		return err
	})
	if err != nil {
		msg := fmt.Sprintf("ring convergence on %v: %v", h.Live(), err)
		h.Diagnose(msg)
		r.t.Fatal(msg)
	}
	if !r.modeChecked {
		r.checkCacheMode(h)
		r.modeChecked = true
	}
	return ring
}

// stop sends SIGTERM to identity as h.Stop does, first reviving it if a
// fence exit beat the scenario to it.
func (r *round) stop(h *harness.Harness, identity string) harness.Exit {
	r.t.Helper()
	r.revive(h)
	return h.Stop(identity)
}

// kill sends SIGKILL to identity as h.Kill does, first reviving it if a
// fence exit beat the scenario to it.
func (r *round) kill(h *harness.Harness, identity string) harness.Exit {
	r.t.Helper()
	r.revive(h)
	return h.Kill(identity)
}

// checkCacheMode fails the round unless every live replica reports the
// ConfigMaps cached in its setup's mode (/readyz?verbose): a replica that
// fell back to a full cache would pass every other check while testing
// nothing of the sharded cache.
func (r *round) checkCacheMode(h *harness.Harness) {
	r.t.Helper()
	mode := r.setup.kindMode()
	if mode == "" {
		return
	}
	want := "/v1, Kind=ConfigMap " + mode
	for _, id := range h.Live() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := h.Readyz(ctx, id)
		cancel()
		if err != nil {
			r.t.Fatalf("reading %s's cache mode: %v", id, err)
		}
		if !strings.Contains(got, want+";") && !strings.Contains(got, want+"\n") {
			r.t.Fatalf("%s does not cache ConfigMaps in mode %s; its /readyz?verbose says:\n%s", id, mode, got)
		}
	}
	r.t.Logf("every replica caches ConfigMaps in mode %s", mode)
}
