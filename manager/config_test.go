package manager

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKubeconfig writes a kubeconfig whose current context points at
// server, and returns its path.
func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
users:
- name: u
  user:
    token: t
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`, server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configEnv isolates a test from the machine's kubeconfig and cluster: HOME
// is an empty directory, KUBECONFIG and the in-cluster variables are unset.
// It returns the HOME directory.
func configEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	return home
}

func TestLoadConfigPrecedence(t *testing.T) {
	t.Run("explicit path beats KUBECONFIG and home", func(t *testing.T) {
		home := configEnv(t)
		writeKubeconfig(t, filepath.Join(home, ".kube"), "https://home.invalid")
		t.Setenv("KUBECONFIG", writeKubeconfig(t, t.TempDir(), "https://env.invalid"))
		explicit := writeKubeconfig(t, t.TempDir(), "https://explicit.invalid")
		cfg, err := LoadConfig(explicit)
		if err != nil || cfg.Host != "https://explicit.invalid" {
			t.Fatalf("LoadConfig(%s) = %v, %v; want the explicit file's server", explicit, cfg, err)
		}
	})
	t.Run("KUBECONFIG beats home", func(t *testing.T) {
		home := configEnv(t)
		writeKubeconfig(t, filepath.Join(home, ".kube"), "https://home.invalid")
		// A list, as kubectl takes it: a missing file is skipped.
		env := filepath.Join(t.TempDir(), "missing") + string(os.PathListSeparator) + writeKubeconfig(t, t.TempDir(), "https://env.invalid")
		t.Setenv("KUBECONFIG", env)
		cfg, err := GetConfig()
		if err != nil || cfg.Host != "https://env.invalid" {
			t.Fatalf("GetConfig() = %v, %v; want $KUBECONFIG's server", cfg, err)
		}
	})
	t.Run("home when nothing else is set", func(t *testing.T) {
		home := configEnv(t)
		writeKubeconfig(t, filepath.Join(home, ".kube"), "https://home.invalid")
		cfg, err := GetConfig()
		if err != nil || cfg.Host != "https://home.invalid" {
			t.Fatalf("GetConfig() = %v, %v; want ~/.kube/config's server", cfg, err)
		}
	})
	t.Run("in cluster beats home", func(t *testing.T) {
		if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
			t.Skip("this machine has a service account token, so the in-cluster config would load; the check needs it absent")
		}
		home := configEnv(t)
		writeKubeconfig(t, filepath.Join(home, ".kube"), "https://home.invalid")
		t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
		t.Setenv("KUBERNETES_SERVICE_PORT", "443")
		// A pod without a readable token: the in-cluster config is chosen
		// and fails, rather than silently using the home kubeconfig.
		cfg, err := GetConfig()
		if err == nil || !strings.Contains(err.Error(), "in-cluster") {
			t.Fatalf("GetConfig() in a pod without a token = %v, %v; want an in-cluster error, not ~/.kube/config", cfg, err)
		}
	})
}

func TestLoadConfigErrorsSayWhatToDo(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns LoadConfig's argument
		want  []string
	}{
		{"nothing configured", func(t *testing.T) string { configEnv(t); return "" },
			[]string{"no API server configured", "KUBECONFIG", ".kube/config"}},
		{"explicit file missing", func(t *testing.T) string { configEnv(t); return filepath.Join(t.TempDir(), "nope") },
			[]string{"nope", "readable kubeconfig"}},
		{"KUBECONFIG names no file", func(t *testing.T) string {
			configEnv(t)
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "gone"))
			return ""
		}, []string{"$KUBECONFIG=", "gone", "no cluster is configured"}},
		{"malformed file", func(t *testing.T) string {
			configEnv(t)
			p := filepath.Join(t.TempDir(), "bad")
			if err := os.WriteFile(p, []byte("{not yaml"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"kubeconfig", "bad"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			arg := tc.setup(t)
			cfg, err := LoadConfig(arg)
			if err == nil {
				t.Fatalf("LoadConfig(%q) = %v, want an error", arg, cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
