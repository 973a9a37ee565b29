package membership

import (
	"strings"
	"testing"
)

// An incarnation is written as a label-safe annotation and told apart from
// every other process's.
func TestNewIncarnation(t *testing.T) {
	a, b := NewIncarnation(), NewIncarnation()
	if len(a) != 16 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("incarnations %q and %q; want two distinct 16-digit hex ids", a, b)
	}
}
