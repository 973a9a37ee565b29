// Package testwait is how kshard's tests wait for a condition: one poll,
// on k8s.io/apimachinery's wait.PollUntilContextTimeout, that fails the
// test naming what it waited for, the timeout and the condition's last
// word. Tests wait for a state to be reached, never for time to pass:
// a fixed sleep is either too short on a loaded machine or proves nothing.
//
// It is test support: only tests (and the e2e harness) of both modules
// import it. The adapter module may, because Go's internal rule is by
// import path: github.com/kshard/kshard/controller/crshard is inside
// github.com/kshard/kshard.
package testwait
