// Command ensure-controlplane builds (or finds in the cache) the pinned
// kube-apiserver, etcd and kube-controller-manager binaries and prints where
// they are. `make binaries` runs it so the first test run shows build
// progress; `make compat` runs it with -tools-dir for each extra pin in
// hack/tools/compat, so each version is built once into the same cache.
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

	"github.com/kshard/kshard/internal/kittools"
)

func main() {
	printDir := flag.Bool("print-dir", false, "print only the directory holding the binaries (for KSHARD_BIN_DIR)")
	toolsDir := flag.String("tools-dir", "", "build from the tools module (go.mod and go.sum pinning one Kubernetes version) in this directory, e.g. hack/tools/compat/v1.34, instead of the one the kit carries; the same as "+kittools.EnvToolsDir)
	flag.Parse()
	if *toolsDir != "" {
		abs, err := filepath.Abs(*toolsDir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ensure-controlplane: -tools-dir %s: %v\n", *toolsDir, err)
			os.Exit(2)
		}
		os.Setenv(kittools.EnvToolsDir, abs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	b, err := kittools.Ensure(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ensure-controlplane: %v\n", err)
		os.Exit(1)
	}
	if *printDir {
		fmt.Println(b.Dir())
		return
	}
	fmt.Printf("control-plane binaries for Kubernetes %s ready in %s:\n  %s\n  %s\n  %s\n",
		b.KubernetesVersion, time.Since(start).Round(time.Millisecond), b.APIServer, b.Etcd, b.ControllerManager)
}
