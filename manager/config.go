package manager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// GetConfig returns the API server connection for New, found the way
// controller-runtime's GetConfig finds it, so that an operator needs no
// clientcmd code of its own:
//
//  1. $KUBECONFIG (a list of files, merged as kubectl merges them),
//  2. the in-cluster service account (a pod's token and the
//     KUBERNETES_SERVICE_HOST/PORT the kubelet sets),
//  3. ~/.kube/config.
//
// The service account comes before ~/.kube/config so that a kubeconfig left
// in an image's home directory does not override the pod's own identity;
// $KUBECONFIG comes first because setting it is an explicit choice. For a
// --kubeconfig flag, use LoadConfig.
func GetConfig() (*rest.Config, error) { return LoadConfig("") }

// LoadConfig is GetConfig with an explicit kubeconfig file, typically the
// value of a --kubeconfig flag, taking precedence over the search. An empty
// path means GetConfig's search.
func LoadConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w; pass the path of a readable kubeconfig file", kubeconfig, err)
		}
		cfg, err := fromFiles(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig})
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		cfg, err := fromFiles(&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)})
		if err != nil {
			return nil, fmt.Errorf("$%s=%s: %w; fix or unset it", clientcmd.RecommendedConfigPathEnvVar, env, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	switch {
	case err == nil:
		return cfg, nil
	case !errors.Is(err, rest.ErrNotInCluster):
		// KUBERNETES_SERVICE_HOST/PORT are set, so this is a pod, but its
		// service account cannot be read: falling back to a home kubeconfig
		// would hide that.
		return nil, fmt.Errorf("in-cluster config: %w; mount the pod's service account token (automountServiceAccountToken) or set $%s", err, clientcmd.RecommendedConfigPathEnvVar)
	}
	// Read HOME now, not clientcmd.RecommendedHomeFile, which is fixed when
	// the process starts.
	home := filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("no API server configured: $%s is unset, this is not a pod (no KUBERNETES_SERVICE_HOST), and %s cannot be read (%w); pass a kubeconfig, set $%s, or run in a cluster",
			clientcmd.RecommendedConfigPathEnvVar, home, err, clientcmd.RecommendedConfigPathEnvVar)
	}
	cfg, err = fromFiles(&clientcmd.ClientConfigLoadingRules{ExplicitPath: home})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", home, err)
	}
	return cfg, nil
}

// fromFiles loads and merges the files rules name, in their current
// context, without clientcmd's fallback to the in-cluster config (LoadConfig
// decides when that applies).
func fromFiles(rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	merged, err := rules.Load()
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*merged, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no cluster is configured in it (no current-context, or an empty file)")
	}
	return cfg, err
}
