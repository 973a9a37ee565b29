package assign

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kshard/kshard/shard"
)

// Weights are the object counts of a ring's partitions, quantized, as
// replicas report them in their Leases and as a balanced ring (Config.Balance)
// places them. Weights[p] is the bucket of partition p (WeightBucket); 0
// means that p's count is not known. A value of length 0 reports nothing.
//
// Counts are quantized into buckets about 10 % apart so that the small
// changes of a live cluster leave the published weights, and so the ring,
// unchanged, and so that a weight fits in a byte.
type Weights []uint8

// weightTable[b] is 1000 × 1.1^b computed in integers, the fixed-point
// representative of bucket b+1: integer arithmetic, unlike math.Pow, gives
// every replica on every architecture the same table and so the same ring.
var weightTable = func() (t [255]uint64) {
	t[0] = 1000
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 11 / 10
	}
	return t
}()

// WeightBucket quantizes an object count: the bucket b ≥ 1 whose
// representative is the largest not above count. Counts past about 3×10¹⁰
// share the last bucket.
func WeightBucket(count int) uint8 {
	scaled := (uint64(max(count, 0)) + 1) * 1000
	b := 0
	for b+1 < len(weightTable) && weightTable[b+1] <= scaled {
		b++
	}
	return uint8(b + 1)
}

// weightOf returns the object count bucket b stands for, in thousandths of
// an object (0 for an empty partition); 0 also for the unknown bucket 0.
func weightOf(b uint8) uint64 {
	if b == 0 {
		return 0
	}
	return weightTable[b-1] - 1000
}

// Known reports how many partitions have a known weight.
func (w Weights) Known() int {
	n := 0
	for _, b := range w {
		if b != 0 {
			n++
		}
	}
	return n
}

// Equal reports whether w and o hold the same buckets.
func (w Weights) Equal(o Weights) bool { return string(w) == string(o) }

// Clone returns a copy of w that shares no storage with it.
func (w Weights) Clone() Weights {
	if w == nil {
		return nil
	}
	return append(Weights{}, w...)
}

// MaxWeights merges w into dst, keeping each partition's largest bucket, and
// returns dst (allocated when nil). A w not of length partitions (none
// reported, or a report for another ring) is ignored. This is how a
// balanced ring's weights are gathered from the Leases: every holder of a
// partition counts the same objects, so the largest report stands for it.
func MaxWeights(dst, w Weights, partitions int) Weights {
	if len(w) != partitions || partitions == 0 {
		return dst
	}
	if len(dst) != partitions {
		dst = make(Weights, partitions)
	}
	for p, b := range w {
		dst[p] = max(dst[p], b)
	}
	return dst
}

// weightsVersion prefixes the encoding, as the claim format's version does
// for claims.
const weightsVersion = "w1"

// weightsEncoding is strict, as the claims' is, so that every Weights has
// exactly one encoding and peers can compare them as strings.
var weightsEncoding = base64.RawURLEncoding.Strict()

// ErrWeightsMalformed is wrapped by DecodeWeights' errors.
var ErrWeightsMalformed = errors.New("malformed partition weights")

// Encode returns the canonical text of w: "w1:<P>:<base64 of the P buckets>"
// (unpadded URL-safe base64, as claims use). A Weights of length 0 encodes
// as "".
func (w Weights) Encode() string {
	if len(w) == 0 {
		return ""
	}
	return weightsVersion + ":" + strconv.Itoa(len(w)) + ":" + weightsEncoding.EncodeToString(w)
}

// DecodeWeights parses Encode's text for a ring of the given partitions; only
// canonical text is accepted, and any error wraps ErrWeightsMalformed.
func DecodeWeights(text string, partitions int) (Weights, error) {
	fail := func(reason string) (Weights, error) {
		return nil, fmt.Errorf("%w %q: %s", ErrWeightsMalformed, truncate(text), reason)
	}
	if partitions < 1 || partitions > shard.MaxPartitions {
		return fail(fmt.Sprintf("partition count %d is outside [1, %d]", partitions, shard.MaxPartitions))
	}
	want := weightsVersion + ":" + strconv.Itoa(partitions) + ":"
	payload, ok := strings.CutPrefix(text, want)
	if !ok {
		return fail(fmt.Sprintf("want the prefix %q; its writer runs another kshard or another Config.Partitions", want))
	}
	// Compare lengths before decoding so that an oversized input is
	// rejected without allocating for it; base64 skips line breaks, which
	// would also make a right-length payload decode short.
	if len(payload) != weightsEncoding.EncodedLen(partitions) || strings.ContainsAny(payload, "\r\n") {
		return fail(fmt.Sprintf("want %d base64 characters for %d partitions", weightsEncoding.EncodedLen(partitions), partitions))
	}
	raw, err := weightsEncoding.DecodeString(payload)
	if err != nil {
		return fail("not unpadded URL-safe base64: " + err.Error())
	}
	return Weights(raw), nil
}

// truncate keeps error messages about foreign annotations short.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
