package handoff

import (
	"strconv"
	"time"
)

// This file adds pods and their kubelets to the simulated world
// (simworld_test.go), for proofs of death (proof.go): every process runs in
// the pod of its identity and records the pod's UID in its Lease; when a
// process ends, the kubelet reports its container terminated (with the
// incarnation's termination-message marker) in that pod's status after a
// delay, unless the pod was removed first. A force delete (or the pod
// garbage collector, after a node is lost) removes the pod while its process
// may still run; the StatefulSet controller creates it again under a new
// UID. A shell answers Ready.ProveDeath by reading the pod.

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
	proven       int // proofs a shell found and handed to its core
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

// proveDeath answers a Ready.ProveDeath: read the pod (at most every 200ms
// per question), and report the kubelet's word if it names d.
func (p *proc) proveDeath(d Death) {
	w := p.w
	if p.cutOff {
		return
	}
	if p.proving == nil {
		p.proving = map[Death]time.Duration{}
	}
	if at, ok := p.proving[d]; ok && w.now-at < 200*time.Millisecond {
		return
	}
	p.proving[d] = w.now
	w.after(w.latency(), func() {
		pod := w.kubelet.pods[d.Identity]
		if pod == nil || pod.uid != d.PodUID || !pod.ended[d.Incarnation] {
			return // gone, recreated, or no word of that container: no proof
		}
		var answer func()
		answer = func() {
			if !p.alive || p.frozen(answer) {
				return
			}
			// The oracle: a proof handed to a core names a process that
			// has ended.
			for _, o := range w.procs {
				if o.alive && o.inc == d.Incarnation {
					w.fail("%s is handed a proof that %s has ended while it runs", p, o)
				}
			}
			w.kubelet.proven++
			w.tracef("%s: kubelet proves %s#%s dead (pod %s)", p, d.Identity, d.Incarnation, d.PodUID)
			p.core.Terminated(d)
			p.step()
		}
		w.after(w.latency(), answer)
	})
}
