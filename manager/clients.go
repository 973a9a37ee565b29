package manager

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// configs are the rest configs a Manager builds its clients from.
type configs struct {
	// user is for the clients of user code (GetConfig, GetClient): it
	// carries the fencing transport, which refuses writes once the lease
	// validity passed.
	user *rest.Config
	// own is for kshard's own clients: Lease renewals, pod reads for
	// proofs of death, the cache and its permission reviews. It never
	// carries the fencing transport: a replica whose validity passed must
	// still renew to get it back.
	own *rest.Config
	// labels is for the sharded cache's label patches: own without the
	// client-side rate limit (the labeller bounds its own rate). A label
	// is a pure function of an object's key, so a late one is harmless.
	labels *rest.Config
}

// clientConfigs copies cfg (the caller's is left alone) with the client
// limits of opts, and wraps only the user's copy with fence.
func clientConfigs(cfg *rest.Config, opts Options, fence func(http.RoundTripper) http.RoundTripper) configs {
	own := rest.CopyConfig(cfg)
	// Field by field: a user who set one limit on purpose keeps it.
	if own.QPS == 0 {
		own.QPS = opts.QPS
	}
	if own.Burst == 0 {
		own.Burst = opts.Burst
	}
	labels := rest.CopyConfig(cfg)
	labels.QPS, labels.Burst = -1, 0
	user := rest.CopyConfig(own)
	user.Wrap(fence)
	return configs{user: user, own: own, labels: labels}
}

// protobuf returns a copy of cfg that speaks protobuf, for a typed
// clientset: it serves only built-in kinds, so it spends less CPU per Lease
// write and per object than JSON. GetConfig keeps the caller's content
// type for clients of custom resources.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}
