package wire

// PSN is a 24-bit packet sequence number (IBTA 9.7.1). Arithmetic wraps at
// 2^24; order is serial-number order, so never compare PSNs with < directly.
type PSN uint32

// PSNMask masks a PSN to its 24 bits.
const PSNMask = 0x00FFFFFF

// Add returns p+n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return (p + PSN(n)) & PSNMask }

// Sub returns p-n modulo 2^24.
func (p PSN) Sub(n uint32) PSN { return (p - PSN(n)) & PSNMask }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return p.Add(1) }

// Compare returns a negative number when p is before q, zero when equal and
// a positive number when p is after q, in serial order: q "ahead" of p by up
// to 2^23-1 is after, by 2^23 or more is before (rxe_hdr.h psn_compare).
func (p PSN) Compare(q PSN) int32 { return int32(uint32(p-q) << 8) }

// Before reports whether p is strictly before q.
func (p PSN) Before(q PSN) bool { return p.Compare(q) < 0 }

// After reports whether p is strictly after q.
func (p PSN) After(q PSN) bool { return p.Compare(q) > 0 }

// Diff returns the signed distance p-q in serial order.
func (p PSN) Diff(q PSN) int32 { return p.Compare(q) >> 8 }

// InWindow reports whether p lies in [start, start+n).
func (p PSN) InWindow(start PSN, n uint32) bool {
	return uint32((p-start)&PSNMask) < n
}
