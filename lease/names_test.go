package lease

import (
	"strings"
	"testing"
)

// The one rule for the names a member's Lease is made of: a ring is a
// DNS-1123 label, an identity a DNS-1123 subdomain (a pod's name) that
// keeps <ring>-<identity> a valid object name, a namespace a DNS-1123
// label.
func TestValidateNames(t *testing.T) {
	for _, tc := range []struct {
		ring, identity string
		want           string // "" for valid
	}{
		{"r", "r-0", ""},
		{"r", "web.v2-0", ""},               // a pod name with dots
		{"r", strings.Repeat("a", 100), ""}, // longer than a label, still a name
		{"r", "", "is empty"},               //
		{"r", "Pod_0", "is not a DNS-1123 subdomain"},
		{"r", strings.Repeat("a", 252), "shorten the ring name or the identity"},
		{"", "r-0", "is empty"},
		{"Ring_1", "r-0", "is not a DNS-1123 label"},
		{"r.x", "r-0", "is not a DNS-1123 label"},
		{strings.Repeat("r", 64), "r-0", "is not a DNS-1123 label"},
	} {
		err := ValidateRing(tc.ring)
		if err == nil {
			err = ValidateIdentity(tc.ring, tc.identity)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ring %q identity %q: %v; want valid", tc.ring, tc.identity, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ring %q identity %q: %v; want an error containing %q", tc.ring, tc.identity, err, tc.want)
		}
	}
	for ns, want := range map[string]string{"kshard-system": "", "": "is empty", "Kshard": "is not a namespace name", "a.b": "is not a namespace name"} {
		err := ValidateNamespace(ns)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("namespace %q: %v; want %q", ns, err, want)
		}
	}
}
