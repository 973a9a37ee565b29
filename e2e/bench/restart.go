package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase 6: crash failover when the container is restarted in place, beside
// the lease-wait failover, over several kills of kshard replicas that run
// in Pod objects. There is no kubelet here, so the bench plays it with
// fixed delays: the pod's status shows the killed container terminated
// (its termination message, where the replica wrote its incarnation, as
// message) kubeletStatusDelay after the kill, and a new process starts
// kubeletRestartDelay after that. The lease-wait kills restart the process
// after the same 2 s but report nothing in the status, so the new
// incarnation (and the peers) must wait the Lease out.
const (
	kubeletStatusDelay  = time.Second
	kubeletRestartDelay = time.Second
)

// restartFailoverResult is the time from SIGKILL of a key's owner to that
// key's next reconcile, for kills restarted in place (proof of death) and
// for kills whose death is not reported (lease wait).
type restartFailoverResult struct {
	System           string    `json:"system"`
	Replicas         int       `json:"replicas"`
	Key              string    `json:"key"`
	InPlaceSeconds   []float64 `json:"in_place_seconds"`
	LeaseWaitSeconds []float64 `json:"lease_wait_seconds"`
	InPlaceP50       float64   `json:"in_place_p50_seconds"`
	InPlaceP99       float64   `json:"in_place_p99_seconds"`
	LeaseWaitP50     float64   `json:"lease_wait_p50_seconds"`
	LeaseWaitP99     float64   `json:"lease_wait_p99_seconds"`
}

// quantile is the nearest-rank quantile q of v (sorted in place).
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[max(0, int(math.Ceil(q*float64(len(v))))-1)]
}

// podsOf records what the bench's kubelet keeps of a fleet's pods.
type podsOf struct {
	uid      map[string]string // by identity
	term     map[string]string // by identity: the current process's termination message file
	restarts map[string]int32
}

// restartFailover runs kills kills of each kind, alternating, on a fleet
// of n kshard replicas in pods.
func (b *bench) restartFailover(ctx context.Context, sys *system, n, kills int) (res restartFailoverResult, err error) {
	res = restartFailoverResult{System: sys.name, Replicas: n, Key: objectName(0)}
	if err := b.ensureServiceAccount(ctx); err != nil {
		return res, err
	}
	f, err := b.startSettled(ctx, sys, "restart", n, fleetSpec{latency: b.p.HandoffLatency, withPods: true})
	if err != nil {
		return res, err
	}
	defer func() {
		f.kill()
		// The next system's fleet plays pods of the same names.
		if derr := b.deletePods(ctx, f); derr != nil && err == nil {
			err = derr
		}
	}()
	for i := range 2 * kills {
		inPlace := i%2 == 0
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := b.bumpGen(wctx, 0)
		if err == nil {
			err = b.obs.waitNoPending(wctx)
		}
		cancel()
		if err != nil {
			return res, err
		}
		b.obs.takeDelays()
		owner := b.obs.get(b.objectKey(0)).by
		r := f.replicas[owner]
		if r == nil {
			return res, fmt.Errorf("%s was reconciled by %q, not a replica of %s", res.Key, owner, f.name)
		}
		killed := time.Now()
		r.kill()
		if err := b.bumpGen(ctx, 0); err != nil {
			return res, err
		}
		time.Sleep(time.Until(killed.Add(kubeletStatusDelay))) // the kubelet's fixed delay, not a synchronisation
		if inPlace {
			msg, err := os.ReadFile(f.pods.term[owner])
			if err != nil {
				return res, err
			}
			if err := b.setPodStatus(ctx, f, owner, string(msg)); err != nil {
				return res, err
			}
		}
		time.Sleep(kubeletRestartDelay)
		if err := f.start(owner); err != nil {
			return res, err
		}
		fctx, cancel2 := context.WithTimeout(ctx, 3*b.p.LeaseDuration+30*time.Second)
		err = b.obs.waitNoPending(fctx)
		cancel2()
		if err != nil {
			return res, fmt.Errorf("%s restart failover: %w", sys.name, err)
		}
		ds := b.obs.takeDelays()
		if len(ds) != 1 {
			return res, fmt.Errorf("%s restart failover: %d delays recorded, want 1", sys.name, len(ds))
		}
		s := ds[0].sent.Add(ds[0].d).Sub(killed).Seconds()
		kind := "lease wait"
		if inPlace {
			res.InPlaceSeconds = append(res.InPlaceSeconds, s)
			kind = "restarted in place"
		} else {
			res.LeaseWaitSeconds = append(res.LeaseWaitSeconds, s)
		}
		progress("  %s killed (%s); %s reconciled again after %.2fs", owner, kind, res.Key, s)
		// The restarted replica rejoins (at once, or after its join wait); the next kill
		// starts from a settled ring.
		if err := f.waitReady(ctx, readiness{quiet: true}, b.p.ReadyTimeout); err != nil {
			return res, err
		}
	}
	res.InPlaceP50, res.InPlaceP99 = quantile(res.InPlaceSeconds, 0.5), quantile(res.InPlaceSeconds, 0.99)
	res.LeaseWaitP50, res.LeaseWaitP99 = quantile(res.LeaseWaitSeconds, 0.5), quantile(res.LeaseWaitSeconds, 0.99)
	if err := f.stopAll(); err != nil {
		b.warn("%s: %v", f.name, err)
	}
	return res, nil
}

// deletePods deletes f's pods at once: no kubelet here would confirm a
// graceful deletion.
func (b *bench) deletePods(ctx context.Context, f *fleet) error {
	var errs []error
	for id := range f.pods.uid {
		err := b.client.CoreV1().Pods(b.ns).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// ensureServiceAccount creates the namespace's default service account,
// which pod admission wants and no controller manager creates here.
func (b *bench) ensureServiceAccount(ctx context.Context) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: b.ns}}
	if _, err := b.client.CoreV1().ServiceAccounts(b.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// preparePod creates id's pod of fleet f if needed and a fresh termination
// message file for the process about to start; it returns the replica's
// extra arguments.
func (b *bench) preparePod(f *fleet, id string) ([]string, error) {
	if f.pods.uid == nil {
		f.pods = podsOf{uid: map[string]string{}, term: map[string]string{}, restarts: map[string]int32{}}
	}
	path := filepath.Join(b.dir, "termination", fmt.Sprintf("%s-%s-%d", f.name, id, time.Now().UnixNano()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		return nil, err
	}
	f.pods.term[id] = path
	name := id // the replica's identity (startReplica's --identity)
	if f.pods.uid[id] == "" {
		automount := false
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns},
			Spec: corev1.PodSpec{NodeName: "bench-node", AutomountServiceAccountToken: &automount,
				Containers: []corev1.Container{{Name: "operator", Image: "kshard.io/bench"}}},
		}
		created, err := b.client.CoreV1().Pods(b.ns).Create(context.Background(), pod, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", name, err)
		}
		f.pods.uid[id] = string(created.UID)
	}
	return []string{"--termination-message-path=" + path, "--pod-namespace=" + b.ns}, nil
}

// setPodStatus reports id's container terminated with message, as the
// kubelet does before restarting it, with the restart count it will have.
func (b *bench) setPodStatus(ctx context.Context, f *fleet, id, message string) error {
	name := id
	pods := b.client.CoreV1().Pods(b.ns)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	end := &corev1.ContainerStateTerminated{ExitCode: 137, Signal: 9, Reason: "Error", Message: message, FinishedAt: metav1.Now()}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operator", Image: "kshard.io/bench",
		RestartCount: f.pods.restarts[id], State: corev1.ContainerState{Terminated: end}}}
	f.pods.restarts[id]++
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
