// Package fence is the last check before a write leaves a replica: an
// http.RoundTripper for rest.Config.Wrap that refuses a write, reading the
// clock at the moment of sending, because after a pause the process may
// resume with its partitions already taken over by a peer, before any
// timer or fence of its own has run.
//
// # The rule
//
//   - A write issued under a lease validity (a reconcile's or a singleton's
//     context, controller.WithLeaseValidity) is refused once that validity
//     has passed or a fence has ended its epoch.
//   - A write issued without one (context.Background, a helper's
//     context.TODO) is refused while the replica's own validity (the ring
//     coordinator's), once held, has passed or was ended by a fence, until
//     a renewal re-establishes it. Before the replica was ever valid
//     (starting, not a member yet) it passes, so setup writes work.
//   - Reads pass.
//
// Refusals wrap controller.ErrLeaseExpired and are counted in
// kshard_writes_refused_total{reason="reconcile"|"replica"}.
//
// # Who carries it
//
// Only the clients of user code. kshard's own clients (Lease renewals, pod
// reads for proofs of death, the sharded cache and its label patches) are
// built from a rest config that never had it, so a replica that lost its
// validity can renew it back.
//
// # What remains
//
// A request already handed to the connection before the validity passed
// (a pause that began while it was on the wire) lands when the network
// delivers it, possibly after a peer took the key over. Writes that must
// never be stale should carry a resourceVersion precondition.
//
// It imports controller (for the validity) and nothing of manager: kshard's
// manager puts it on the clients of user code it builds, and another
// runtime's adapter (controller/crshard) on its manager's rest config.
package fence
