package ring

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/shard"
)

// proofCoordinator returns a Coordinator of the replica "op-0" over fake
// membership, a fake clientset holding objs, and the lines it logs.
func proofCoordinator(t *testing.T, objs ...runtime.Object) (*Coordinator, *fake.Clientset, func() []string) {
	t.Helper()
	var (
		mu    sync.Mutex
		lines []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		lines = append(lines, args)
		mu.Unlock()
	}, funcr.Options{})
	c, err := New(Options{handoff: handoff.Config{Identity: "op-0", Incarnation: "inc-0"},
		leases: newFakeMembership("op-0"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return c, fake.NewSimpleClientset(objs...), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) }
}

// published is the pod the core's first Record publishes.
func published(t *testing.T, c *Coordinator) string {
	t.Helper()
	core := c.c.core
	core.Observe(time.Now(), nil)
	r := core.Ready(time.Now())
	if r.Publish == nil {
		t.Fatal("no Record published")
	}
	return r.Publish.Pod
}

func termFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ownPod(uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op-0", Namespace: "ns", UID: k8stypes.UID("uid-" + uid)}}
}

// In a pod, with RBAC: the marker is written, the pod's UID published.
func TestSetupProofPublishesThePod(t *testing.T) {
	path := termFile(t)
	c, client, _ := proofCoordinator(t, ownPod("1"))
	if !c.SetupProof(context.Background(), Proof{Pods: client.CoreV1().Pods("ns"), Namespace: "ns", TerminationMessagePath: path, Incarnation: "inc-0"}) {
		t.Fatal("no proofs although the pod could be read")
	}
	b, _ := os.ReadFile(path)
	if got := strings.TrimSpace(string(b)); got != handoff.TerminationMarker("inc-0") {
		t.Fatalf("termination message %q; want this incarnation's marker", got)
	}
	if pod := published(t, c); pod != "uid-1" {
		t.Fatalf("published pod %q; want the pod UID in the Record", pod)
	}
}

// Each way the proof is impossible ends in one log line naming the cause
// and what to do, and no pod in the Record.
func TestSetupProofFallsBackWithOneLine(t *testing.T) {
	for name, c := range map[string]struct {
		podNS, path string
		forbid      bool
		objs        []runtime.Object
		want        string
	}{
		"outside a pod":         {podNS: "", want: "not running in a pod"},
		"no termination file":   {podNS: "ns", path: "/nonexistent/termination-log", objs: []runtime.Object{ownPod("1")}, want: "termination message"},
		"get pods forbidden":    {podNS: "ns", forbid: true, want: "RBAC forbids reading pods"},
		"identity is not a pod": {podNS: "ns", want: "is not this pod's name"},
	} {
		t.Run(name, func(t *testing.T) {
			path := c.path
			if path == "" {
				path = termFile(t)
			}
			coord, client, lines := proofCoordinator(t, c.objs...)
			if c.forbid {
				client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "op-0", nil)
				})
			}
			if coord.SetupProof(context.Background(), Proof{Pods: client.CoreV1().Pods("ns"), Namespace: c.podNS, TerminationMessagePath: path, Incarnation: "inc-0"}) {
				t.Fatal("proofs on without the means to prove anything")
			}
			if coord.c.prover != nil {
				t.Fatal("a prover without the means to prove anything")
			}
			got := lines()
			if len(got) != 1 || !strings.Contains(got[0], c.want) || !strings.Contains(got[0], "crash failover waits LeaseDuration") {
				t.Fatalf("log lines %q; want one naming %q", got, c.want)
			}
			if pod := published(t, coord); pod != "" {
				t.Fatalf("published pod %q; want none", pod)
			}
		})
	}
}

// The prover reads the pod a Ready.ProveDeath names and hands the kubelet's
// word to the core; a pod of another UID or without the marker is no
// proof, and a question is not read again within its interval.
func TestProverHandsTheKubeletsWordToTheCore(t *testing.T) {
	marker := handoff.TerminationMarker("old")
	pod := ownPod("1")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operator",
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Message: marker + "\n"}}}}
	coord, client, _ := proofCoordinator(t, pod)
	if !coord.SetupProof(context.Background(), Proof{Pods: client.CoreV1().Pods("ns"), Namespace: "ns", TerminationMessagePath: termFile(t), Incarnation: "inc-0"}) {
		t.Fatal("no prover")
	}
	c, p := coord.c, coord.c.prover
	ctx := context.Background()
	ask := func(d handoff.Death) bool {
		t.Helper()
		p.ask(ctx, c, []handoff.Death{d})
		c.async.Wait()
		select {
		case f := <-c.events:
			f()
			return true
		default:
			return false
		}
	}
	if ask(handoff.Death{Identity: "op-0", PodUID: "uid-2", Incarnation: "old"}) {
		t.Fatal("a pod of another UID proved a death")
	}
	if ask(handoff.Death{Identity: "op-0", PodUID: "uid-1", Incarnation: "other"}) {
		t.Fatal("a container without the incarnation's marker proved its death")
	}
	reads := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	before := reads()
	d := handoff.Death{Identity: "op-0", PodUID: "uid-1", Incarnation: "old"}
	if !ask(d) {
		t.Fatal("the kubelet's report of the marker was not handed to the core")
	}
	if ask(d); reads() != before+1 {
		t.Fatalf("%d reads for one question asked twice at once; want 1", reads()-before)
	}
	// The core took the word: a previous incarnation with that pod and
	// incarnation is taken over at once.
	prev := handoff.Observed{Record: handoff.Record{Identity: "op-0", Incarnation: "old", State: handoff.StateActive,
		Claim: shard.NewPartitionSet(271, 1), Generation: 3, Fingerprint: coord.cfg.Ring.Fingerprint(), Pod: "uid-1"}, Version: "7"}
	c.core.Observe(time.Now(), []handoff.Observed{prev})
	if r := c.core.Ready(time.Now()); r.TakeOver == nil || r.TakeOver.Version != "7" {
		t.Fatalf("TakeOver = %v after the proof; want version 7 at once", r.TakeOver)
	}
}
