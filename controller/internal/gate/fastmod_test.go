package gate

import (
	"math/rand/v2"
	"testing"
)

func TestFastModEqualsRemainder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	divisors := []uint64{1, 2, 3, 7, 64, 271, 1021, 65536, 1<<31 - 1, 1 << 32, 1<<63 + 3, ^uint64(0)}
	for range 50 {
		divisors = append(divisors, rng.Uint64N(1<<20)+1, rng.Uint64()|1)
	}
	xs := []uint64{0, 1, 2, 270, 271, 272, 1<<63 - 1, 1 << 63, ^uint64(0) - 1, ^uint64(0)}
	for _, d := range divisors {
		f := newFastMod(d)
		for _, x := range xs {
			if got, want := f.of(x), x%d; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
			}
		}
		for range 20000 {
			x := rng.Uint64()
			if got, want := f.of(x), x%d; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
			}
		}
	}
}
