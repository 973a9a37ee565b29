package membership

import (
	"crypto/rand"
	"encoding/hex"
)

// NewIncarnation returns a random id for this process, written into its
// Lease so that its writes are told apart from an earlier or duplicate
// process's of the same identity. It is a valid label value.
func NewIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
