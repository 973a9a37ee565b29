package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The control plane runs no kubelet, so with Options.Pods the harness plays
// one: every identity gets a Pod object, and each process gets a termination
// message file of its own, whose content the harness copies into the pod's
// status when the process ends, as the kubelet does with a container's
// terminationMessagePath.
//
// Crash and restart in place (CrashInPlace) follows the kubelet's order with
// fixed delays: SIGKILL; KubeletStatusDelay later the status shows the
// container terminated (its ID, exit code 137, the file's content as
// message); KubeletRestartDelay after that a new process starts in the same
// pod, and the status shows the new container running, the previous one in
// lastState and the restart count up by one. (The kubelet's first restart is
// immediate, later ones back off.) The delays are the medians measured on a
// real kubelet v1.36.3 with containerd v2.4.2 (make kubelet-e2e, 24 first
// crashes, 2026-12-06): the terminated status 0.41 / 1.02 / 1.85 s after the
// SIGKILL (min / median / max), the new process 0.13 / 0.23 / 0.85 s after
// that status; the order and the status's format (exit 137, reason Error,
// the termination message, the old containerd:// ID in lastState) match.
const (
	KubeletStatusDelay  = time.Second
	KubeletRestartDelay = 250 * time.Millisecond
)

// podContainer is the name of the one container of every test pod.
const podContainer = "operator"

// podState is what the harness's kubelet remembers of an identity's pod.
type podState struct {
	uid      string
	restarts int32
	last     *corev1.ContainerStateTerminated // the previous container's end, nil before the first
}

// terminationPath is the termination message file of one run.
func (h *Harness) terminationPath(identity, incarnation string) string {
	return filepath.Join(h.dir, "termination", identity+"-"+incarnation)
}

// preparePod makes sure identity's Pod exists and creates the run's empty
// termination message file (the kubelet mounts one per container). It
// returns the extra argument for the replica.
func (h *Harness) preparePod(identity, incarnation string) []string {
	h.t.Helper()
	path := h.terminationPath(identity, incarnation)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	st := h.pods[identity]
	h.mu.Unlock()
	if st == nil {
		st = h.createPod(identity)
	}
	return []string{"--termination-message-path=" + path}
}

// createPod creates identity's Pod (as the StatefulSet controller would) and
// records its UID.
func (h *Harness) createPod(identity string) *podState {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: identity, Namespace: h.opts.Namespace},
		Spec: corev1.PodSpec{
			// Never scheduled (there is no scheduler): the harness plays
			// the kubelet of a node of this name.
			NodeName:   "harness-node",
			Containers: []corev1.Container{{Name: podContainer, Image: "kshard.io/testoperator"}},
		},
	}
	// Admission wants the pod's service account to exist; without a
	// controller manager nobody creates "default".
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: h.opts.Namespace}}
	if _, err := h.client.CoreV1().ServiceAccounts(h.opts.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatalf("creating the default service account for pod %s: %v", identity, err)
	}
	automount := false
	pod.Spec.AutomountServiceAccountToken = &automount
	created, err := h.client.CoreV1().Pods(h.opts.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating pod %s: %v", identity, err)
	}
	st := &podState{uid: string(created.UID)}
	h.mu.Lock()
	h.pods[identity] = st
	h.mu.Unlock()
	return st
}

// PodUID returns the UID of identity's current Pod ("" without one).
func (h *Harness) PodUID(identity string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.pods[identity]; st != nil {
		return st.uid
	}
	return ""
}

// containerID is the ID the harness's kubelet gives a run's container.
func containerID(r *Replica) string { return "harness://" + r.Identity + "-" + r.Process.Incarnation }

// setStatus writes identity's pod status: running is the current run (nil:
// none), terminated its end (nil while it runs).
func (h *Harness) setStatus(identity string, running *Replica, terminated *corev1.ContainerStateTerminated) {
	h.t.Helper()
	h.mu.Lock()
	st := h.pods[identity]
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := h.client.CoreV1().Pods(h.opts.Namespace)
	pod, err := pods.Get(ctx, identity, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("reading pod %s for its status: %v", identity, err)
	}
	cs := corev1.ContainerStatus{Name: podContainer, Image: "kshard.io/testoperator", RestartCount: st.restarts}
	if st.last != nil {
		cs.LastTerminationState.Terminated = st.last.DeepCopy()
	}
	switch {
	case terminated != nil:
		cs.State.Terminated = terminated
		cs.ContainerID = terminated.ContainerID
	case running != nil:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
		cs.ContainerID = containerID(running)
		t := true
		cs.Started = &t
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("writing pod %s's status: %v", identity, err)
	}
}

// CrashInPlace kills identity's process and plays the kubelet restarting it
// in place (see KubeletStatusDelay): it returns the kill's Exit and the new
// run once the pod's status shows it running.
func (h *Harness) CrashInPlace(identity string) (Exit, *Replica) {
	h.t.Helper()
	if !h.opts.Pods {
		h.t.Fatal("CrashInPlace needs Options.Pods")
	}
	exit, end := h.CrashReported(identity)
	time.Sleep(KubeletRestartDelay)
	h.mu.Lock()
	st := h.pods[identity]
	st.last, st.restarts = end, st.restarts+1
	h.mu.Unlock()
	next := h.Start(identity)
	h.setStatus(identity, next, nil)
	return exit, next
}

// CrashReported kills identity's process and, KubeletStatusDelay later,
// reports its container terminated in the pod's status (exit code 137, the
// termination message file's content as message), not restarting it (yet).
func (h *Harness) CrashReported(identity string) (Exit, *corev1.ContainerStateTerminated) {
	h.t.Helper()
	if !h.opts.Pods {
		h.t.Fatal("CrashReported needs Options.Pods")
	}
	old := h.mustRunning("crash", identity)
	exit := h.Kill(identity)
	time.Sleep(time.Until(exit.Signalled.Add(KubeletStatusDelay))) // the kubelet's fixed delay, not a synchronisation
	msg, err := os.ReadFile(h.terminationPath(identity, old.Process.Incarnation))
	if err != nil {
		h.t.Fatalf("reading %s's termination message: %v", identity, err)
	}
	end := &corev1.ContainerStateTerminated{
		ExitCode: 137, Signal: 9, Reason: "Error", Message: string(msg),
		StartedAt: metav1.Now(), FinishedAt: metav1.NewTime(exit.Exited), ContainerID: containerID(old),
	}
	h.setStatus(identity, nil, end)
	return exit, end
}

// ForceDeletePod deletes identity's Pod with no grace period, as `kubectl
// delete --force` or the pod garbage collector after a node is lost does,
// whatever its process is doing, and creates it again as the StatefulSet
// controller would, under a new UID. The kubelet never reports on the
// deleted pod.
func (h *Harness) ForceDeletePod(identity string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	zero := int64(0)
	err := h.client.CoreV1().Pods(h.opts.Namespace).Delete(ctx, identity, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("force-deleting pod %s: %v", identity, err)
	}
	h.Await(10*time.Second, "pod "+identity+" gone", func() error {
		_, err := h.client.CoreV1().Pods(h.opts.Namespace).Get(ctx, identity, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	h.mu.Lock()
	delete(h.pods, identity)
	h.mu.Unlock()
	h.createPod(identity)
}
