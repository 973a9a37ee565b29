package assign

import (
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestFingerprintDiff(t *testing.T) {
	ours := shard.Config{}.Fingerprint()
	for _, tc := range []struct{ theirs, want string }{
		{ours, ""},
		{shard.Config{Partitions: 1021}.Fingerprint(), "partitions 1021, not 271"},
		{shard.Config{Partitions: 97, Load: 2}.Fingerprint(), "partitions 97, not 271; load 2, not 1.05"},
		{"zz9-p271-l1.05-r40", "hash scheme zz9, not xx1"},
		// A replica from before DefaultLoad became 1.05.
		{"xx1-p271-l1.25-r40", "load 1.25, not 1.05"},
		{"v2:something", `params "v2:something", not "xx1-p271-l1.05-r40"`},
		{"xx1-q271-l1.05-r40", `params "xx1-q271-l1.05-r40", not "xx1-p271-l1.05-r40"`},
	} {
		if got := FingerprintDiff(ours, tc.theirs); got != tc.want {
			t.Errorf("FingerprintDiff(%q, %q) = %q, want %q", ours, tc.theirs, got, tc.want)
		}
	}
}
