package lease

import (
	"os"
	"path/filepath"
	"strings"
)

// Environment variables a replica reads for its defaults; set them from the
// downward API (fieldRef metadata.name and metadata.namespace).
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
)

const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the namespace of the pod this process runs in: the
// downward API's $POD_NAMESPACE, else the service account's namespace file;
// empty outside a pod. Every runtime of a ring (kshard's manager, the
// controller-runtime adapter) defaults its Lease namespace and the
// namespace of its proofs of death from it.
func PodNamespace() string {
	if ns := os.Getenv(EnvPodNamespace); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// DefaultNamespace is where a ring's Leases live when no namespace is
// given: PodNamespace, else "default".
func DefaultNamespace() string {
	if ns := PodNamespace(); ns != "" {
		return ns
	}
	return "default"
}

// DefaultRing is a ring's name when none is given: the binary's name made
// a DNS-1123 label.
func DefaultRing() string { return sanitizeName(filepath.Base(os.Args[0])) }

// DefaultIdentity is a replica's identity when none is given: $POD_NAME
// (a StatefulSet pod's name is unique and stable across restarts), else
// the hostname made a DNS-1123 label; empty when neither is known.
func DefaultIdentity() string {
	if id := os.Getenv(EnvPodName); id != "" {
		return id
	}
	if h, err := os.Hostname(); err == nil {
		return sanitizeName(h)
	}
	return ""
}

// sanitizeName turns a binary or host name into a DNS-1123 label: lower
// case, every other character a '-', at most 40 characters, so that a
// ring name made from it leaves room for identities in Lease names.
func sanitizeName(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.TrimRight(out[:40], "-")
	}
	return out
}
