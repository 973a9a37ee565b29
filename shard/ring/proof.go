package ring

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kshard/kshard/internal/handoff"
	"github.com/kshard/kshard/internal/membership"
	"github.com/kshard/kshard/lease"
)

// Proof of death (internal/handoff's proof.go): a crashed replica restarted in
// place takes its Lease over as soon as the kubelet reports the previous
// container terminated, instead of waiting LeaseDuration, and peers may void
// a silent member's claims on the same report.

// Intervals between reads of one pod for one question: the own identity's
// previous incarnation is the restart's critical path, peers are not.
const (
	proveOwnEvery  = 250 * time.Millisecond
	provePeerEvery = time.Second
	proveTimeout   = 2 * time.Second
)

// podReader reads a pod by name in the replica's namespace: the API server
// in production (podsClient), the simulated world's pods in the
// coordinator's simulation (coordsim_test.go). A pod that is gone is a
// NotFound error.
type podReader interface {
	GetPod(ctx context.Context, name string) (*corev1.Pod, error)
}

// podsClient reads pods from the API server.
type podsClient struct{ pods typedcorev1.PodInterface }

func (p podsClient) GetPod(ctx context.Context, name string) (*corev1.Pod, error) {
	return p.pods.Get(ctx, name, metav1.GetOptions{})
}

// prover reads pods for Ready.ProveDeath. Its methods run on the
// coordinator's loop; the reads run through the coordinator's goAsync and
// report back through its post.
type prover struct {
	pods     podReader
	identity string
	log      logr.Logger
	asked    map[handoff.Death]time.Time // when each question was last read
}

// Proof configures proofs of death (Coordinator.SetupProof).
type Proof struct {
	// Pods reads and is allowed to get the pods of Namespace (RBAC: get on
	// pods). Required.
	Pods typedcorev1.PodInterface
	// Namespace is the namespace of the pod this replica runs in, whose
	// name is its identity; empty (outside a pod) turns proofs off.
	Namespace string
	// TerminationMessagePath is the container's termination message file;
	// empty selects lease.DefaultTerminationMessagePath.
	TerminationMessagePath string
	// Incarnation is the incarnation the membership writes into the own
	// Lease (handoff.Config.Incarnation). Required.
	Incarnation string
}

// SetupProof makes this process's death provable: it writes the
// incarnation into the container's termination message file, reads its own
// pod, and publishes the pod's UID in the Lease; from then on it reads the
// pods of peers' and of the previous incarnation's deaths
// (handoff.Ready.ProveDeath). When any of that is impossible it logs one
// line saying why and what to do and returns false: crash failover then
// waits the Lease out. Call it before Run, and before the membership's
// first write, so that the Lease carries the pod from the start.
func (c *Coordinator) SetupProof(ctx context.Context, p Proof) bool {
	cfg, log := c.cfg, c.c.log
	select {
	case <-c.ran:
		log.Error(nil, "SetupProof called after Run; proofs of death stay off")
		return false
	default:
	}
	off := func(why, fix string) bool {
		log.Info("crash failover waits LeaseDuration: "+why+"; "+fix, "leaseDuration", cfg.LeaseDuration)
		return false
	}
	ns, identity := p.Namespace, cfg.Identity
	if ns == "" {
		return off("not running in a pod (no $"+lease.EnvPodNamespace+", no service account namespace)",
			"set $"+lease.EnvPodNamespace+" from the downward API (fieldRef metadata.namespace) to let the kubelet prove a crashed replica's death")
	}
	path := p.TerminationMessagePath
	if path == "" {
		path = lease.DefaultTerminationMessagePath
	}
	if err := membership.WriteTerminationMarker(path, p.Incarnation); err != nil {
		return off(fmt.Sprintf("cannot mark this process in its container's termination message (%v)", err),
			"set the termination message path to the container's terminationMessagePath (default "+lease.DefaultTerminationMessagePath+")")
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pod, err := p.Pods.Get(gctx, identity, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return off(fmt.Sprintf("RBAC forbids reading pods in namespace %s (%v)", ns, err),
			"grant get on pods in that namespace to the service account (deploy/rbac.yaml)")
	case apierrors.IsNotFound(err):
		return off(fmt.Sprintf("no pod %s/%s: the identity is not this pod's name", ns, identity),
			"set $"+lease.EnvPodName+" from the downward API (fieldRef metadata.name)")
	case err != nil:
		return off(fmt.Sprintf("reading own pod %s/%s failed (%v)", ns, identity, err),
			"this lasts until the process restarts")
	}
	c.c.core.SetPod(string(pod.UID))
	log.Info("a crash of this process can be proven by its kubelet: restarted in place, its next incarnation takes over at once",
		"pod", ns+"/"+pod.Name, "podUID", pod.UID, "terminationMessagePath", path)
	c.c.prover = newProver(podsClient{p.Pods}, identity, log.WithName("proof"))
	return true
}

// newProver returns a prover for the replica identity that reads pods
// through pods.
func newProver(pods podReader, identity string, log logr.Logger) *prover {
	return &prover{pods: pods, identity: identity, log: log, asked: map[handoff.Death]time.Time{}}
}

// ask reads the pods of ds that were not read recently, each as its own
// task of c.goAsync (a goroutine owned by c.async in production), and hands
// every proof found to the core through c.post. Call it on the loop.
func (p *prover) ask(ctx context.Context, c *coordinator, ds []handoff.Death) {
	now := c.now()
	for d, at := range p.asked {
		if now.Sub(at) > time.Minute {
			delete(p.asked, d) // a question no longer asked
		}
	}
	for _, d := range ds {
		every := provePeerEvery
		if d.Identity == p.identity {
			every = proveOwnEvery
		}
		if at, ok := p.asked[d]; ok && now.Sub(at) < every {
			continue
		}
		p.asked[d] = now
		c.goAsync(ctx, func(ctx context.Context) {
			gctx, cancel := context.WithTimeout(ctx, proveTimeout)
			defer cancel()
			pod, err := p.pods.GetPod(gctx, d.Identity)
			switch {
			case apierrors.IsNotFound(err):
				// Gone: a force delete or the pod GC. Its containers may
				// still run on a lost node: no proof.
				return
			case err != nil:
				p.log.V(1).Info("reading a pod for a proof of death failed; will retry", "pod", d.Identity, "error", err.Error())
				return
			}
			if membership.Terminated(pod, d) {
				c.post(ctx, func() {
					c.log.Info("the kubelet reports the process terminated: its Lease no longer waits for LeaseDuration",
						"identity", d.Identity, "incarnation", d.Incarnation, "podUID", d.PodUID)
					c.core.Terminated(d)
				})
			}
		})
	}
}
