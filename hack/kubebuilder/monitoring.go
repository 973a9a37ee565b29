// Package kubebuilder is a tools module, kept apart from kshard's root
// module: it pins the kubebuilder CLI and the controller-gen its scaffold
// uses, which hack/kubebuilder/ensure.sh builds into kshard's cache for
// `make kubebuilder-check`, and the prometheus-operator API whose
// ServiceMonitor CRD that check generates, so a scaffold's ServiceMonitor
// can be dry-run on a real API server.
package kubebuilder

// The ServiceMonitor types: imported only to keep the module required
// (controller-gen reads the package's source to generate its CRD).
import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
