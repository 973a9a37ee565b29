package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// EnvRace, set to 1, builds the operator with the race detector. Off by
// default: instrumented replicas are several times slower, which distorts
// the handoff timings the tests measure on small machines.
const EnvRace = "KSHARD_E2E_RACE"

// operatorPackage is what the harness runs as replicas.
const operatorPackage = "github.com/kshard/kshard/e2e/testoperator"

// build holds the one operator build a test binary shares.
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Main runs the tests of a package that uses the harness and removes the
// operator binary afterwards. Call it from TestMain:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with work of its own after
// the tests: it runs them, removes the operator binary and returns the exit
// code for os.Exit.
func Run(m *testing.M) int {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	return code
}

// operatorBinary builds the test operator on first use.
func operatorBinary() (string, error) {
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "kshard-e2e-bin-")
		if build.err != nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			build.err = fmt.Errorf("the go tool is needed to build the test operator: %w", err)
			return
		}
		bin := filepath.Join(build.dir, "testoperator")
		args := []string{"build", "-o", bin}
		if os.Getenv(EnvRace) == "1" {
			args = append(args, "-race")
		}
		out, err := exec.Command(goTool, append(args, operatorPackage)...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("building %s: %w\n%s", operatorPackage, err, out)
			return
		}
		build.bin = bin
	})
	return build.bin, build.err
}
