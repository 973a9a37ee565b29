package logging

import (
	"testing"
	"time"
)

// The "ts" of every line is ISO 8601: RFC 3339 parsers read it back exactly.
func TestTimestampIsISO8601(t *testing.T) {
	at := time.Date(2026, 12, 6, 5, 38, 25, 123456000, time.FixedZone("", 3600))
	s := at.Format(TimestampFormat)
	if s != "2026-12-06T05:38:25.123456+01:00" {
		t.Errorf("formatted %q", s)
	}
	back, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !back.Equal(at) {
		t.Errorf("RFC 3339 parse of %q: %v, %v", s, back, err)
	}
	if z := at.UTC().Format(TimestampFormat); z != "2026-12-06T04:38:25.123456Z" {
		t.Errorf("UTC formatted %q, want a Z suffix", z)
	}
}
