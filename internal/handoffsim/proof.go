package handoffsim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/internal/handoff"
)

// Pods and their kubelets, for proofs of death (internal/handoff's proof.go):
// every process runs in the pod of its identity and records the pod's UID
// in its Lease; when a process ends, the kubelet reports its container
// terminated (with the incarnation's termination-message marker) in that
// pod's status after a delay, unless the pod was removed first. A force
// delete (or the pod garbage collector, after a node is lost) removes the
// pod while its process may still run; the StatefulSet controller creates
// it again under a new UID. A shell answers Ready.ProveDeath by reading the
// pod: the built-in one reads the world's pods directly, an external one
// through Process.GetPod. Either way, a proof handed to a core for a process
// that still runs fails the seed (checkProofs).

// simPod is the current pod object of one identity.
type simPod struct {
	uid string
	// ended holds the incarnations whose container the kubelet reports
	// terminated in this pod's status.
	ended map[string]bool
}

// simKubelet holds the pods of the world, by identity.
type simKubelet struct {
	pods         map[string]*simPod
	uids         int
	reported     int // terminations the kubelets reported
	forceDeletes int // pods removed while, or before the kubelet reported that, their process ended
}

// podOf returns the UID of identity's pod, creating the pod if needed.
func (k *simKubelet) podOf(identity string) string {
	if k.pods == nil {
		k.pods = map[string]*simPod{}
	}
	pod := k.pods[identity]
	if pod == nil {
		k.uids++
		pod = &simPod{uid: "pod-uid-" + strconv.Itoa(k.uids), ended: map[string]bool{}}
		k.pods[identity] = pod
	}
	return pod.uid
}

// forceDelete removes identity's pod without its kubelet's word (a force
// delete, or the pod GC after a node is lost); it comes back with a new UID.
func (w *world) forceDelete(identity string) {
	k := &w.kubelet
	if k.pods[identity] == nil {
		return
	}
	k.forceDeletes++
	delete(k.pods, identity)
	w.tracef("pod of %s FORCE-DELETED; recreated as %s", identity, k.podOf(identity))
}

// kubeletDelay is how long a kubelet takes to report a container's end.
func (w *world) kubeletDelay() time.Duration {
	return w.between(100*time.Millisecond, 1500*time.Millisecond)
}

// reportEnd has p's kubelet report p's container terminated, after a
// delay, in the pod p ran in, if that pod still exists then.
func (w *world) reportEnd(p *proc) {
	w.after(w.kubeletDelay(), func() {
		if pod := w.kubelet.pods[p.id]; pod != nil && pod.uid == p.pod && p.pod != "" {
			pod.ended[p.inc] = true
			w.kubelet.reported++
			w.tracef("kubelet: %s's container terminated in pod %s", p, p.pod)
		}
	})
}

// checkProofs is the oracle: no core has been handed a proof that a
// process which still runs has ended.
func (p *proc) checkProofs() {
	w := p.w
	for _, o := range w.procs {
		if o.alive && o != p && o.pod != "" && p.hooks().Proven(o.pod, o.inc) {
			w.fail("%s is handed a proof that %s has ended while it runs", p, o)
			return
		}
	}
}

// provenCount counts the proofs of death the seed's cores hold at its end:
// pairs of a core and an ended process whose death it was told.
func (w *world) provenCount() int {
	n := 0
	for _, p := range w.procs {
		for _, o := range w.procs {
			if o != p && o.pod != "" && p.hooks().Proven(o.pod, o.inc) {
				n++
			}
		}
	}
	return n
}

// proveDeath answers a Ready.ProveDeath for the built-in shell: read the
// pod (at most every 200ms per question), and report the kubelet's word if
// it names d.
func (p *proc) proveDeath(d handoff.Death) {
	w := p.w
	if p.cutOff {
		return
	}
	if p.proving == nil {
		p.proving = map[handoff.Death]time.Duration{}
	}
	if at, ok := p.proving[d]; ok && w.now-at < 200*time.Millisecond {
		return
	}
	p.proving[d] = w.now
	w.after(w.latency(), func() {
		if !handoff.ProvesDeath(d, w.kubelet.podRead(d.Identity)) {
			return // gone, recreated, or no word of that container: no proof
		}
		var answer func()
		answer = func() {
			if !p.alive || p.frozen(answer) {
				return
			}
			w.tracef("%s: kubelet proves %s#%s dead (pod %s)", p, d.Identity, d.Incarnation, d.PodUID)
			p.core.Terminated(d)
			p.checkProofs()
			p.step()
		}
		w.after(w.latency(), answer)
	})
}

// Pod returns the UID of the pod the process runs in, for its core
// (handoff.Core.SetPod).
func (p *proc) Pod() string { return p.pod }

// GetPod reads the pod name (an identity) as the API server holds it:
// its UID and, per incarnation that ended in it and that its kubelet
// reported, a container status terminated with that incarnation's
// termination message (handoff.TerminationMarker). A pod that is gone is a
// NotFound error; a process cut off from the API server times out. It
// blocks on the world: call it from a task started with Go.
func (p *proc) GetPod(ctx context.Context, name string) (*corev1.Pod, error) {
	w := p.w
	var (
		pod    *corev1.Pod
		failed bool
	)
	ok := p.block(ctx, func(wake func()) {
		if p.cutOff {
			w.after(w.p.clientTimeout, func() { failed = true; wake() })
			return
		}
		w.after(w.latency(), func() {
			pod = w.kubelet.podObject(name)
			var respond func()
			respond = func() {
				if !p.alive || p.frozen(respond) {
					return
				}
				wake()
			}
			w.after(w.latency(), respond)
		})
	})
	switch {
	case !ok:
		return nil, errStopped
	case failed:
		return nil, errors.New("handoffsim: reading a pod timed out (cut off from the API server)")
	case pod == nil:
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
	return pod, nil
}

// podRead is identity's pod as a read of it shows its containers' ends
// (the zero PodRead when it is gone): per incarnation that ended in it and
// that its kubelet reported, a container terminated with that incarnation's
// termination message. The incarnations are listed in sorted order so that
// a read is the same whatever the map's order.
func (k *simKubelet) podRead(identity string) handoff.PodRead {
	sp := k.pods[identity]
	if sp == nil {
		return handoff.PodRead{}
	}
	read := handoff.PodRead{UID: sp.uid}
	for _, inc := range slices.Sorted(maps.Keys(sp.ended)) {
		read.Terminated = append(read.Terminated, handoff.TerminationMarker(inc)+"\n")
	}
	return read
}

// podObject renders identity's pod as a Pod object, nil when it is gone.
func (k *simKubelet) podObject(identity string) *corev1.Pod {
	read := k.podRead(identity)
	if read.UID == "" {
		return nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: identity, UID: types.UID(read.UID)}}
	for _, msg := range read.Terminated {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  "manager",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}},
		})
	}
	return pod
}
