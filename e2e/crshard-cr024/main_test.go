package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuiltAgainstControllerRuntime024: this module builds the adapter
// with controller-runtime v0.24 and the k8s.io v0.37 modules. Without the
// replace directive, minimal version selection would take the adapter's
// own controller-runtime (v0.25) and the module would test nothing new.
func TestBuiltAgainstControllerRuntime024(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("the test binary carries no build information")
	}
	lines, err := check(bi)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.Join(lines, "; "))
}

// TestCheckNamesWhatIsWrong: a build with controller-runtime v0.25 (the
// replace dropped) or without client-go fails, naming each module.
func TestCheckNamesWhatIsWrong(t *testing.T) {
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "sigs.k8s.io/controller-runtime", Version: "v0.25.2"},
		{Path: "k8s.io/apimachinery", Version: "v0.37.2"},
		{Path: "k8s.io/api", Version: "v0.36.3", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}},
	}}
	_, err := check(bi)
	if err == nil {
		t.Fatal("check accepted controller-runtime v0.25.2 and no client-go")
	}
	for _, s := range []string{"sigs.k8s.io/controller-runtime is v0.25.2", "k8s.io/client-go is not in the build"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "k8s.io/api is") || strings.Contains(err.Error(), "apimachinery") {
		t.Errorf("error %q names a module at the wanted version (a replace's version counts)", err)
	}
}
