package membership

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/kshard/kshard/internal/handoff"
)

// Proof of death (see internal/handoff's proof.go): each process writes
// handoff.TerminationMarker(incarnation) into its container's termination message
// file at start and records its pod's UID in its Lease (AnnotationPod); when
// the container ends, the kubelet copies the file into the container's
// terminated state in the pod's status. Terminated reads that status.

// WriteTerminationMarker writes incarnation's marker into the termination
// message file at path, replacing what was there. The file must exist: the
// kubelet mounts it into every container it runs, so a missing file means
// the process does not run in such a container (and nothing is created
// outside one).
func WriteTerminationMarker(path, incarnation string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("lease: writing the termination message marker: %w", err)
	}
	if _, err := f.WriteString(handoff.TerminationMarker(incarnation) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("lease: writing the termination message marker to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lease: writing the termination message marker to %s: %w", path, err)
	}
	return nil
}

// Terminated reports whether pod (nil: gone) proves d.Incarnation ended,
// by handoff.ProvesDeath: the kubelet reports, in the pod's status, a
// container terminated with d.Incarnation's marker as its message, in its
// current state or its last one.
func Terminated(pod *corev1.Pod, d handoff.Death) bool {
	var read handoff.PodRead
	if pod != nil {
		read.UID = string(pod.UID)
		for _, s := range pod.Status.ContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
				if t != nil {
					read.Terminated = append(read.Terminated, t.Message)
				}
			}
		}
	}
	return handoff.ProvesDeath(d, read)
}
