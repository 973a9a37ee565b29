// Package lease is a fixture: the keys a member Lease carries.
package lease

// A member Lease's label and annotation.
const (
	LabelRing           = "kshard.io/ring"
	AnnotationReturning = "kshard.io/returning"
	notAKey             = "ring"
)
