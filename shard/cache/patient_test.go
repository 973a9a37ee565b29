package cache

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

func TestUnreachableCallsAreRetriedOthersReturned(t *testing.T) {
	refused := &refusedError{err: syscall.ECONNREFUSED}
	calls := 0
	v, err := retryUnreachable(context.Background(), clock.RealClock{}, func() (int, error) {
		calls++
		if calls < 3 {
			return 0, refused
		}
		return 42, nil
	})
	if v != 42 || err != nil || calls != 3 {
		t.Fatalf("got %d, %v after %d calls; want 42, nil after 3", v, err, calls)
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no"))
	calls = 0
	_, err = retryUnreachable(context.Background(), clock.RealClock{}, func() (int, error) { calls++; return 0, forbidden })
	if !apierrors.IsForbidden(err) || calls != 1 {
		t.Fatalf("forbidden: %v after %d calls; want it returned after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	done := make(chan error, 1)
	go func() {
		_, err := retryUnreachable(ctx, clock.RealClock{}, func() (int, error) {
			calls++
			if calls == 2 {
				cancel()
			}
			return 0, refused
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled retry returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("retry did not stop when its context ended")
	}
}

// refusedError is a minimal connection-refused error as the dialer wraps it.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return "dial tcp 127.0.0.1:6443: connect: " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }
