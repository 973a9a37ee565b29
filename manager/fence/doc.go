// Package fence is the last check before a write leaves a replica: an
// http.RoundTripper for rest.Config.Wrap that refuses a write issued under a
// lease validity that has passed (controller.WithLeaseValidity), reading the
// clock at the moment of sending, because after a pause the process may
// resume with its partitions already taken over by a peer.
//
// It imports controller (for the validity) and nothing of manager: kshard's
// manager puts it on every client it builds, and another runtime's adapter
// (controller/crshard) on its manager's rest config.
package fence
