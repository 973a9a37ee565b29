package membership

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kshard/kshard/shard"
)

func TestClaimRoundTrip(t *testing.T) {
	for _, s := range []shard.PartitionSet{
		{},
		shard.NewPartitionSet(1),
		shard.NewPartitionSet(1, 0),
		shard.NewPartitionSet(271),
		shard.NewPartitionSet(271, 0, 7, 64, 200, 270),
		shard.FullPartitionSet(271),
		shard.NewPartitionSet(1021, 3, 1020),
		shard.FullPartitionSet(shard.MaxPartitions),
	} {
		text := EncodeClaim(s)
		got, err := DecodeClaim(text, s.Size())
		if err != nil {
			t.Fatalf("DecodeClaim(%q, %d): %v", text, s.Size(), err)
		}
		if !got.Equal(s) {
			t.Fatalf("round trip of %v gave %v", s, got)
		}
	}
}

func TestClaimFormat(t *testing.T) {
	// The wire form is shared with peers running other builds: pin it.
	tests := []struct {
		set  shard.PartitionSet
		want string
	}{
		{shard.NewPartitionSet(8, 0, 7), "v1:8:gQ"},
		{shard.NewPartitionSet(9, 8), "v1:9:AAE"},
		{shard.NewPartitionSet(0), "v1:0:"},
	}
	for _, tt := range tests {
		if got := EncodeClaim(tt.set); got != tt.want {
			t.Errorf("Encode(%v) = %q, want %q", tt.set, got, tt.want)
		}
	}
	if got := len(EncodeClaim(shard.NewPartitionSet(shard.DefaultPartitions))); got != 53 {
		t.Errorf("a claim over %d partitions is %d bytes, doc says 53", shard.DefaultPartitions, got)
	}
}

func TestDecodeClaimRejects(t *testing.T) {
	valid := EncodeClaim(shard.NewPartitionSet(271, 1, 2, 3))
	payload := strings.TrimPrefix(valid, "v1:271:")
	tests := []struct {
		name       string
		text       string
		partitions int
		want       error
	}{
		{"empty", "", 271, ErrClaimMalformed},
		{"garbage", "hello world", 271, ErrClaimMalformed},
		{"unknown version", "v2:271:" + payload, 271, ErrClaimVersion},
		{"no version", ":271:" + payload, 271, ErrClaimVersion},
		{"missing second colon", "v1:271", 271, ErrClaimMalformed},
		{"wrong partition count", valid, 1021, ErrClaimPartitions},
		{"expected count out of range", valid, -1, ErrClaimPartitions},
		{"expected count too large", valid, shard.MaxPartitions + 1, ErrClaimPartitions},
		{"non-numeric count", "v1:abc:" + payload, 271, ErrClaimMalformed},
		{"leading zero count", "v1:0271:" + payload, 271, ErrClaimMalformed},
		{"plus-signed count", "v1:+271:" + payload, 271, ErrClaimMalformed},
		{"negative count", "v1:-271:" + payload, 271, ErrClaimMalformed},
		{"truncated bitmap", valid[:len(valid)-2], 271, ErrClaimMalformed},
		{"overlong bitmap", valid + "AA", 271, ErrClaimMalformed},
		{"padded base64", "v1:8:gQ==", 8, ErrClaimMalformed},
		{"standard base64 alphabet", "v1:16:+/8", 16, ErrClaimMalformed},
		{"non-canonical trailing bits", "v1:8:gR", 8, ErrClaimMalformed},
		{"bit set beyond partition count", "v1:9:AAI", 9, ErrClaimMalformed},
		{"bit 271 set in a 271-claim", "v1:271:" + strings.TrimPrefix(EncodeClaim(shard.NewPartitionSet(272, 271)), "v1:272:"), 271, ErrClaimMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeClaim(tt.text, tt.partitions)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeClaim(%q, %d) = %v, %v; want error wrapping %v", tt.text, tt.partitions, got, err, tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Text != tt.text {
				t.Fatalf("error %v is not a *DecodeError carrying the input", err)
			}
			if got.Size() != 0 {
				t.Fatalf("failed decode returned a set of size %d", got.Size())
			}
		})
	}
}

func TestDecodeErrorTruncatesHugeInput(t *testing.T) {
	huge := "v1:271:" + strings.Repeat("A", 100000)
	_, err := DecodeClaim(huge, 271)
	if err == nil || len(err.Error()) > 400 {
		t.Fatalf("error for a 100 kB claim is %d bytes long; want short", len(err.Error()))
	}
}

func FuzzDecodeClaim(f *testing.F) {
	f.Add("v1:271:"+strings.Repeat("A", 46), uint16(271))
	f.Add(EncodeClaim(shard.NewPartitionSet(271, 0, 100, 270)), uint16(271))
	f.Add(EncodeClaim(shard.FullPartitionSet(9)), uint16(9))
	f.Add("v1:0:", uint16(0))
	f.Add("v1:9:AAI", uint16(9))
	f.Add("v2:8:gQ", uint16(8))
	f.Add("garbage", uint16(271))
	// Found by the fuzzer: base64 skips line breaks, so this decoded to 33
	// bytes where 34 were indexed.
	f.Add("v1:271:"+strings.Repeat("A", 44)+"\n\n", uint16(271))
	f.Fuzz(func(t *testing.T, text string, partitions uint16) {
		s, err := DecodeClaim(text, int(partitions))
		if err == nil {
			// A successful decode is canonical: it re-encodes to the input.
			if s.Size() != int(partitions) {
				t.Fatalf("decoded size %d, asked for %d", s.Size(), partitions)
			}
			if got := EncodeClaim(s); got != text {
				t.Fatalf("decode(%q) re-encodes to %q", text, got)
			}
		} else if s.Size() != 0 {
			t.Fatalf("failed decode returned size %d", s.Size())
		}
		// Encode∘Decode round-trips any set; build one from the fuzz input.
		set := shard.NewPartitionSet(int(partitions))
		for i := range len(text) {
			if set.Size() > 0 {
				set.Add(int(text[i]) * (i + 1) % set.Size())
			}
		}
		back, err := DecodeClaim(EncodeClaim(set), int(partitions))
		if err != nil || !back.Equal(set) {
			t.Fatalf("round trip of %v failed: %v, %v", set, back, err)
		}
	})
}

func BenchmarkClaim(b *testing.B) {
	for _, p := range []int{271, 1021} {
		claim := shard.NewPartitionSet(p)
		for q := 1; q < p; q += 3 { // a third of the partitions, as one of three replicas claims
			claim.Add(q)
		}
		text := EncodeClaim(claim)
		b.Run(fmt.Sprintf("Encode/P=%d", p), func(b *testing.B) {
			for b.Loop() {
				_ = EncodeClaim(claim)
			}
		})
		b.Run(fmt.Sprintf("Decode/P=%d", p), func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeClaim(text, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
