package assign

import (
	"fmt"
	"strings"
)

// fingerprintFields names the fields of a Fingerprint after the hash
// scheme, by the letter that starts each one.
var fingerprintFields = map[byte]string{'p': "partitions", 'l': "load", 'r': "replication factor"}

// FingerprintDiff names the ring parameters in which the fingerprint theirs
// differs from ours, e.g. "partitions 1021, not 271", for messages about a
// replica of another ring configuration. It returns "" when they are equal,
// and both whole fingerprints when either cannot be read field by field
// (another kshard version may write another format).
func FingerprintDiff(ours, theirs string) string {
	if ours == theirs {
		return ""
	}
	a, b := strings.Split(ours, "-"), strings.Split(theirs, "-")
	whole := fmt.Sprintf("params %q, not %q", theirs, ours)
	if len(a) != len(b) || len(a) < 2 {
		return whole
	}
	var diffs []string
	if a[0] != b[0] {
		diffs = append(diffs, fmt.Sprintf("hash scheme %s, not %s", b[0], a[0]))
	}
	for i := 1; i < len(a); i++ {
		if a[i] == "" || b[i] == "" || a[i][0] != b[i][0] {
			return whole
		}
		name, ok := fingerprintFields[a[i][0]]
		if !ok {
			return whole
		}
		if a[i] != b[i] {
			diffs = append(diffs, fmt.Sprintf("%s %s, not %s", name, b[i][1:], a[i][1:]))
		}
	}
	if len(diffs) == 0 {
		return whole
	}
	return strings.Join(diffs, "; ")
}
