package gate

import (
	"encoding/binary"
	"github.com/cespare/xxhash/v2"
	"math/bits"
	"unsafe"
)

// XXH64 constants (seed 0), from the xxHash specification.
const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
	prime5 uint64 = 0x27D4EB2F165667C5
)

// joined is the byte string a + "/" + b, read in place, so that keys of any
// length hash without allocating. Keys of up to wordBuf bytes take the
// faster xxh64Short.
type joined struct {
	a, b string
	n    int // len(a) + 1 + len(b)
}

func (j *joined) byteAt(i int) uint64 {
	switch la := len(j.a); {
	case i < la:
		return uint64(j.a[i])
	case i == la:
		return '/'
	default:
		return uint64(j.b[i-la-1])
	}
}

func load64(s string) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), 8))
}

func load32(s string) uint64 {
	return uint64(binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(s), 4)))
}

// prefix returns the first n bytes of s (n ≤ 8, n ≤ len(s)) in a word,
// using whole-word loads where s is long enough.
func prefix(s string, n int) uint64 {
	if n == 0 {
		return 0
	}
	var v uint64
	switch {
	case len(s) >= 8:
		v = load64(s)
	case len(s) >= 4:
		// Two overlapping half-words cover all of s.
		v = load32(s) | load32(s[len(s)-4:])<<(8*(len(s)-4))
	default:
		for x := len(s) - 1; x >= 0; x-- {
			v = v<<8 | uint64(s[x])
		}
	}
	if n < 8 {
		v &= 1<<(8*n) - 1
	}
	return v
}

// suffix returns the last n bytes of s (n ≤ 8, n ≤ len(s)) in a word.
func suffix(s string, n int) uint64 {
	if n == 0 {
		return 0
	}
	if len(s) >= 8 {
		return load64(s[len(s)-8:]) >> (8 * (8 - n))
	}
	return prefix(s[len(s)-n:], n)
}

// u64 returns the little-endian word at i, loading it directly when it lies
// within a or within b (small enough to be inlined in the hash loops).
func (j *joined) u64(i int) uint64 {
	if la := len(j.a); i+8 <= la {
		return load64(j.a[i:])
	} else if i > la {
		return load64(j.b[i-la-1:])
	}
	return j.straddle(i)
}

// straddle assembles the word at i from a's tail, the separator and b's head.
func (j *joined) straddle(i int) uint64 {
	k := len(j.a) - i // bytes taken from a, 0..7
	return suffix(j.a, k) | '/'<<(8*k) | prefix(j.b, 7-k)<<(8*(k+1))
}

func (j *joined) u32(i int) uint64 {
	la := len(j.a)
	if i+4 <= la {
		return uint64(binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(j.a[i:]), 4)))
	}
	if i > la {
		return uint64(binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(j.b[i-la-1:]), 4)))
	}
	var v uint64
	for k := 3; k >= 0; k-- {
		v = v<<8 | j.byteAt(i+k)
	}
	return v
}

func round(acc, input uint64) uint64 {
	acc += input * prime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * prime1
}

func mergeRound(acc, val uint64) uint64 {
	acc ^= round(0, val)
	return acc*prime1 + prime4
}

// xxh64Joined is XXH64 (seed 0) of a + "/" + b. The word loads are written
// out in the loops (rather than calling u64) so the common case, a word
// lying wholly within a or within b, is a single inlined load.
func xxh64Joined(a, b string) uint64 {
	j := joined{a: a, b: b, n: len(a) + 1 + len(b)}
	la, n := len(a), j.n
	i := 0
	var h uint64
	if n >= 32 {
		p1, p2 := prime1, prime2 // variables: the seeds wrap, as the spec's arithmetic does
		v1, v2, v3, v4 := p1+p2, p2, uint64(0), -p1
		for ; i+32 <= n; i += 32 {
			v1 = round(v1, j.u64(i))
			v2 = round(v2, j.u64(i+8))
			v3 = round(v3, j.u64(i+16))
			v4 = round(v4, j.u64(i+24))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = mergeRound(h, v1)
		h = mergeRound(h, v2)
		h = mergeRound(h, v3)
		h = mergeRound(h, v4)
	} else {
		h = prime5
	}
	h += uint64(n)
	for ; i+8 <= n; i += 8 {
		var k uint64
		switch {
		case i+8 <= la:
			k = load64(a[i:])
		case i > la:
			k = load64(b[i-la-1:])
		default:
			k = j.straddle(i)
		}
		h ^= round(0, k)
		h = bits.RotateLeft64(h, 27)*prime1 + prime4
	}
	if i+4 <= n {
		h ^= j.u32(i) * prime1
		h = bits.RotateLeft64(h, 23)*prime2 + prime3
		i += 4
	}
	for ; i < n; i++ {
		h ^= j.byteAt(i) * prime5
		h = bits.RotateLeft64(h, 11) * prime1
	}
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// wordBuf bounds the keys hashed by xxh64Short.
const wordBuf = 64

// xxh64Short is XXH64 of a + "/" + b for keys of up to wordBuf bytes.
// It assembles the key in registers, word by word (a direct load from a or
// from b, or, at the separator, a few shifts), stores each word whole into a
// stack buffer and hashes the buffer with the assembly implementation.
// Copying the strings in instead would be slower: the hash's word loads
// would each span several of the copy's stores, which the CPU cannot
// forward and stalls on.
func xxh64Short(a, b string) uint64 {
	var buf [wordBuf]byte
	la, lb := len(a), len(b)
	n := la + 1 + lb
	i := 0
	for ; i+8 <= n; i += 8 {
		var k uint64
		switch {
		case i+8 <= la:
			k = load64(a[i:])
		case i > la:
			k = load64(b[i-la-1:])
		case la >= 8 && lb >= 8:
			// The word at the separator: a's last la-i bytes, "/", then
			// b's first bytes; shifts by 64 yield 0, as needed at the ends.
			kk := uint(la - i)
			k = load64(a[la-8:])>>(8*(8-kk)) | '/'<<(8*kk) | load64(b)<<(8*(kk+1))
		default:
			k = span(a, b, i, 8)
		}
		binary.LittleEndian.PutUint64(buf[i:], k)
	}
	if rest := n - i; rest > 0 {
		var k uint64
		switch {
		case i <= la:
			k = span(a, b, i, rest)
		case lb >= 8:
			k = load64(b[lb-8:]) >> (8 * (8 - rest))
		default:
			k = prefix(b[i-la-1:], rest)
		}
		binary.LittleEndian.PutUint64(buf[i:], k)
	}
	return xxhash.Sum64(buf[:n])
}

// span returns bytes [i, i+cnt) of a + "/" + b, where i ≤ len(a) < i+cnt.
func span(a, b string, i, cnt int) uint64 {
	k := len(a) - i // bytes from a
	v := suffix(a, k) | '/'<<(8*k)
	if fromB := cnt - k - 1; fromB > 0 {
		v |= prefix(b, fromB) << (8 * (k + 1))
	}
	return v
}
