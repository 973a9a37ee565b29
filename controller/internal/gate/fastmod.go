package gate

import "math/bits"

// fastMod computes x mod d with three multiplications instead of a 64-bit
// division (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation",
// 2019): with M = ⌊(2¹²⁸−1)/d⌋+1, x mod d = ⌊((M·x) mod 2¹²⁸) · d / 2¹²⁸⌋,
// exact for every 64-bit x and d ≥ 1. It saves a few nanoseconds of the
// gate's budget per event.
type fastMod struct {
	d      uint64
	mHi    uint64
	mLo    uint64
	isUnit bool // d == 1: M would overflow 128 bits; x mod 1 is 0
}

func newFastMod(d uint64) fastMod {
	if d <= 1 {
		return fastMod{d: 1, isUnit: true}
	}
	max64 := ^uint64(0)
	qHi, r := max64/d, max64%d
	qLo, _ := bits.Div64(r, max64, d)
	lo, carry := bits.Add64(qLo, 1, 0)
	return fastMod{d: d, mHi: qHi + carry, mLo: lo}
}

func (f fastMod) of(x uint64) uint64 {
	if f.isUnit {
		return 0
	}
	// low = M·x mod 2¹²⁸
	pHi, lowLo := bits.Mul64(f.mLo, x)
	lowHi := pHi + f.mHi*x
	// ⌊low·d / 2¹²⁸⌋
	cHi, _ := bits.Mul64(lowLo, f.d)
	yHi, yLo := bits.Mul64(lowHi, f.d)
	_, carry := bits.Add64(yLo, cHi, 0)
	return yHi + carry
}
