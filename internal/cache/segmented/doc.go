// Package segmented is the sharded informer of one resource by the API
// server's shard selector or the ring's partition label: it holds the
// partitions it is told to (ring.PartitionCache), one informer per gain.
//
// A gain starts a segment, an informer that lists only the gained ranges,
// so nothing cached is listed again; a release hides the partitions at once
// and stops a segment none of whose partitions is held; more than
// MaxSegments (default 4) are compacted into one informer of everything
// held, which replaces them once synced. So a replica holds one to
// MaxSegments+1 watches per resource. Segments LIST (watch-list off) so
// every response is checked as a whole (an object outside the selector
// shows the server ignored it), and every item and event passes a
// client-side partition check before the store. Where the server does not
// filter, one informer of the whole resource is filtered on the client, and
// Options.Reprobe may move it to the server's filter later.
//
// shard/cache builds one per sharded kind (ModeSharded, ModeFallback);
// internal/cache/labelled builds one of label segments.
package segmented
