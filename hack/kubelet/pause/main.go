// Command pause is the sandbox ("pause") container of make kubelet-e2e's
// node: the process that holds a pod's namespaces open while its containers
// come and go. It sleeps until SIGINT or SIGTERM and then exits 0; as PID 1
// of a pod that shares its process namespace it also reaps the orphans
// re-parented to it, so they do not stay zombies.
//
// Written for kshard (the pause image of Kubernetes releases is not pulled:
// the node has no registry access); hack/kubelet/pause/pack builds it
// statically and packs it as an OCI image archive for ctr images import.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking: one SIGCHLD may stand
// for several exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
