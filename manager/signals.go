package manager

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SetupSignalHandler returns a context cancelled on the first SIGTERM or
// SIGINT, which starts a graceful leave; a second signal exits at once with
// code 1, for an operator who does not want to wait for the drain.
func SetupSignalHandler() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}
