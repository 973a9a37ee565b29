// Command tinyreplica runs tinyoperator as a process replica of the test
// kit (kshardtest.Env.StartProcess).
package main

import (
	"fmt"
	"os"

	"github.com/kshard/kshard/manager"
	"github.com/kshard/kshard/manager/kshardtest"
	"github.com/kshard/kshard/manager/kshardtest/internal/tinyoperator"
)

func main() {
	r, err := kshardtest.ReplicaFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinyreplica:", err)
		os.Exit(2)
	}
	defer r.Recorder.Close()
	if err := tinyoperator.Run(manager.SetupSignalHandler(), r); err != nil {
		fmt.Fprintln(os.Stderr, "tinyreplica:", err)
		r.Recorder.Close()
		os.Exit(1)
	}
}
