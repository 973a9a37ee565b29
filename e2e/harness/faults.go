package harness

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kshard/kshard/shard"
)

// writtenKey mirrors e2e/testoperator's annotation of a blind write.
const writtenKey = "kshard-e2e/written"

// BackgroundName is the ConfigMap identity patches with
// Options.BackgroundWrite; it mirrors e2e/testoperator's.
func BackgroundName(identity string) string { return "background-" + identity }

// BackgroundBuilt is the annotation each background write sets to the time
// it built its request (Unix nanoseconds); it mirrors e2e/testoperator's.
const BackgroundBuilt = "kshard-e2e/background-built"

// LeaseName is the name of identity's member Lease in the harness's ring.
func (h *Harness) LeaseName(identity string) string { return h.opts.Ring + "-" + identity }

// DeleteLease deletes identity's member Lease, as a person running
// kubectl delete lease would, and returns when the API server acknowledged.
func (h *Harness) DeleteLease(identity string) time.Time {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.client.CoordinationV1().Leases(h.opts.Namespace).Delete(ctx, h.LeaseName(identity), metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("deleting the Lease of %s: %v", identity, err)
	}
	return time.Now()
}

// RelabelLease sets identity's member Lease's kshard.io/ring label to ring,
// as kubectl label --overwrite would, and returns when acknowledged.
func (h *Harness) RelabelLease(identity, ring string) time.Time {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"kshard.io/ring": ring}}})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.client.CoordinationV1().Leases(h.opts.Namespace).Patch(ctx, h.LeaseName(identity), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		h.t.Fatalf("relabelling the Lease of %s: %v", identity, err)
	}
	return time.Now()
}

// Pause stops identity's process group with SIGSTOP, as a frozen VM or a
// throttled container stops a process; Resume continues it. A paused
// replica counts as running.
func (h *Harness) Pause(identity string) time.Time {
	h.t.Helper()
	r := h.mustRunning("pause", identity)
	if err := r.proc.Pause(); err != nil {
		h.t.Fatalf("SIGSTOP %s: %v", identity, err)
	}
	return time.Now()
}

// Resume sends SIGCONT to identity's process group.
func (h *Harness) Resume(identity string) time.Time {
	h.t.Helper()
	r := h.mustRunning("resume", identity)
	if err := r.proc.Resume(); err != nil {
		h.t.Fatalf("SIGCONT %s: %v", identity, err)
	}
	return time.Now()
}

// FinalValues reads every labelled ConfigMap and returns the value of its
// blind-write annotation by key ("" where there is none), for
// recorder.Log.CheckWrites.
func (h *Harness) FinalValues() map[string]string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := h.ConfigMaps(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(map[string]string, len(list))
	for _, cm := range list {
		out[shard.KeyOf(cm.Namespace, cm.Name)] = cm.Annotations[writtenKey]
	}
	return out
}
