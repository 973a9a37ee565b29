package crshard

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

// A replica whose process crashed and was restarted in place takes its
// Lease over as soon as the kubelet reports the previous container's end
// with that incarnation's marker (the proof of death), not after the
// Lease's duration, as with kshard's manager: the adapter marks its
// termination message file, publishes its pod in the Lease and reads the
// pod's status.
//
// The control plane runs no kubelet, so the test plays it: the first
// process leaves, its Lease is written back as it stood (a crash leaves it
// so, renewed a moment ago), and the pod's status reports the container
// terminated with the file's content, as the kubelet would.
func TestRestartInPlaceProvesTheCrash(t *testing.T) {
	const (
		ns            = "proof"
		identity      = "w-0"
		leaseDuration = 30 * time.Second
	)
	cp := controlplane.ForTest(t, controlplane.Options{})
	cfg := cp.Config()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission wants the pod's service account; no controller manager
	// creates "default" here.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: identity},
		Spec: corev1.PodSpec{NodeName: "test-node", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "operator", Image: "kshard.io/test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(ns)
	leaseName := "prooftest-" + identity
	dir := t.TempDir()

	start := func(run string) (*Ring, string, func()) {
		path := filepath.Join(dir, run)
		if err := os.WriteFile(path, nil, 0o644); err != nil { // the kubelet mounts one per container
			t.Fatal(err)
		}
		rcfg := rest.CopyConfig(cfg)
		ring, err := New(rcfg, Options{
			Ring: "prooftest", LeaseNamespace: ns, Identity: identity, Partitions: 8,
			LeaseDuration: leaseDuration, PodNamespace: ns, TerminationMessagePath: path,
			Registerer: prometheus.NewRegistry(),
			Exit:       func(code int) { t.Errorf("%s asked to exit with %d", run, code) },
			Logger:     testr.NewWithOptions(t, testr.Options{Verbosity: 1}).WithName(run),
		})
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := crmanager.New(rcfg, crmanager.Options{
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := ring.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })); err != nil {
			t.Fatal(err)
		}
		return ring, path, runManager(t, run, mgr)
	}
	// ownLease reads the Lease, nil while there is none.
	ownLease := func() *coordinationv1.Lease {
		l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	first, firstPath, haltFirst := start("run-1")
	incarnation := first.member.Incarnation()
	waitFor(t, time.Minute, "the first process ready, its Lease naming its pod", func() (bool, string) {
		l := ownLease()
		if l == nil {
			return false, "no Lease yet"
		}
		return first.Ready() && l.Annotations[annotationPod] == string(pod.UID) && l.Annotations[annotationIncarnation] == incarnation,
			"annotations " + strings.Join([]string{l.Annotations[annotationPod], l.Annotations[annotationIncarnation]}, ", ")
	})
	marker, err := os.ReadFile(firstPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(marker)); got != "kshard.io/incarnation="+incarnation {
		t.Fatalf("termination message file holds %q, want %q", got, "kshard.io/incarnation="+incarnation)
	}

	// The crash: the Lease as the process left it, renewed just now.
	crashed := ownLease().DeepCopy()
	haltFirst()
	waitFor(t, time.Minute, "the first process's Lease gone after its leave", func() (bool, string) {
		return ownLease() == nil, "still there"
	})
	crashed.ObjectMeta = metav1.ObjectMeta{Name: crashed.Name, Namespace: crashed.Namespace,
		Labels: crashed.Labels, Annotations: crashed.Annotations, Finalizers: crashed.Finalizers}
	crashed.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	crashedAt := time.Now()
	if _, err := leases.Create(ctx, crashed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelet reports the container's end with the file's content.
	pod, err = cs.CoreV1().Pods(ns).Get(ctx, identity, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operator", Image: "kshard.io/test", ContainerID: "test://run-1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: string(marker), ContainerID: "test://run-1"}}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	second, _, _ := start("run-2")
	waitFor(t, leaseDuration+30*time.Second, "the restarted process ready on the Lease it took over", func() (bool, string) {
		l := ownLease()
		if l == nil {
			return false, "no Lease"
		}
		return second.Ready() && l.Annotations[annotationIncarnation] == second.member.Incarnation(),
			"incarnation " + l.Annotations[annotationIncarnation] + ", not ready: " + second.coord.NotReadyReason()
	})
	// Waiting the crashed incarnation's Lease out takes LeaseDuration (30s)
	// from its last renewal; the proof of death takes a start and a read
	// of the pod (seconds). LeaseDuration/2 tells them apart and leaves
	// over 10s of it as the scheduling allowance of a loaded machine.
	gap := time.Since(crashedAt)
	t.Logf("the restarted process took over and was ready %s after the crash (LeaseDuration %s)", gap.Round(time.Millisecond), leaseDuration)
	if gap >= leaseDuration/2 {
		t.Errorf("the restart in place took %s, not under LeaseDuration/2 (%s): the kubelet's proof of death was not used", gap.Round(time.Millisecond), leaseDuration/2)
	}
}

// The member Lease's annotations these tests read, spelled as the Lease
// format (package lease's doc) spells them: the adapter's module sees
// only the root's published API, where the format is documented, not
// named.
const (
	annotationPod           = "kshard.io/pod-uid"
	annotationIncarnation   = "kshard.io/incarnation"
	annotationCacheMode     = "kshard.io/cache-mode"
	annotationCachedObjects = "kshard.io/cached-objects"
)
