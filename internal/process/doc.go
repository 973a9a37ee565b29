// Package process runs a child process the way kshard's tests, benchmark
// and demo need it: in its own process group, with stdout and stderr
// appended to a log file, reaped by a goroutine the Process owns, and ended
// gracefully (SIGTERM, then SIGKILL after a grace period), abruptly
// (SIGKILL, as a crash) or frozen and thawed (SIGSTOP and SIGCONT, as a long
// GC pause or a stopped VM).
//
// Waiting is by condition, never by sleeping: WaitLog waits for a log line,
// ServingAddr for the "serving" line a kshard manager logs once it has
// bound its metrics or probe server. Replicas therefore bind port 0 and the
// caller reads the address the kernel gave them, so no port is chosen ahead
// of time and none can be taken by someone else before it is bound.
//
// It is internal: operator authors' tests run their replicas as processes
// through the test kit, manager/kshardtest, which builds on it (its
// MetricsServer names a server this package's ServingAddr finds). It is Linux-first: process groups, Pdeathsig and /proc are Linux's.
package process
