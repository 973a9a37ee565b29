package chaos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kshard/kshard/e2e/harness"
	"github.com/kshard/kshard/internal/recorder"
	"github.com/kshard/kshard/manager/kshardtest"
)

// schedulingSlack is what a fence may exceed RenewDeadline by: the
// coordinator's wake-up after the deadline and the record write, on a
// machine whose two cores other tests share.
const schedulingSlack = 500 * time.Millisecond

// outage is how long the API server stays down.
const outage = 30 * time.Second

// TestAPIServerOutage stops the API server for 30s while three replicas run.
// Every replica must fence (stop all reconciles) within RenewDeadline of its
// last renewal, which was sent before the server stopped, and be drained
// before its Lease could expire; once the server is back the ring must
// recover and every update be reconciled.
func TestAPIServerOutage(t *testing.T) {
	scenario(t, "outage", func(r *round) {
		h := r.harness(harness.Options{})
		opts := h.Options()
		writer := h.StartWriter(h.CreateConfigMaps(100), 20)
		ids := identities(3)
		r.startFleet(h, ids...)
		r.converge(h)
		r.pause(0, 3*time.Second)
		// Again after the pause: on a loaded machine a stalled API server
		// can fence every replica meanwhile (no fault of the test's), and
		// a replica that holds nothing when the outage begins has nothing
		// to fence.
		r.converge(h)

		procs := make([]recorder.Process, len(ids))
		for i, id := range ids {
			procs[i] = h.Replica(id).Process
		}
		probe := startProber(h.Client(), opts.Namespace)
		defer probe.stop()
		// A round that fails during the outage must not leave the server
		// down for the next rounds, which share the control plane.
		serverBack := false
		r.t.Cleanup(func() {
			if serverBack {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := r.cp.StartAPIServer(ctx); err != nil {
				r.t.Errorf("restarting the API server after a failed round: %v", err)
			}
		})
		began := time.Now()
		// Stopped gracefully (requests drained, GOAWAY on open connections)
		// or killed outright, at random.
		if r.rng.IntN(2) == 0 {
			r.cp.StopAPIServer()
			r.t.Logf("API server stopped gracefully (took %s)", time.Since(began).Round(time.Millisecond))
		} else {
			r.cp.KillAPIServer()
			r.t.Logf("API server killed")
		}
		r.faults++

		fences := make([]fence, len(procs))
		h.Await(opts.LeaseDuration+takeoverTolerance, "every replica fenced", func() error {
			log := h.Log()
			var errs []error
			for i, p := range procs {
				var err error
				if fences[i], err = fenceOf(log, p, began); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		})
		// The replicas' last successful renewals were sent before the API
		// server stopped answering, which the probe saw on a long-lived
		// connection like theirs.
		lastOK, cut := probe.stop()
		if cut.IsZero() {
			r.t.Fatal("the probe never saw the API server fail; the outage did not happen")
		}
		r.t.Logf("API server last answered a request sent %s after the stop began, and failed one sent %s after", lastOK.Sub(began).Round(time.Millisecond), cut.Sub(began).Round(time.Millisecond))
		for i, f := range fences {
			r.t.Logf("%s fenced %d partitions: revoke %s and drained %s after the server stopped answering",
				procs[i], len(f.held), f.began.Sub(cut).Round(time.Millisecond), f.drained.Sub(cut).Round(time.Millisecond))
			if limit := cut.Add(opts.RenewDeadline + schedulingSlack); f.began.After(limit) {
				r.t.Errorf("%s began fencing %s after the API server stopped answering, later than RenewDeadline %s (+%s slack)", procs[i], f.began.Sub(cut), opts.RenewDeadline, schedulingSlack)
			}
			if limit := cut.Add(opts.LeaseDuration); f.drained.After(limit) {
				r.t.Errorf("%s drained %s after the API server stopped answering, later than LeaseDuration %s: peers could have judged it expired while it reconciled", procs[i], f.drained.Sub(cut), opts.LeaseDuration)
			}
		}

		until(began.Add(outage))
		if live := h.Live(); len(live) != len(ids) {
			r.t.Errorf("replicas running after the outage: %v, want all of %v: a fence must stop work, not the process", live, ids)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := r.cp.StartAPIServer(ctx); err != nil {
			r.t.Fatalf("restarting the API server: %v", err)
		}
		serverBack = true
		back := time.Now()
		r.t.Logf("API server back after %s", back.Sub(began).Round(time.Millisecond))
		// Until the informers' backoff lets them list again.
		h.RecordFault("API server outage", began, back.Add(kshardtest.InformerRecovery(back.Sub(began))))
		for _, id := range h.Live() {
			h.WaitReady(id)
		}
		ring := r.converge(h)
		r.t.Logf("recovered %s after the server came back: %s", time.Since(back).Round(time.Millisecond), ring)
		r.finish(h, writer)
	})
}

// prober polls the API server every probeInterval over the admin client's
// long-lived connection, as a replica renews over its own, and notes when
// it stopped answering.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex // guards lastOK and firstFail
	lastOK    time.Time  // send time of the last request answered
	firstFail time.Time  // send time of the first failed request after lastOK
}

const probeInterval = 20 * time.Millisecond

func startProber(client kubernetes.Interface, namespace string) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		ticker := time.NewTicker(probeInterval)
		defer ticker.Stop()
		for {
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, 250*time.Millisecond)
			_, err := client.CoreV1().Namespaces().Get(rctx, namespace, metav1.GetOptions{})
			rcancel()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			if err == nil {
				p.lastOK, p.firstFail = sent, time.Time{}
			} else if p.firstFail.IsZero() {
				p.firstFail = sent
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return p
}

// stop ends the probe (idempotent) and returns the send times of the last
// answered request and of the first failed one after it (zero if none).
func (p *prober) stop() (lastOK, firstFail time.Time) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastOK, p.firstFail
}
