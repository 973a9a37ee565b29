package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/kshard/kshard/cmd/kshard/internal/demo"
)

func demoCommand() *command {
	return &command{
		name:     "demo",
		synopsis: "run a local control plane and example operator replicas: live table, measured handoff",
		help: func(prog string) string {
			return fmt.Sprintf(`Run kshard end to end on this machine, with nothing to install.

Usage:
  %[1]s demo [flags]

It starts a private control plane (etcd, kube-apiserver and
kube-controller-manager on loopback ports; the first run builds them from
source, about 10 minutes on 2 idle cores and 30 or more on busy ones,
with a progress line every 15 seconds, then they are cached; --timeout does
not count the build), installs the Widget CRD and
starts --replicas replicas of the example operator (identities
example-operator-0, -1, ...) as processes: the example-operator binary
next to this one, or built with the go tool on first use (not counted by
--timeout). It creates
--objects Widgets and shows a table per replica (Lease state, objects its
cache holds, partitions claimed and those mid-handoff, all from one read of
the ring's Leases; reconciles, reconciles/s, queue depth from its
/metrics), refreshed every
second on a terminal and every 5 seconds otherwise, until every Widget's
status.observedGeneration matches its generation, and says how many objects
each replica caches. The replicas run --cache-mode labels by default: each
labels the objects of its partitions once with the ring's partition label
and lists and watches only its partitions' labels, so each caches its share
of the Widgets and ConfigMaps, on a control plane without any feature gate.
Then it sends SIGTERM to one replica and prints the handoff gap
(SIGTERM until all its partitions are claimed by the others, seen through
the Lease watch) and how many partitions moved, starts a new replica and
prints what moved to it, and stops everything.

Ctrl-C stops the replicas (graceful leave) and the control plane and exits;
a second Ctrl-C kills the replicas instead of waiting for them.

Flags:
      --replicas N      replicas to start with, at least 2 (default 3)
      --objects N       Widgets to create (default 1000)
      --cache-mode M    the replicas' cache mode: labels (each caches its partitions'
                        objects) or full (each caches every object) (default labels)
      --timeout D       bound on the demo once the control plane is up, e.g. 10m
                        (default 10m); not on the first build nor on --keep's wait
      --keep            keep the control plane and replicas running afterwards, print a
                        kubeconfig and commands to try, and wait for Ctrl-C
`, prog)
		},
		run: runDemo,
	}
}

func runDemo(e *env, _ *globals, args []string) error {
	fs := newFlagSet("demo")
	replicas, objects, timeout := 3, 1000, 10*time.Minute
	cacheMode := demo.CacheLabels
	var keep bool
	fs.Var(intValue{&replicas}, "replicas", "")
	fs.Var(intValue{&objects}, "objects", "")
	fs.Var(durationValue{&timeout}, "timeout", "")
	fs.StringVar(&cacheMode, "cache-mode", cacheMode, "")
	fs.BoolVar(&keep, "keep", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("demo takes no arguments, got %q", pos)
	case replicas < 2 || replicas > 16:
		return usagef("--replicas %d: give 2 to 16 (one leaves, the others take over its partitions)", replicas)
	case objects < 1 || objects > 100000:
		return usagef("--objects %d: give 1 to 100000", objects)
	case timeout <= 0:
		return usagef("--timeout %s: give a positive duration such as 10m", timeout)
	case cacheMode != demo.CacheLabels && cacheMode != demo.CacheFull:
		return usagef("--cache-mode %q: give %s or %s (the demo partitions by key, where the server mode does not apply)", cacheMode, demo.CacheLabels, demo.CacheFull)
	}
	// First Ctrl-C (or SIGTERM): stop gracefully. Second: hurry, killing
	// replicas instead of waiting for their leave.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hurry := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	handlerDone := make(chan struct{})
	stopHandler := make(chan struct{})
	go func() { // owned here: stopped and waited for before return
		defer close(handlerDone)
		for n := 0; ; n++ {
			select {
			case <-sigs:
				if n == 0 {
					fmt.Fprintf(e.stderr, "\n%s demo: stopping replicas and the control plane (Ctrl-C again to kill the replicas at once)...\n", e.prog)
					cancel()
				} else {
					close(hurry)
					return
				}
			case <-stopHandler:
				return
			}
		}
	}()
	defer func() {
		signal.Stop(sigs)
		close(stopHandler)
		<-handlerDone
	}()

	exe, cleanup, err := exampleOperator(ctx, e.stderr, e.prog)
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	defer cleanup()
	_, err = demo.Run(ctx, demo.Options{
		Replicas: replicas, Objects: objects, CacheMode: cacheMode, Keep: keep, Timeout: timeout,
		Executable: exe, Prog: e.prog,
		Stdout: e.stdout, Stderr: e.stderr, TTY: isTerminal(e.stdout), Hurry: hurry,
	})
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	return err
}

// isTerminal reports whether w is a terminal, where the table may be
// redrawn in place.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
