package harness

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// Kubectl runs kubectl against the control plane as admin and returns its
// combined output. When kubectl is not installed the error wraps
// exec.ErrNotFound, so a test can skip just that check.
func (h *Harness) Kubectl(args ...string) (string, error) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kubectl is not on PATH; install it to run this check: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", h.cp.KubeconfigPath()}, args...)...).CombinedOutput()
	return string(out), err
}
