package main

import "flag"

// The pod a replica plays in the bench's phase 6 (restart-in-place
// failover, e2e/bench/restart.go). An operator in a real pod sets neither:
// the adapter reads $POD_NAMESPACE and writes the kubelet's default
// termination message path. They live here rather than in main.go, whose
// difference from the baseline is the conversion the bench counts; the
// two Options fields that use them are counted there.
var (
	podNamespace           = flag.String("pod-namespace", "", "namespace of the pod named by --identity, read as proof of death (default $POD_NAMESPACE)")
	terminationMessagePath = flag.String("termination-message-path", "", "the container's termination message file, where the replica writes its incarnation (default the kubelet's, /dev/termination-log)")
)
