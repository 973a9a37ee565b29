package recorder

import (
	"fmt"
	"os"
)

// Environment variables through which the test kit (kshardtest's
// Env.StartProcess) hands a replica process the file to record into.
const (
	EnvDir         = "KSHARDTEST_RECORD_DIR"
	EnvReplica     = "KSHARDTEST_REPLICA"
	EnvIncarnation = "KSHARDTEST_INCARNATION"
)

// OpenFromEnv opens the recorder file of a replica process the test kit
// started, as its environment names it. It fails when the process was not
// started by the kit.
func OpenFromEnv() (*Writer, error) {
	dir, replica, inc := os.Getenv(EnvDir), os.Getenv(EnvReplica), os.Getenv(EnvIncarnation)
	if dir == "" || replica == "" || inc == "" {
		return nil, fmt.Errorf("recorder: %s, %s and %s must be set: run this binary through kshardtest's Env.StartProcess", EnvDir, EnvReplica, EnvIncarnation)
	}
	return Open(dir, Process{Replica: replica, Incarnation: inc})
}
