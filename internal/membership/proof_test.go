package membership

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

func terminatedPod(uid string, state, last string) *corev1.Pod {
	s := corev1.ContainerStatus{Name: "operator"}
	if state != "" {
		s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Message: state, ContainerID: "containerd://old"}
	} else {
		s.State.Running = &corev1.ContainerStateRunning{}
	}
	if last != "" {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Message: last, ContainerID: "containerd://old"}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op-0", UID: types.UID(uid)},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{s}}}
}

func TestTerminated(t *testing.T) {
	d := handoff.Death{Identity: "op-0", PodUID: "u1", Incarnation: "abc"}
	marker := handoff.TerminationMarker("abc") + "\n"
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"restarted in place: lastState names it":  {terminatedPod("u1", "", marker), true},
		"terminated, not restarted yet":           {terminatedPod("u1", marker, ""), true},
		"pod gone (force delete, pod GC)":         {nil, false},
		"pod recreated with another UID":          {terminatedPod("u2", "", marker), false},
		"another container's message":             {terminatedPod("u1", handoff.TerminationMarker("abd"), handoff.TerminationMarker("x")), false},
		"running, nothing terminated yet":         {terminatedPod("u1", "", ""), false},
		"message is the log tail, not the marker": {terminatedPod("u1", "panic: ... "+handoff.TerminationMarker("abc"), ""), false},
	} {
		if got := Terminated(c.pod, d); got != c.want {
			t.Errorf("%s: Terminated = %v; want %v", name, got, c.want)
		}
	}
}

func TestWriteTerminationMarker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	if err := WriteTerminationMarker(path, "abc"); err == nil {
		t.Fatal("created a termination message file that the kubelet did not mount")
	}
	if err := os.WriteFile(path, []byte("earlier content, longer than the marker........................"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteTerminationMarker(path, "abc"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !Terminated(terminatedPod("u1", string(b), ""), handoff.Death{PodUID: "u1", Incarnation: "abc"}) {
		t.Fatalf("the written marker %q does not prove the death", b)
	}
}

// The pod UID round-trips through the Lease, and a Lease taken over by a
// writer without a pod loses the previous writer's.
func TestPodAnnotation(t *testing.T) {
	m := &Member{opts: Options{Namespace: "ns", Ring: "r", Identity: "a", Incarnation: "i2", Partitions: 7}, name: "r-a"}
	rec := handoff.Record{State: handoff.StateJoining, Claim: shard.NewPartitionSet(7), Pod: "u1"}
	l := m.render(nil, rec, metav1.Now().Time, true)
	if got := Parse(l, "r", 7).Pod; got != "u1" {
		t.Fatalf("Pod = %q after a round trip; want u1", got)
	}
	rec.Pod = ""
	if got := Parse(m.render(l, rec, metav1.Now().Time, true), "r", 7); got.Pod != "" || got.Problem != "" {
		t.Fatalf("taken over without a pod: Pod %q, problem %q; want none", got.Pod, got.Problem)
	}
}
