package controlplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/kshard/kshard/internal/kittools"
)

func TestMinorOf(t *testing.T) {
	for _, tc := range []struct {
		in    string
		minor int
		ok    bool
	}{
		{"v1.34.5", 34, true},
		{"v1.37.2", 37, true},
		{"Kubernetes v1.35.5", 35, true},
		{"v1.38.0-beta.0", 38, true},
		{"v0.0.0-master+$Format:%H$", 0, false},
		{"", 0, false},
	} {
		minor, ok := minorOf(tc.in)
		if minor != tc.minor || ok != tc.ok {
			t.Errorf("minorOf(%q) = %d, %v; want %d, %v", tc.in, minor, ok, tc.minor, tc.ok)
		}
	}
}

// The gate is refused before anything starts on 1.34 and 1.35, allowed on
// 1.36+, and left to the API server when the version is unknown.
func TestCheckVersionRefusesTheGateBefore136(t *testing.T) {
	gate := Options{ShardedListAndWatch: true}
	for _, v := range []string{"v1.34.5", "v1.35.5"} {
		err := checkVersion(gate, kittools.Binaries{APIServer: "/bin/kube-apiserver", KubernetesVersion: v})
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("%s: err = %v, want ErrUnsupportedVersion", v, err)
		}
		for _, want := range []string{v, "ShardedListAndWatch", "1.36", kittools.EnvBinDir} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", v, err, want)
			}
		}
		if err := checkVersion(Options{}, kittools.Binaries{KubernetesVersion: v}); err != nil {
			t.Errorf("%s without the gate: %v", v, err)
		}
	}
	for _, v := range []string{"v1.36.3", "v1.37.2", ""} {
		if err := checkVersion(gate, kittools.Binaries{KubernetesVersion: v}); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}
