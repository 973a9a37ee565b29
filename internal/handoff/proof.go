package handoff

import (
	"slices"
	"strings"
	"time"
)

// Proof of death.
//
// A Lease is normally voided only after its holder has been silent for
// LeaseDuration, because silence is all a peer can see. The most common crash
// in a StatefulSet, though, is a container that dies and is restarted in
// place a second or two later, and then the kubelet can vouch for the death:
// it reports the previous container terminated in the pod's status.
//
// Each process records in its Lease the UID of the pod it runs in
// (Record.Pod), and at start writes its incarnation into its container's
// termination message file (the kubelet copies that file into
// status.containerStatuses[].state.terminated.message, and then into
// lastState.terminated.message, when the container ends). The proof that
// incarnation I of pod U has ended is the kubelet's report, in the status of
// the pod with UID U, of a terminated container whose message is I's marker:
// it names exactly the container I ran in, whatever the status says about
// container IDs or restart counts (a status read just after a restart may
// still show the previous container running; a container ID read from such a
// status could name a dead container, which is why the process does not take
// its own container ID from the API).
//
// What is not proof: a pod that is gone (a force delete or the pod garbage
// collector removes pods whose containers may still run on an unreachable
// node), a pod of the same name with another UID (recreated: it has never run
// I), and a terminated container whose message does not name I (the process
// did not write it, or the user's code overwrote it). In all of these the
// Lease is waited out as before.
//
// The core never reads pods: it names the Leases worth checking
// (Ready.ProveDeath) and the shell reports what the kubelet said
// (Terminated). A proven death voids every Lease version that carries that
// pod and incarnation, since none of them can be renewed by a live process;
// the process's writes still on the wire when it died may land later, like
// those of a process paused past its Lease (see the package doc).

// Death names an incarnation and the pod it recorded: as a question in
// Ready.ProveDeath, as the kubelet's answer in Terminated.
type Death struct {
	// Identity is the replica identity whose Lease recorded the pod; the
	// pod's name is the identity.
	Identity string
	// PodUID is the pod's metadata.uid as the Lease recorded it.
	PodUID string
	// Incarnation is the process whose end is in question.
	Incarnation string
}

// TerminationMarker is the termination message that names incarnation:
// each process writes it into its container's termination message file at
// start, and the kubelet copies that file into the container's terminated
// state in the pod's status when the container ends.
func TerminationMarker(incarnation string) string { return "kshard.io/incarnation=" + incarnation }

// PodRead is what a read of a pod says about its containers' ends.
type PodRead struct {
	// UID is the pod's metadata.uid; "" when the pod is gone.
	UID string
	// Terminated holds the termination messages of the containers the
	// kubelet reports terminated, in their current or their last state.
	Terminated []string
}

// ProvesDeath reports whether pod, as read, proves that d.Incarnation has
// ended: it is the pod d recorded (a pod that is gone, or recreated under
// the same name, proves nothing) and one of its terminated containers'
// messages is exactly d.Incarnation's marker, surrounding whitespace
// aside. A message that merely contains the marker proves nothing: the
// kubelet may put a log tail there instead of the file, and a log may
// quote any incarnation.
func ProvesDeath(d Death, pod PodRead) bool {
	if d.PodUID == "" || d.Incarnation == "" {
		return false
	}
	if pod.UID == "" || pod.UID != d.PodUID {
		return otherPodProves(d, pod)
	}
	want := TerminationMarker(d.Incarnation)
	return slices.ContainsFunc(pod.Terminated, func(msg string) bool { return strings.TrimSpace(msg) == want })
}

// key is what a proof is about: an identity's field does not matter to it.
func (d Death) key() Death { return Death{PodUID: d.PodUID, Incarnation: d.Incarnation} }

// Terminated reports the kubelet's word that the process d.Incarnation has
// ended: the pod with UID d.PodUID reports a terminated container whose
// termination message names d.Incarnation. Report nothing for a pod that is
// gone or has another UID. Facts are kept for the life of the core (one per
// proven death: a few bytes each).
func (c *Core) Terminated(d Death) { c.deaths.add(d, c.cfg.Incarnation) }

// SetPod records the UID of the pod this process runs in, to be published in
// its Lease (Record.Pod), once the shell has read it and written this
// incarnation into the container's termination message. Leave it unset
// outside a pod, or when the marker could not be written: peers then wait
// this process's Lease out after a crash.
func (c *Core) SetPod(uid string) {
	if c.pod != uid {
		c.pod = uid
		c.ledger.changed()
	}
}

// proofs holds the ends of processes the kubelet vouched for (Terminated),
// by pod UID and incarnation.
type proofs map[Death]bool

// add records the proof d, unless it proves nothing or is about this very
// process (incarnation self).
func (ps proofs) add(d Death, self string) {
	if d.PodUID == "" || d.Incarnation == "" || d.Incarnation == self {
		return
	}
	ps[d.key()] = true
}

// provenDead reports whether the kubelet has vouched for the end of the
// process that wrote o. Only a well-formed Lease counts: a damaged one may
// carry a third party's edit of the pod or incarnation.
func (ps proofs) provenDead(o Observed) bool {
	return provable(o) && ps[Death{PodUID: o.Pod, Incarnation: o.Incarnation}]
}

// provable reports whether o names a pod and incarnation a proof can be
// about.
func provable(o Observed) bool {
	return o.Pod != "" && o.Incarnation != "" && o.Problem == "" && !o.ClaimUnknown
}

// suspectAfter is how long a peer's Lease must stay unchanged before the
// core asks the shell to look for a proof of its holder's death: a healthy
// peer renews well within it (RenewPeriod < RenewDeadline/2 with the
// defaults), so the pod reads it causes are rare.
func (c *Core) suspectAfter() time.Duration { return c.cfg.RenewDeadline / 2 }

// judgeProofs voids the Leases whose holders are proven dead (the own
// identity's previous incarnation included, which is then taken over at
// once), and lists the Leases worth a look at their pods.
func (c *Core) judgeProofs(r *Ready) {
	c.peers.judgeProofs(c.now, c.deaths, c.suspectAfter(), r)
	c.own.judgeProof(c.deaths, r)
}

// judgeProof voids the previous incarnation's Lease once its writer is
// proven dead, so that it is taken over at once, and until then lists it
// as worth a look at its pod.
func (o *ownLease) judgeProof(deaths proofs, r *Ready) {
	if p := o.prior; p != nil && !p.void && !p.takingOver {
		switch {
		case deaths.provenDead(p.obs):
			p.void, p.confirming = true, false
		case provable(p.obs):
			r.ProveDeath = append(r.ProveDeath, Death{Identity: o.identity, PodUID: p.obs.Pod, Incarnation: p.obs.Incarnation})
		}
	}
}

// judgeProofs voids the peers' Leases whose holders are proven dead, and
// lists those unchanged for suspectAfter as worth a look at their pods.
func (v *peerView) judgeProofs(now time.Time, deaths proofs, suspectAfter time.Duration, r *Ready) {
	for _, id := range v.ids {
		p := v.byID[id]
		switch {
		case p.void || p.obs.Claim.IsEmpty():
		case deaths.provenDead(p.obs):
			p.void, p.confirming = true, false
		case provable(p.obs) && now.Sub(p.lastChange) >= suspectAfter:
			r.ProveDeath = append(r.ProveDeath, Death{Identity: id, PodUID: p.obs.Pod, Incarnation: p.obs.Incarnation})
		}
	}
}

// nextSuspects considers when the next peer becomes worth a look at its pod.
func (v *peerView) nextSuspects(suspectAfter time.Duration, consider func(time.Time)) {
	for _, p := range v.byID {
		if !p.void && provable(p.obs) && !p.obs.Claim.IsEmpty() {
			consider(p.lastChange.Add(suspectAfter))
		}
	}
}
