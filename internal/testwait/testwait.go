package testwait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// How often True and For check their condition: often enough that a test
// waits little past the moment the state is reached, rarely enough not to
// load a shared 2-core machine. True's conditions are mostly reads of
// memory; For's, with the state they saw to report, mostly reads of the
// API server (a condition that costs more picks its own interval with
// NoError).
const (
	TrueInterval = 10 * time.Millisecond
	ForInterval  = 50 * time.Millisecond
)

// Poll checks cond every interval, the first time at once, until it
// returns nil or timeout passes. It returns nil once cond did; otherwise
// an error naming the timeout and wrapping cond's last error. A cond that
// knows the state can no longer be reached returns Stop(err): Poll then
// returns err at once. It is the one loop under True, For and NoError, for
// callers that report a failure themselves.
func Poll(interval, timeout time.Duration, cond func() error) error {
	last := errors.New("not checked yet")
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		var stop stopped
		if errors.As(last, &stop) {
			return false, stop
		}
		return last == nil, nil
	})
	var stop stopped
	switch {
	case err == nil:
		return nil
	case errors.As(err, &stop):
		return stop.err
	default:
		return fmt.Errorf("not within %s: %w", timeout, last)
	}
}

// Stop marks err as final: Poll stops waiting and returns err.
func Stop(err error) error { return stopped{err} }

type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }

// True fails t unless cond holds within timeout.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := Poll(TrueInterval, timeout, func() error {
		if cond() {
			return nil
		}
		return errors.New("still false")
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// For fails t unless cond holds within timeout, with the detail cond
// returned last (the state it saw instead) in the message.
func For(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	err := Poll(ForInterval, timeout, func() error {
		if ok, detail := cond(); !ok {
			return errors.New(detail)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// NoError fails t unless cond returns nil within timeout, checking it
// every interval (the caller's pick, for what one check costs), with
// cond's last error in the message.
func NoError(t testing.TB, interval, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(interval, timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
