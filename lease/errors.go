package lease

import "errors"

// ErrInvalidOptions is wrapped by every error returned for bad options:
// NewLeaderLease's, and those of the member Lease a replica builds from its
// ring options.
var ErrInvalidOptions = errors.New("lease: invalid options")
