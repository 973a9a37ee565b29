// Command ensure-controlplane builds (or finds in the cache) the pinned
// kube-apiserver, etcd and kube-controller-manager binaries and prints where
// they are. `make binaries` runs it so the first test run shows build progress.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kshard/kshard/manager/kshardtest/controlplane"
)

func main() {
	printDir := flag.Bool("print-dir", false, "print only the directory holding the binaries (for KSHARD_BIN_DIR)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	b, err := controlplane.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ensure-controlplane: %v\n", err)
		os.Exit(1)
	}
	if *printDir {
		fmt.Println(filepath.Dir(b.APIServer))
		return
	}
	fmt.Printf("control-plane binaries for Kubernetes %s ready in %s:\n  %s\n  %s\n  %s\n",
		b.KubernetesVersion, time.Since(start).Round(time.Millisecond), b.APIServer, b.Etcd, b.ControllerManager)
}
