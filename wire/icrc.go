package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// The ICRC (IBTA A17.3.3) is the IEEE CRC-32 (zlib's, not Castagnoli) over
// eight 0xFF bytes standing for the masked LRH, the IP header with its
// variant fields masked, the UDP header with its checksum masked, the BTH
// with its FECN/BECN/reserved byte masked, and everything after the BTH up
// to the ICRC, payload and pad included. It is stored least significant
// byte first (rxe_icrc.c rxe_icrc_hdr, rxe_icrc_generate;
// rxe-interop-facts.md §2.3).

// icrcSeed is the CRC state after the eight 0xFF bytes of the masked LRH:
// the complement of rxe's seed 0xdebb20e3.
// MaxDatagram is the largest RoCEv2 UDP payload softnic sends or accepts:
// BTH, the longest header set, a 4096-byte PMTU, pad and ICRC.
const MaxDatagram = 4096 + 128

var icrcSeed = crc32.ChecksumIEEE([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// crcSmall updates crc over a short stack buffer without handing the slice
// to an indirect call, so the buffer does not escape to the heap.
func crcSmall(crc uint32, p []byte) uint32 {
	tab := crc32.IEEETable
	crc = ^crc
	for _, v := range p {
		crc = tab[byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// ComputeICRC returns the ICRC of pkt, a whole UDP payload (BTH through the
// four ICRC bytes, whose content is ignored), sent with the headers e
// describes.
func ComputeICRC(e *Encap, pkt []byte) uint32 {
	if len(pkt) < BTHLen+ICRCLen {
		return 0
	}
	var hdr [IPv6HeaderLen + UDPHeaderLen + BTHLen]byte
	n := e.putIP(hdr[:], len(pkt))
	if n == IPv4HeaderLen {
		hdr[1] = 0xFF                 // TOS
		hdr[8] = 0xFF                 // TTL
		hdr[10], hdr[11] = 0xFF, 0xFF // header checksum
	} else {
		hdr[0] |= 0x0F // traffic class and flow label
		hdr[1], hdr[2], hdr[3] = 0xFF, 0xFF, 0xFF
		hdr[7] = 0xFF // hop limit
	}
	putUDP(hdr[n:], e.SrcPort, e.DstPort, len(pkt), 0xFFFF)
	n += UDPHeaderLen
	copy(hdr[n:], pkt[:BTHLen])
	hdr[n+bthResv8a] = 0xFF // FECN, BECN and the six reserved bits
	n += BTHLen
	crc := crcSmall(icrcSeed, hdr[:n])
	return crc32.Update(crc, crc32.IEEETable, pkt[BTHLen:len(pkt)-ICRCLen])
}

// StoredICRC returns the ICRC carried in the last four bytes of pkt.
func StoredICRC(pkt []byte) uint32 {
	if len(pkt) < ICRCLen {
		return 0
	}
	return binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:])
}

// SetICRC computes pkt's ICRC for e and stores it in pkt's last four bytes.
func SetICRC(e *Encap, pkt []byte) {
	if len(pkt) < BTHLen+ICRCLen {
		return
	}
	binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCLen:], ComputeICRC(e, pkt))
}

// CheckICRC verifies pkt's ICRC for e and returns ErrBadICRC on mismatch.
func CheckICRC(e *Encap, pkt []byte) error {
	if len(pkt) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	if StoredICRC(pkt) != ComputeICRC(e, pkt) {
		return ErrBadICRC
	}
	return nil
}
