package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Errors returned by the parsers. Every one wraps ErrMalformed, so a caller
// that only counts and drops can test for that alone.
var (
	ErrMalformed     = errors.New("malformed RoCEv2 packet")
	ErrTruncated     = fmt.Errorf("%w: truncated", ErrMalformed)
	ErrBadVersion    = fmt.Errorf("%w: BTH transport version is not 0", ErrMalformed)
	ErrUnknownOpcode = fmt.Errorf("%w: unknown opcode", ErrMalformed)
	ErrBadLength     = fmt.Errorf("%w: length does not fit the opcode", ErrMalformed)
	ErrBadPad        = fmt.Errorf("%w: bad pad count", ErrMalformed)
	ErrBadICRC       = fmt.Errorf("%w: ICRC mismatch", ErrMalformed)
	ErrNotRoCE       = fmt.Errorf("%w: not a RoCEv2 datagram", ErrMalformed)
)

var be = binary.BigEndian

// BTH is a view of the 12-byte Base Transport Header (IBTA 9.2).
//
//	byte 0     OpCode
//	byte 1     SE(7) M(6) PadCnt(5:4) TVer(3:0)
//	byte 2-3   P_Key
//	byte 4     FECN(7) BECN(6) reserved(5:0)   (RoCEv2 A17.3; masked by the ICRC)
//	byte 5-7   DestQP
//	byte 8     AckReq(7) reserved(6:0)
//	byte 9-11  PSN
type BTH []byte

const (
	bthOpcode = 0
	bthFlags  = 1
	bthPKey   = 2
	bthResv8a = 4
	bthDestQP = 5
	bthAckReq = 8
	bthPSN    = 9

	bthSE       = 0x80
	bthMig      = 0x40
	bthPadMask  = 0x30
	bthPadShift = 4
	bthTVerMask = 0x0F
	bthFECN     = 0x80
	bthBECN     = 0x40
	bthAck      = 0x80

	// QPNMask is the 24-bit queue pair number mask.
	QPNMask = 0x00FFFFFF
	// MulticastQPN is the destination QP of every multicast packet
	// (IB_MULTICAST_QPN: the IBTA addresses a multicast group with
	// DestQP 0xFFFFFF); no QP has that number.
	MulticastQPN = 0x00FFFFFF
	// DefaultPKey is the full-member default partition key rxe always sends.
	DefaultPKey = 0xFFFF
)

// AsBTH returns b as a BTH view after checking its length.
func AsBTH(b []byte) (BTH, error) {
	if len(b) < BTHLen {
		return nil, ErrTruncated
	}
	return BTH(b[:BTHLen]), nil
}

func (b BTH) Opcode() Opcode     { return Opcode(b[bthOpcode]) }
func (b BTH) SE() bool           { return b[bthFlags]&bthSE != 0 }
func (b BTH) MigReq() bool       { return b[bthFlags]&bthMig != 0 }
func (b BTH) Pad() int           { return int(b[bthFlags]&bthPadMask) >> bthPadShift }
func (b BTH) TVer() uint8        { return b[bthFlags] & bthTVerMask }
func (b BTH) PKey() uint16       { return be.Uint16(b[bthPKey:]) }
func (b BTH) FECN() bool         { return b[bthResv8a]&bthFECN != 0 }
func (b BTH) BECN() bool         { return b[bthResv8a]&bthBECN != 0 }
func (b BTH) Resv6() uint8       { return b[bthResv8a] & 0x3F }
func (b BTH) DestQP() uint32     { return be.Uint32(b[bthResv8a:]) & QPNMask }
func (b BTH) AckReq() bool       { return b[bthAckReq]&bthAck != 0 }
func (b BTH) Resv7() uint8       { return b[bthAckReq] &^ bthAck }
func (b BTH) PSN() PSN           { return PSN(be.Uint32(b[bthAckReq:]) & QPNMask) }
func (b BTH) SetOpcode(o Opcode) { b[bthOpcode] = byte(o) }
func (b BTH) SetPad(n int) {
	b[bthFlags] = b[bthFlags]&^bthPadMask | byte(n<<bthPadShift)&bthPadMask
}
func (b BTH) SetSE(v bool)       { setBit(&b[bthFlags], bthSE, v) }
func (b BTH) SetMigReq(v bool)   { setBit(&b[bthFlags], bthMig, v) }
func (b BTH) SetPKey(k uint16)   { be.PutUint16(b[bthPKey:], k) }
func (b BTH) SetFECN(v bool)     { setBit(&b[bthResv8a], bthFECN, v) }
func (b BTH) SetBECN(v bool)     { setBit(&b[bthResv8a], bthBECN, v) }
func (b BTH) SetAckReq(v bool)   { setBit(&b[bthAckReq], bthAck, v) }
func (b BTH) SetDestQP(q uint32) { put24(b[bthDestQP:], q) }
func (b BTH) SetPSN(p PSN)       { put24(b[bthPSN:], uint32(p)) }

// BTHFields holds every BTH field for building.
type BTHFields struct {
	Opcode Opcode
	SE     bool
	MigReq bool
	Pad    int
	TVer   uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32
	AckReq bool
	PSN    PSN
}

// Encode writes f into b, which must be at least BTHLen bytes. Reserved
// bits are written as zero.
func (b BTH) Encode(f *BTHFields) {
	b[bthOpcode] = byte(f.Opcode)
	flags := byte(f.Pad<<bthPadShift)&bthPadMask | f.TVer&bthTVerMask
	if f.SE {
		flags |= bthSE
	}
	if f.MigReq {
		flags |= bthMig
	}
	b[bthFlags] = flags
	be.PutUint16(b[bthPKey:], f.PKey)
	b[bthResv8a] = 0
	b.SetFECN(f.FECN)
	b.SetBECN(f.BECN)
	put24(b[bthDestQP:], f.DestQP)
	b[bthAckReq] = 0
	b.SetAckReq(f.AckReq)
	put24(b[bthPSN:], uint32(f.PSN))
}

// Fields decodes every BTH field.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), Pad: b.Pad(), TVer: b.TVer(),
		PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(), DestQP: b.DestQP(),
		AckReq: b.AckReq(), PSN: b.PSN(),
	}
}

// RDETH is a view of the Reliable Datagram Extended Transport Header (IBTA 9.3.1).
type RDETH []byte

func (h RDETH) EECnxt() uint32        { return be.Uint32(h) & QPNMask }
func (h RDETH) SetEECnxt(v uint32)    { h[0] = 0; put24(h[1:], v) }
func (h RDETH) Encode(f *RDETHFields) { h.SetEECnxt(f.EECnxt) }
func (h RDETH) Fields() RDETHFields   { return RDETHFields{EECnxt: h.EECnxt()} }

// RDETHFields holds the RDETH fields.
type RDETHFields struct{ EECnxt uint32 }

// DETH is a view of the Datagram Extended Transport Header (IBTA 9.3.2).
type DETH []byte

func (h DETH) QKey() uint32         { return be.Uint32(h) }
func (h DETH) SrcQP() uint32        { return be.Uint32(h[4:]) & QPNMask }
func (h DETH) SetQKey(k uint32)     { be.PutUint32(h, k) }
func (h DETH) SetSrcQP(q uint32)    { h[4] = 0; put24(h[5:], q) }
func (h DETH) Encode(f *DETHFields) { h.SetQKey(f.QKey); h.SetSrcQP(f.SrcQP) }
func (h DETH) Fields() DETHFields   { return DETHFields{QKey: h.QKey(), SrcQP: h.SrcQP()} }

// DETHFields holds the DETH fields.
type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

// XRCETH is a view of the XRC Extended Transport Header (IBTA 9.3.7).
type XRCETH []byte

func (h XRCETH) XRCSRQ() uint32         { return be.Uint32(h) & QPNMask }
func (h XRCETH) SetXRCSRQ(v uint32)     { h[0] = 0; put24(h[1:], v) }
func (h XRCETH) Encode(f *XRCETHFields) { h.SetXRCSRQ(f.XRCSRQ) }
func (h XRCETH) Fields() XRCETHFields   { return XRCETHFields{XRCSRQ: h.XRCSRQ()} }

// XRCETHFields holds the XRCETH fields.
type XRCETHFields struct{ XRCSRQ uint32 }

// RETH is a view of the RDMA Extended Transport Header (IBTA 9.3.3).
type RETH []byte

func (h RETH) VA() uint64           { return be.Uint64(h) }
func (h RETH) RKey() uint32         { return be.Uint32(h[8:]) }
func (h RETH) DMALen() uint32       { return be.Uint32(h[12:]) }
func (h RETH) SetVA(v uint64)       { be.PutUint64(h, v) }
func (h RETH) SetRKey(k uint32)     { be.PutUint32(h[8:], k) }
func (h RETH) SetDMALen(n uint32)   { be.PutUint32(h[12:], n) }
func (h RETH) Encode(f *RETHFields) { h.SetVA(f.VA); h.SetRKey(f.RKey); h.SetDMALen(f.DMALen) }
func (h RETH) Fields() RETHFields {
	return RETHFields{VA: h.VA(), RKey: h.RKey(), DMALen: h.DMALen()}
}

// RETHFields holds the RETH fields.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AtomicETH is a view of the Atomic Extended Transport Header (IBTA 9.3.4):
// VA, R_Key, Swap (or Add) data, Compare data; 28 bytes, packed.
type AtomicETH []byte

func (h AtomicETH) VA() uint64          { return be.Uint64(h) }
func (h AtomicETH) RKey() uint32        { return be.Uint32(h[8:]) }
func (h AtomicETH) SwapAdd() uint64     { return be.Uint64(h[12:]) }
func (h AtomicETH) Compare() uint64     { return be.Uint64(h[20:]) }
func (h AtomicETH) SetVA(v uint64)      { be.PutUint64(h, v) }
func (h AtomicETH) SetRKey(k uint32)    { be.PutUint32(h[8:], k) }
func (h AtomicETH) SetSwapAdd(v uint64) { be.PutUint64(h[12:], v) }
func (h AtomicETH) SetCompare(v uint64) { be.PutUint64(h[20:], v) }
func (h AtomicETH) Encode(f *AtomicETHFields) {
	h.SetVA(f.VA)
	h.SetRKey(f.RKey)
	h.SetSwapAdd(f.SwapAdd)
	h.SetCompare(f.Compare)
}
func (h AtomicETH) Fields() AtomicETHFields {
	return AtomicETHFields{VA: h.VA(), RKey: h.RKey(), SwapAdd: h.SwapAdd(), Compare: h.Compare()}
}

// AtomicETHFields holds the AtomicETH fields.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64 // swap data for COMPARE_SWAP, add data for FETCH_ADD
	Compare uint64
}

// AETH is a view of the ACK Extended Transport Header (IBTA 9.3.5):
// an 8-bit syndrome and a 24-bit MSN.
type AETH []byte

func (h AETH) Syndrome() Syndrome     { return Syndrome(h[0]) }
func (h AETH) MSN() uint32            { return be.Uint32(h) & QPNMask }
func (h AETH) SetSyndrome(s Syndrome) { h[0] = byte(s) }
func (h AETH) SetMSN(m uint32)        { put24(h[1:], m) }
func (h AETH) Encode(f *AETHFields)   { h.SetSyndrome(f.Syndrome); h.SetMSN(f.MSN) }
func (h AETH) Fields() AETHFields     { return AETHFields{Syndrome: h.Syndrome(), MSN: h.MSN()} }

// AETHFields holds the AETH fields.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32
}

// AtomicAckETH is a view of the Atomic ACK Extended Transport Header
// (IBTA 9.3.6): the original remote data.
type AtomicAckETH []byte

func (h AtomicAckETH) Orig() uint64                 { return be.Uint64(h) }
func (h AtomicAckETH) SetOrig(v uint64)             { be.PutUint64(h, v) }
func (h AtomicAckETH) Encode(f *AtomicAckETHFields) { h.SetOrig(f.Orig) }
func (h AtomicAckETH) Fields() AtomicAckETHFields   { return AtomicAckETHFields{Orig: h.Orig()} }

// AtomicAckETHFields holds the AtomicAckETH fields.
type AtomicAckETHFields struct{ Orig uint64 }

// ImmDt is a view of the 4-byte Immediate Data header (IBTA 9.3.8). The
// value is carried opaque, in network order, as libibverbs' imm_data is.
type ImmDt []byte

func (h ImmDt) Imm() uint32     { return be.Uint32(h) }
func (h ImmDt) SetImm(v uint32) { be.PutUint32(h, v) }

// IETH is a view of the 4-byte Invalidate Extended Transport Header (IBTA 9.3.9).
type IETH []byte

func (h IETH) RKey() uint32     { return be.Uint32(h) }
func (h IETH) SetRKey(k uint32) { be.PutUint32(h, k) }

// FETH is a view of the FLUSH Extended Transport Header (IBA A19.4.4):
// bits 3:0 placement type, bits 5:4 selectivity level, the rest reserved.
type FETH []byte

// Flush placement types and selectivity levels (libibverbs IBV_FLUSH_*).
const (
	FlushGlobal     = 1 // placement type bit 0: global visibility
	FlushPersistent = 2 // placement type bit 1: persistence
	FlushRange      = 0 // selectivity: the RETH VA/length range of the MR
	FlushMR         = 1 // selectivity: the whole MR, RETH VA/length ignored
)

func (h FETH) PlacementType() uint8 { return h[3] & 0x0F }
func (h FETH) Selectivity() uint8   { return h[3] >> 4 & 0x03 }
func (h FETH) Encode(f *FETHFields) {
	// rxe_hdr.h feth_init: ((level << 4) & 0x30) | (type & 0xf)
	be.PutUint32(h, uint32(f.Selectivity<<4&0x30|f.PlacementType&0x0F))
}
func (h FETH) Fields() FETHFields {
	return FETHFields{PlacementType: h.PlacementType(), Selectivity: h.Selectivity()}
}

// FETHFields holds the FETH fields.
type FETHFields struct {
	PlacementType uint8
	Selectivity   uint8
}

// Syndrome is the AETH syndrome byte (IBTA 9.7.5.1, Table 44): bits 7:5
// say ACK, RNR NAK or NAK; bits 4:0 carry the credit count, the RNR timer
// or the NAK code.
type Syndrome uint8

// Syndrome types and values (rxe_hdr.h AETH_*).
const (
	SyndromeTypeMask Syndrome = 0xE0
	SyndromeACK      Syndrome = 0x00
	SyndromeRNRNAK   Syndrome = 0x20
	SyndromeReserved Syndrome = 0x40
	SyndromeNAK      Syndrome = 0x60

	// AckUnlimited is an ACK with the "no end-to-end credits" credit code,
	// which rxe always sends.
	AckUnlimited Syndrome = 0x1F

	NakPSNSequence    Syndrome = 0x60 // PSN sequence error; MSN/PSN carry the expected PSN
	NakInvalidRequest Syndrome = 0x61
	NakRemoteAccess   Syndrome = 0x62
	NakRemoteOp       Syndrome = 0x63
	NakInvalidRDReq   Syndrome = 0x64
)

// Type returns the syndrome type bits (ACK, RNR NAK, NAK or reserved).
func (s Syndrome) Type() Syndrome { return s & SyndromeTypeMask }

// Value returns the low five bits: credits, RNR timer index or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s &^ SyndromeTypeMask) }

// IsACK reports whether s is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s.Type() == SyndromeACK }

// RNRNAK returns the RNR NAK syndrome for RNR timer index t (0..31).
func RNRNAK(t uint8) Syndrome { return SyndromeRNRNAK | Syndrome(t&0x1F) }

// String names the syndrome the way a capture reader expects.
func (s Syndrome) String() string {
	switch s.Type() {
	case SyndromeACK:
		return fmt.Sprintf("ACK(credits=%d)", s.Value())
	case SyndromeRNRNAK:
		return fmt.Sprintf("RNR_NAK(timer=%d)", s.Value())
	case SyndromeNAK:
		switch s {
		case NakPSNSequence:
			return "NAK_PSN_SEQ_ERR"
		case NakInvalidRequest:
			return "NAK_INVALID_REQ"
		case NakRemoteAccess:
			return "NAK_REM_ACCESS_ERR"
		case NakRemoteOp:
			return "NAK_REM_OP_ERR"
		case NakInvalidRDReq:
			return "NAK_INVALID_RD_REQ"
		}
		return fmt.Sprintf("NAK(code=%d)", s.Value())
	}
	return fmt.Sprintf("RESERVED(0x%02x)", uint8(s))
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

func setBit(b *byte, bit byte, v bool) {
	if v {
		*b |= bit
	} else {
		*b &^= bit
	}
}
