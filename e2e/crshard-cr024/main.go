// Command crshard-cr024 says which controller-runtime and k8s.io versions
// kshard's controller-runtime adapter (controller/crshard) is built with in
// this module, and fails unless they are v0.24 and v0.37.
//
// The adapter requires controller-runtime v0.25; an operator that stays on
// v0.24 cannot keep it by requirements alone, since Go's minimal version
// selection takes the highest version required, so it pins v0.24 with a
// replace directive, as this module does. The module's tools are the
// adapter's chaos operators (e2e/bench/crshardop and its mapped variant),
// built here under those versions: make compat-cr024 runs this command,
// the adapter's own tests and the adapter's chaos scenarios on them. It is
// a module of its own, with a go.work of its own, so that these versions
// never reach the published modules or the repository's workspace.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	// Compiled and linked here, under this module's versions.
	_ "github.com/kshard/kshard/controller/crshard"
)

// want is the version prefix expected of each module in this build.
var want = []struct{ path, prefix string }{
	{"sigs.k8s.io/controller-runtime", "v0.24."},
	{"k8s.io/client-go", "v0.37."},
	{"k8s.io/apimachinery", "v0.37."},
	{"k8s.io/api", "v0.37."},
}

// check returns "path version" for every module in want (a replaced
// module's replacement version), and an error naming each that is missing
// or at another version.
func check(bi *debug.BuildInfo) ([]string, error) {
	got := map[string]string{}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		got[d.Path] = d.Version
	}
	var lines, wrong []string
	for _, w := range want {
		v, ok := got[w.path]
		switch {
		case !ok:
			wrong = append(wrong, w.path+" is not in the build")
		case !strings.HasPrefix(v, w.prefix):
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s*", w.path, v, w.prefix))
		}
		lines = append(lines, w.path+" "+v)
	}
	if len(wrong) > 0 {
		return lines, fmt.Errorf("the adapter is not built with the versions this module tests (check go.mod's replace of sigs.k8s.io/controller-runtime): %s", strings.Join(wrong, "; "))
	}
	return lines, nil
}

func main() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(os.Stderr, "crshard-cr024: the binary carries no build information; build it with module support")
		os.Exit(1)
	}
	lines, err := check(bi)
	for _, l := range lines {
		fmt.Println("crshard-cr024: adapter built with", l)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crshard-cr024:", err)
		os.Exit(1)
	}
}
