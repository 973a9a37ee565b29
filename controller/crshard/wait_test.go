package crshard

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The adapter's tests wait as kshard's own do through internal/testwait,
// on wait.PollUntilContextTimeout, with a copy of its two helpers: the
// adapter is a module of its own and imports no internal package of the
// root (hack/apicheck's layering), its tests included, since a user's
// build may pair it with a newer root module.

// waitFor fails t unless cond holds within timeout, checking it every
// 50ms, with the state cond reported last in the message.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	last := "not checked yet"
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, detail := cond()
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: not within %s: %s", what, timeout, last)
	}
}

// waitUntil fails t unless cond holds within timeout, checking it every
// 10ms.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: not within %s", what, timeout)
	}
}
