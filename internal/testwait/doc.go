// Package testwait is how kshard's tests wait for a condition: one poll,
// on k8s.io/apimachinery's wait.PollUntilContextTimeout, that fails the
// test naming what it waited for, the timeout and the condition's last
// word. Tests wait for a state to be reached, never for time to pass:
// a fixed sleep is either too short on a loaded machine or proves nothing.
//
// It is test support: only the root module's tests and its e2e harness
// import it. The adapter's tests (controller/crshard) carry a copy of For
// and True: the adapter imports no internal package of the root, since a
// user's build may pair it with a newer root module (hack/apicheck's
// layering).
package testwait
