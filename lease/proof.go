package lease

import (
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kshard/kshard/shard/handoff"
)

// Proof of death (see shard/handoff's proof.go): each process writes
// TerminationMarker(incarnation) into its container's termination message
// file at start and records its pod's UID in its Lease (AnnotationPod); when
// the container ends, the kubelet copies the file into the container's
// terminated state in the pod's status. Terminated reads that status.

// DefaultTerminationMessagePath is where Kubernetes mounts a container's
// termination message file unless the container's terminationMessagePath
// says otherwise.
const DefaultTerminationMessagePath = "/dev/termination-log"

// TerminationMarker is the termination message that names incarnation.
func TerminationMarker(incarnation string) string { return "kshard.io/incarnation=" + incarnation }

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
	if _, err := f.WriteString(TerminationMarker(incarnation) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("lease: writing the termination message marker to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lease: writing the termination message marker to %s: %w", path, err)
	}
	return nil
}

// Terminated reports whether pod is the pod d names (same UID) and the
// kubelet reports, in its status, a container terminated whose termination
// message is d.Incarnation's marker: its current state or its last one. A nil
// pod (gone) proves nothing, nor does a pod of another UID (recreated).
func Terminated(pod *corev1.Pod, d handoff.Death) bool {
	if pod == nil || d.PodUID == "" || d.Incarnation == "" || string(pod.UID) != d.PodUID {
		return false
	}
	want := TerminationMarker(d.Incarnation)
	names := func(t *corev1.ContainerStateTerminated) bool {
		return t != nil && strings.TrimSpace(t.Message) == want
	}
	for _, s := range pod.Status.ContainerStatuses {
		if names(s.State.Terminated) || names(s.LastTerminationState.Terminated) {
			return true
		}
	}
	return false
}
