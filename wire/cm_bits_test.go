package wire

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestBitsAgainstBig checks getBits and putBits against math/big on random
// buffers, offsets and widths (1 to 64 bits, any alignment): the field
// reads as the big-endian bits it covers, and a write changes those bits
// only.
func TestBitsAgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 24
	for range 20000 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		w := 1 + r.IntN(64)
		off := r.IntN(n*8 - w + 1)
		whole := new(big.Int).SetBytes(b)
		shift := uint(n*8 - off - w)
		mask := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(w)), big.NewInt(1))
		want := new(big.Int).And(new(big.Int).Rsh(whole, shift), mask).Uint64()
		if got := getBits(b, off, w); got != want {
			t.Fatalf("getBits(% x, %d, %d) = %#x, want %#x", b, off, w, got, want)
		}
		v := r.Uint64()
		putBits(b, off, w, v)
		vm := new(big.Int).And(new(big.Int).SetUint64(v), mask)
		fieldMask := new(big.Int).Lsh(mask, shift)
		exp := new(big.Int).AndNot(whole, fieldMask)
		exp.Or(exp, new(big.Int).Lsh(vm, shift))
		got := new(big.Int).SetBytes(b)
		if got.Cmp(exp) != 0 {
			t.Fatalf("putBits(off %d, w %d, %#x): % x, want %x", off, w, v, b, exp)
		}
	}
}
