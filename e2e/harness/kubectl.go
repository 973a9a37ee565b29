package harness

import (
	"context"
	"os/exec"
	"time"

	"github.com/kshard/kshard/internal/testkubectl"
)

// Kubectl runs kubectl (testkubectl.Path) against the control plane as
// admin and returns its combined output. Without a kubectl the error wraps
// testkubectl.ErrMissing, so a test can end just that check with
// testkubectl.Missing (a failure under CI=true).
func (h *Harness) Kubectl(args ...string) (string, error) {
	kubectl, err := testkubectl.Path()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", h.cp.KubeconfigPath()}, args...)...).CombinedOutput()
	return string(out), err
}
