package gate

import (
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestJoinedHashEqualsXXH64 checks the in-place hash against the reference
// implementation for every length up to 130 and every split point, so every
// stripe, word, half-word and byte path meets the separator.
func TestJoinedHashEqualsXXH64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 130)
	for total := 1; total <= len(buf); total++ {
		for i := range buf[:total] {
			buf[i] = byte('a' + rng.IntN(26))
		}
		for sep := 0; sep < total; sep++ {
			a, b := string(buf[:sep]), string(buf[sep+1:total])
			want := xxhash.Sum64String(a + "/" + b)
			if got := xxh64Joined(a, b); got != want {
				t.Fatalf("xxh64Joined(%q, %q) = %#x, want %#x", a, b, got, want)
			}
		}
	}
}

func TestShortHashEqualsXXH64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, wordBuf)
	for total := 1; total <= wordBuf; total++ {
		for i := range buf[:total] {
			buf[i] = byte('a' + rng.IntN(26))
		}
		for sep := 0; sep < total; sep++ {
			a, b := string(buf[:sep]), string(buf[sep+1:total])
			want := xxhash.Sum64String(a + "/" + b)
			if got := xxh64Short(a, b); got != want {
				t.Fatalf("xxh64Short(%q, %q) = %#x, want %#x", a, b, got, want)
			}
		}
	}
}
