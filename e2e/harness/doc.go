// Package harness runs the e2e test operator (e2e/testoperator) as OS
// processes against a control plane from the test kit
// (manager/kshardtest/controlplane): StatefulSet-style replicas r-0…r-N that
// a test starts, stops (SIGTERM), kills (SIGKILL) and restarts, the kit's
// ConfigMap writer, and waits on the ring read from its Leases. With
// Options.Proxies each replica reaches the API server through a fault proxy
// of its own (e2e/faultproxy) that a test can delay or blackhole. It is the
// kit's process replicas specialised to the test operator's flags and
// recording of its writes.
//
// Every replica, the writer and the harness itself record into one directory
// (see internal/recorder), which a test checks at the end. Use
// Main in TestMain so the operator binary is built once per test binary and
// removed afterwards.
package harness
