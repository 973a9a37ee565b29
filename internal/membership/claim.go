package membership

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kshard/kshard/shard"
)

// claimVersion prefixes every encoded claim so that the format can change
// without a replica misreading a peer that runs newer code.
const claimVersion = "v1"

// claimEncoding is strict so that every set has exactly one encoding: a
// decoded claim re-encodes to the same text, and peers can compare claims as
// strings.
var claimEncoding = base64.RawURLEncoding.Strict()

// Errors a DecodeError wraps; test with errors.Is.
var (
	// ErrClaimVersion: the claim was written in a format this code does not
	// know, most likely by a newer kshard.
	ErrClaimVersion = errors.New("unknown claim format version")
	// ErrClaimPartitions: the claim is for a ring with another partition
	// count, so the writer runs with a different Config.
	ErrClaimPartitions = errors.New("claim partition count differs from the ring's")
	// ErrClaimMalformed: the claim is not a well-formed encoding.
	ErrClaimMalformed = errors.New("malformed claim")
)

// EncodeClaim returns s as a versioned, compact text for a Lease annotation
// (AnnotationClaim, AnnotationWarm): "v1:<size>:<bitmap>",
// where the bitmap holds partition p in bit p%8 of byte p/8 and is written
// in unpadded URL-safe base64. An empty set still carries its size. At the
// default 271 partitions the text is 53 bytes.
func EncodeClaim(s shard.PartitionSet) string {
	raw := make([]byte, (s.Size()+7)/8)
	for p := range s.All() {
		raw[p/8] |= 1 << (p % 8)
	}
	return claimVersion + ":" + strconv.Itoa(s.Size()) + ":" + claimEncoding.EncodeToString(raw)
}

// DecodeClaim parses text written by EncodeClaim and checks that it is a
// claim over exactly the given number of partitions. Every other input (an
// unknown version, another partition count, bad base64, a truncated or
// overlong bitmap, bits set at or beyond the partition count) returns a
// *DecodeError wrapping ErrClaimVersion, ErrClaimPartitions or
// ErrClaimMalformed.
func DecodeClaim(text string, partitions int) (shard.PartitionSet, error) {
	fail := func(err error) (shard.PartitionSet, error) {
		return shard.PartitionSet{}, &DecodeError{Text: text, Err: err}
	}
	if partitions < 0 || partitions > shard.MaxPartitions {
		return fail(fmt.Errorf("%w: expected partition count %d is outside [0, %d]", ErrClaimPartitions, partitions, shard.MaxPartitions))
	}
	version, rest, ok := strings.Cut(text, ":")
	if !ok {
		return fail(fmt.Errorf("%w: want %s:<partitions>:<base64 bitmap>", ErrClaimMalformed, claimVersion))
	}
	if version != claimVersion {
		return fail(fmt.Errorf("%w %q: this kshard reads only %s; upgrade it to match its peers", ErrClaimVersion, version, claimVersion))
	}
	sizeText, payload, ok := strings.Cut(rest, ":")
	if !ok {
		return fail(fmt.Errorf("%w: missing ':' after the partition count", ErrClaimMalformed))
	}
	size, err := strconv.Atoi(sizeText)
	// Only the canonical decimal is accepted ("271", not "+271" or "0271"),
	// so that each set has a single encoding.
	if err != nil || size < 0 || strconv.Itoa(size) != sizeText {
		return fail(fmt.Errorf("%w: partition count %q is not a canonical decimal", ErrClaimMalformed, sizeText))
	}
	if size != partitions {
		return fail(fmt.Errorf("%w: claim is over %d partitions, this ring has %d; its writer runs with another Config.Partitions", ErrClaimPartitions, size, partitions))
	}
	nbytes := (size + 7) / 8
	// Compare lengths before decoding so that an oversized input is rejected
	// without allocating for it.
	if want := claimEncoding.EncodedLen(nbytes); len(payload) != want {
		return fail(fmt.Errorf("%w: bitmap is %d base64 characters, %d partitions need exactly %d", ErrClaimMalformed, len(payload), size, want))
	}
	// encoding/base64 silently skips '\r' and '\n', so a right-length payload
	// with line breaks decodes short; such text is not canonical either.
	if strings.ContainsAny(payload, "\r\n") {
		return fail(fmt.Errorf("%w: bitmap contains a line break", ErrClaimMalformed))
	}
	raw, err := claimEncoding.DecodeString(payload)
	if err != nil {
		return fail(fmt.Errorf("%w: bitmap is not unpadded URL-safe base64: %w", ErrClaimMalformed, err))
	}
	if len(raw) != nbytes {
		return fail(fmt.Errorf("%w: bitmap decodes to %d bytes, %d partitions need %d", ErrClaimMalformed, len(raw), size, nbytes))
	}
	if r := size % 8; r != 0 && raw[nbytes-1]>>r != 0 {
		return fail(fmt.Errorf("%w: bits set at or beyond partition %d", ErrClaimMalformed, size))
	}
	s := shard.NewPartitionSet(size)
	for i, b := range raw {
		for ; b != 0; b &= b - 1 {
			s.Add(i*8 + bits.TrailingZeros8(b))
		}
	}
	return s, nil
}

// DecodeError says why a claim text could not be decoded. Err wraps one of
// ErrClaimVersion, ErrClaimPartitions or ErrClaimMalformed.
type DecodeError struct {
	Text string // the input, in full
	Err  error
}

// maxQuotedClaim bounds how much of a bad claim goes into an error message, so
// that a garbage annotation cannot flood the logs.
const maxQuotedClaim = 64

func (e *DecodeError) Error() string {
	text := e.Text
	if len(text) > maxQuotedClaim {
		text = text[:maxQuotedClaim] + "..."
	}
	return fmt.Sprintf("shard: decode partition claim %q: %v", text, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }
