package kitwriter

import (
	"strings"
	"testing"
)

func TestStartRejectsNothingToWrite(t *testing.T) {
	if _, err := Start(nil, "ns", nil, 10, t.TempDir()); err == nil || !strings.Contains(err.Error(), "0 objects") {
		t.Fatalf("no objects: err = %v", err)
	}
	if _, err := Start(nil, "ns", []string{"a"}, 0, t.TempDir()); err == nil || !strings.Contains(err.Error(), "rate 0") {
		t.Fatalf("rate 0: err = %v", err)
	}
}
