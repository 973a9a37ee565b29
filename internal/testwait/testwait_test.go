package testwait

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	err := Poll(time.Millisecond, time.Minute, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls.Load())
	}
}

func TestPollChecksAtOnce(t *testing.T) {
	var calls atomic.Int32
	// An interval no test waits for: the first check must not wait for it.
	if err := Poll(time.Hour, time.Hour, func() error { calls.Add(1); return nil }); err != nil || calls.Load() != 1 {
		t.Fatalf("Poll = %v after %d calls, want nil after 1", err, calls.Load())
	}
}

func TestPollNamesTheTimeoutAndTheLastError(t *testing.T) {
	errLast := errors.New("3 of 4 replicas ready")
	err := Poll(time.Millisecond, 20*time.Millisecond, func() error { return errLast })
	if !errors.Is(err, errLast) || !strings.Contains(err.Error(), "not within 20ms") {
		t.Fatalf("Poll = %v, want the timeout and %v", err, errLast)
	}
}

func TestPollEndsOnStop(t *testing.T) {
	errGone := errors.New("the replica exited")
	var calls atomic.Int32
	err := Poll(time.Millisecond, time.Hour, func() error {
		if calls.Add(1) == 2 {
			return Stop(errGone)
		}
		return errors.New("not yet")
	})
	if err != errGone || calls.Load() != 2 {
		t.Fatalf("Poll = %v after %d calls, want %v after 2", err, calls.Load(), errGone)
	}
}
