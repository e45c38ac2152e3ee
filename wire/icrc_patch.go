package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"sync"
)

// ICRC arithmetic for links that cannot put on the wire, or cannot see,
// every header field the ICRC covers (the UDP link, package link: its
// transmit and its receive check).
//
// The ICRC is a CRC-32, and a CRC is linear over GF(2): for two messages
// of equal length, crc(a) ^ crc(b) = raw(a ^ b), the register left by
// running a ^ b through the CRC from a zero register with no final
// inversion (the seed and the final XOR cancel). When a and b differ only
// in a few header bytes, a ^ b is those bytes followed by k zeros, and
// running k zero bytes through the register multiplies it by x^(8k)
// modulo the CRC polynomial. So:
//
//   - a sender that must change a covered header field after the ICRC was
//     computed (GSO segment i carries IPv4 identification i, numbered by
//     the kernel as it cuts them; a caller that built for another source
//     port than the UDP link's bound one) patches the ICRC with a few
//     table steps and one multiplication ([PatchICRC]), instead of a
//     pass over the whole packet;
//   - a receiver that cannot see the IPv4 identification (a plain UDP
//     socket) computes the ICRC with a guessed identification and, on a
//     mismatch, solves for the identification that makes it right
//     ([SolveIPv4ID]): multiply the difference by x^(-8k), then undo two
//     table steps. A 16-bit unknown in a 32-bit check leaves 16 bits of
//     check: a corrupted packet passes with probability 2^-16.
//
// Multiplication is zlib's multmodp (crc32.c): reflected bit order, where
// bit 31 is x^0.

// crcPoly is the reflected IEEE polynomial.
const crcPoly = 0xEDB88320

// crcOne is the polynomial 1 in reflected bit order.
const crcOne = 1 << 31

// maxCRCZeros bounds the zero-run lengths the power tables cover: any
// RoCEv2 datagram's payload plus the IP and UDP header bytes after a field.
const maxCRCZeros = MaxDatagram + IPv6HeaderLen + UDPHeaderLen

var crcTables struct {
	once  sync.Once
	tab   *crc32.Table            // crc32.IEEETable
	top   [256]uint8              // top[tab[i]>>24] = i
	ok    bool                    // the top bytes are a permutation (always, for IEEE)
	pow8  [maxCRCZeros + 1]uint32 // x^(8k) mod P
	ipow8 [maxCRCZeros + 1]uint32 // x^(-8k) mod P
}

// crcInit fills the tables once.
func crcInit() {
	t := &crcTables
	t.once.Do(func() {
		t.tab = crc32.IEEETable
		var seen [256]bool
		t.ok = true
		for i := range 256 {
			top := uint8(t.tab[i] >> 24)
			if seen[top] {
				t.ok = false
			}
			seen[top] = true
			t.top[top] = uint8(i)
		}
		t.pow8[0], t.ipow8[0] = crcOne, crcOne
		for k := 1; k <= maxCRCZeros; k++ {
			t.pow8[k] = crcZeroStep(t.pow8[k-1])
			t.ipow8[k] = crcZeroUnstep(t.ipow8[k-1])
		}
	})
}

// crcZeroStep runs one zero byte through register r: r·x^8 mod P.
func crcZeroStep(r uint32) uint32 {
	return crcTables.tab[byte(r)] ^ r>>8
}

// crcZeroUnstep undoes crcZeroStep: r·x^(-8) mod P. The top bytes of the
// IEEE table's entries are all different, so the top byte of the result
// of a step names the table entry it used.
func crcZeroUnstep(r uint32) uint32 {
	j := crcTables.top[r>>24]
	return (r^crcTables.tab[j])<<8 | uint32(j)
}

// crcMul returns a·b mod P in reflected bit order (zlib multmodp).
func crcMul(a, b uint32) uint32 {
	if a == 0 {
		return 0
	}
	var p uint32
	for m := uint32(crcOne); ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
}

// crcRaw runs p through the CRC from a zero register, without the final
// inversion.
func crcRaw(p []byte) uint32 {
	return crcUpdate(0, p)
}

// crcShift returns r·x^(8k) mod P: r followed by k zero bytes.
func crcShift(r uint32, k int) uint32 {
	if k <= maxCRCZeros {
		return crcMul(crcTables.pow8[k], r)
	}
	for ; k > maxCRCZeros; k -= maxCRCZeros {
		r = crcMul(crcTables.pow8[maxCRCZeros], r)
	}
	return crcMul(crcTables.pow8[k], r)
}

// PatchICRC rewrites the ICRC of pkt (BTH through ICRC), computed for the
// headers from, into the ICRC for the headers to. Fields the ICRC masks
// may differ freely; from and to must be of one IP family (IPv4-mapped
// addresses count as IPv4).
func PatchICRC(pkt []byte, from, to *Encap) {
	if len(pkt) < BTHLen+ICRCLen {
		return
	}
	PatchICRCAt(pkt[len(pkt)-ICRCLen:], len(pkt), from, to)
}

// PatchICRCAt is PatchICRC for a packet of size bytes whose ICRC is icrc
// (its last four bytes), for a packet whose bytes are not in one slice
// (link.Datagram.Payload).
func PatchICRCAt(icrc []byte, size int, from, to *Encap) {
	if size < BTHLen+ICRCLen || len(icrc) < ICRCLen {
		return
	}
	// x is the XOR of the two IP and UDP headers as the ICRC sees them:
	// only the covered fields that may differ are filled in; lengths,
	// version and protocol are equal.
	var x [IPv6HeaderLen + UDPHeaderLen]byte
	var n int
	if v4 := from.IsIPv4(); v4 != to.IsIPv4() {
		return // mixed families: a caller's bug, leave the packet alone
	} else if v4 {
		binary.BigEndian.PutUint16(x[4:], from.ID^to.ID)
		binary.BigEndian.PutUint16(x[6:], from.FragOff^to.FragOff)
		xor4(x[12:16], from.Src, to.Src)
		xor4(x[16:20], from.Dst, to.Dst)
		n = IPv4HeaderLen
	} else {
		xor16(x[8:24], from.Src, to.Src)
		xor16(x[24:40], from.Dst, to.Dst)
		n = IPv6HeaderLen
	}
	binary.BigEndian.PutUint16(x[n:], from.SrcPort^to.SrcPort)
	binary.BigEndian.PutUint16(x[n+2:], from.DstPort^to.DstPort)
	n += UDPHeaderLen
	f := 0
	for f < n && x[f] == 0 {
		f++
	}
	if f == n {
		return
	}
	crcInit()
	delta := crcShift(crcRaw(x[f:n]), size-ICRCLen)
	binary.LittleEndian.PutUint32(icrc, binary.LittleEndian.Uint32(icrc)^delta)
}

// IDPatch patches the ICRC of IPv4 packets of one length whose
// identification alone changes, as the segments of a UDP GSO send do (the
// kernel numbers them 0, 1, 2, ...). The change to the ICRC is linear in
// the change x to the identification, so it is the XOR of the changes
// for x's bits: a send of up to 64 segments costs six CRC shifts, once,
// rather than one per segment (PatchICRC). The zero value is ready.
type IDPatch struct {
	n     int        // the packet length the basis is for
	have  uint16     // the bits of basis computed
	basis [16]uint32 // basis[b]: the ICRC change for x = 1<<b
}

// Patch rewrites the ICRC of pkt (BTH through ICRC), an IPv4 packet
// whose identification changes by x (old ^ new) and nothing else the
// ICRC covers: PatchICRC's result, faster.
func (d *IDPatch) Patch(pkt []byte, x uint16) {
	if len(pkt) < BTHLen+ICRCLen {
		return
	}
	d.PatchAt(pkt[len(pkt)-ICRCLen:], len(pkt), x)
}

// PatchAt is Patch for a packet of size bytes whose ICRC is icrc (its
// last four bytes).
func (d *IDPatch) PatchAt(icrc []byte, size int, x uint16) {
	if size < BTHLen+ICRCLen || len(icrc) < ICRCLen || x == 0 {
		return
	}
	if d.n != size {
		d.n, d.have = size, 0
	}
	var delta uint32
	for b := 0; x != 0; b, x = b+1, x>>1 {
		if x&1 == 0 {
			continue
		}
		if d.have&(1<<b) == 0 {
			crcInit()
			// The identification is bytes 4-5 of the IPv4 header; the
			// rest of it and the UDP header (ipv4IDTail bytes) come
			// between it and the packet.
			var id [2]byte
			binary.BigEndian.PutUint16(id[:], 1<<b)
			d.basis[b] = crcShift(crcRaw(id[:]), ipv4IDTail+size-ICRCLen)
			d.have |= 1 << b
		}
		delta ^= d.basis[b]
	}
	binary.LittleEndian.PutUint32(icrc, binary.LittleEndian.Uint32(icrc)^delta)
}

// PatchEncap is PatchICRC(pkt, from, to), through Patch when from and to
// are IPv4 and differ only in the identification among the fields the
// ICRC covers.
func (d *IDPatch) PatchEncap(pkt []byte, from, to *Encap) {
	if len(pkt) < BTHLen+ICRCLen {
		return
	}
	d.PatchEncapAt(pkt[len(pkt)-ICRCLen:], len(pkt), from, to)
}

// PatchEncapAt is PatchEncap for a packet of size bytes whose ICRC is
// icrc (its last four bytes).
func (d *IDPatch) PatchEncapAt(icrc []byte, size int, from, to *Encap) {
	if x := from.ID ^ to.ID; x != 0 && from.IsIPv4() && to.IsIPv4() &&
		from.Src.Unmap() == to.Src.Unmap() && from.Dst.Unmap() == to.Dst.Unmap() &&
		from.SrcPort == to.SrcPort && from.DstPort == to.DstPort && from.FragOff == to.FragOff {
		d.PatchAt(icrc, size, x)
		return
	}
	PatchICRCAt(icrc, size, from, to)
}

func xor4(dst []byte, a, b netip.Addr) {
	if !a.IsValid() || !b.IsValid() {
		return
	}
	x, y := a.Unmap().As4(), b.Unmap().As4()
	for i := range dst {
		dst[i] = x[i] ^ y[i]
	}
}

func xor16(dst []byte, a, b netip.Addr) {
	x, y := a.As16(), b.As16()
	for i := range dst {
		dst[i] = x[i] ^ y[i]
	}
}

// ipv4IDTail is the number of ICRC-covered bytes after the IPv4
// identification field besides the UDP payload: the rest of the IPv4
// header (bytes 6-19) and the UDP header.
const ipv4IDTail = IPv4HeaderLen - 6 + UDPHeaderLen

// SolveIPv4ID returns the change x to the IPv4 identification for which
// the ICRC of pkt, computed as got with the current identification,
// becomes want: the ICRC is then right with identification id^x. It
// reports false when no identification makes it right (the packet is
// corrupt, or other covered fields are wrong).
func SolveIPv4ID(got, want uint32, pktLen int) (uint16, bool) {
	if got == want {
		return 0, true
	}
	crcInit()
	if !crcTables.ok {
		return 0, false
	}
	k := pktLen - ICRCLen + ipv4IDTail
	if k < 0 || k > maxCRCZeros {
		return 0, false
	}
	// r = crcRaw([d0, d1]) where d is the change to the identification.
	r := crcMul(crcTables.ipow8[k], got^want)
	tab := crcTables.tab
	// crcRaw([d0, d1]) = tab[tab[d0]&0xFF ^ d1] ^ tab[d0]>>8.
	j := crcTables.top[r>>24]
	t := r ^ tab[j] // tab[d0]>>8
	if t>>24 != 0 {
		return 0, false
	}
	d0 := crcTables.top[byte(t>>16)]
	if tab[d0]>>8 != t {
		return 0, false
	}
	d1 := j ^ byte(tab[d0])
	return uint16(d0)<<8 | uint16(d1), true
}
