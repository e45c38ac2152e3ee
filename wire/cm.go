package wire

import (
	"fmt"
	"net/netip"
)

// The InfiniBand connection manager's messages (IBTA Vol 1 chapter 12.6;
// kernel include/rdma/ibta_vol1_c12.h, drivers/infiniband/core/cm.c and
// cm_msgs.h); LAP and APR, which load an alternate path for automatic path
// migration, are optional and laid out for completeness. Each is a MAD of class MgmtClassCM, class version 2, method
// Send, whose attribute ID names the message; the fields follow the MAD
// header at bit granularity, big-endian, as described by one CMField
// table per message (cm_layout.go).
//
// Setters mask: a value wider than its field keeps only its low Width bits,
// as the kernel's IBA_SET (FIELD_PREP) does; the neighbouring fields are
// never touched. Byte-field setters (GIDs, private data, ARI) copy at most
// the field's length and zero the rest of the field.

// CM attribute IDs (cm_msgs.h CM_*_ATTR_ID; IBTA Vol 1 table 104).
const (
	CMAttrREQ     = 0x0010
	CMAttrMRA     = 0x0011
	CMAttrREJ     = 0x0012
	CMAttrREP     = 0x0013
	CMAttrRTU     = 0x0014
	CMAttrDREQ    = 0x0015
	CMAttrDREP    = 0x0016
	CMAttrSIDRREQ = 0x0017
	CMAttrSIDRREP = 0x0018
	CMAttrLAP     = 0x0019
	CMAttrAPR     = 0x001A
)

// Private data sizes (ibta_vol1_c12.h *_PRIVATE_DATA widths / 8; the
// kernel's IB_CM_*_PRIVATE_DATA_SIZE).
const (
	CMReqPrivateDataLen     = 92
	CMMRAPrivateDataLen     = 222
	CMRejPrivateDataLen     = 148
	CMRepPrivateDataLen     = 196
	CMRtuPrivateDataLen     = 224
	CMDreqPrivateDataLen    = 220
	CMDrepPrivateDataLen    = 224
	CMSIDRReqPrivateDataLen = 216
	CMSIDRRepPrivateDataLen = 136
	CMRejARILen             = 72 // REJ Additional Rejection Information
	CMSIDRRepInfoLen        = 72 // SIDR_REP Additional Information
	CMLapPrivateDataLen     = 168
	CMAprPrivateDataLen     = 148
	CMAprInfoLen            = 72 // APR Additional Information
)

// REQ transport service types (cm_msgs.h, IBTA table 106).
const (
	CMTransportRC  = 0
	CMTransportUC  = 1
	CMTransportRD  = 2
	CMTransportXRC = 3 // with extended transport type 1
)

// The message an MRA or REJ answers (cm_msgs.h enum cm_msg_response), in
// their MessageMRAed and MessageRejected fields.
const (
	CMMsgResponseREQ   = 0
	CMMsgResponseREP   = 1
	CMMsgResponseOther = 2 // a LAP for MRA; no message for REJ
)

// REJ reasons (ib_cm.h enum ib_cm_rej_reason; IBTA Vol 1 table 109), the
// ones the RDMA CM meets most.
const (
	CMRejNoQP                = 1
	CMRejNoResources         = 3
	CMRejTimeout             = 4
	CMRejUnsupported         = 5
	CMRejInvalidCommID       = 6
	CMRejInvalidServiceID    = 8 // no listener on the service ID
	CMRejInvalidTransport    = 9
	CMRejStaleConn           = 10
	CMRejInvalidGID          = 12
	CMRejInvalidMTU          = 26
	CMRejConsumerDefined     = 28 // rdma_reject
	CMRejInvalidRNRRetry     = 29
	CMRejDuplicateLocalComm  = 30
	CMRejInvalidClassVersion = 31
)

// CMField locates one field of a CM message: Byte is its offset after the
// MAD header, Bit the offset of its first bit from that byte's most
// significant bit, Width its length in bits. Fields wider than 64 bits are
// whole bytes (GIDs, private data) and are read with Bytes.
type CMField struct {
	Name  string
	Byte  int
	Bit   int
	Width int
}

func (f CMField) bitOff() int { return (MADHdrLen+f.Byte)*8 + f.Bit }

// IsBytes reports whether f is a byte string rather than a number.
func (f CMField) IsBytes() bool { return f.Width > 64 }

// Get reads the numeric field f of the MAD m (m must be MADLen bytes).
func (f CMField) Get(m MAD) uint64 { return f.get(m) }

// Set writes v, masked to f's width, into the numeric field f of m.
func (f CMField) Set(m MAD, v uint64) { f.set(m, v) }

// Bytes returns the byte field f of m (a sub-slice: writes go to m).
func (f CMField) Bytes(m MAD) []byte { return f.bytes(m) }

// PutBytes copies v into the byte field f of m, zero-filling the rest.
func (f CMField) PutBytes(m MAD, v []byte) { f.putBytes(m, v) }

func (f CMField) get(m []byte) uint64 { return getBits(m, f.bitOff(), f.Width) }
func (f CMField) set(m []byte, v uint64) {
	putBits(m, f.bitOff(), f.Width, v)
}
func (f CMField) bytes(m []byte) []byte {
	o := MADHdrLen + f.Byte
	return m[o : o+f.Width/8]
}
func (f CMField) putBytes(m []byte, v []byte) {
	d := f.bytes(m)
	clear(d[copy(d, v):])
}

// getBits returns the n-bit (1 ≤ n ≤ 64) big-endian field that starts
// off bits into b (bit 0 is the most significant bit of b[0]).
func getBits(b []byte, off, n int) uint64 {
	var v uint64
	for i := off; i < off+n; {
		byt, sh := i/8, i%8
		take := min(8-sh, off+n-i)
		x := uint64(b[byt]>>(8-sh-take)) & (1<<take - 1)
		v = v<<take | x
		i += take
	}
	return v
}

// putBits writes the low n bits of v as the big-endian field that starts
// off bits into b, leaving every other bit of b as it was.
func putBits(b []byte, off, n int, v uint64) {
	for i := off + n; i > off; {
		byt := (i - 1) / 8
		endSh := i - byt*8 // bits of byt covered up to i
		take := min(endSh, i-off)
		sh := 8 - endSh
		mask := byte((1<<take - 1) << sh)
		b[byt] = b[byt]&^mask | byte(v<<sh)&mask
		v >>= take
		i -= take
	}
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// ParseCM returns the MAD at the start of b if it is a CM MAD: ParseMAD's
// checks, management class 0x07 and class version 2 (the only version
// cm.c's MAD agent registers for, so the kernel drops any other).
func ParseCM(b []byte) (MAD, error) {
	m, err := ParseMAD(b)
	if err != nil {
		return nil, err
	}
	if m.MgmtClass() != MgmtClassCM {
		return nil, fmt.Errorf("%w: class 0x%02x, not CM (0x%02x)", ErrBadMAD, m.MgmtClass(), MgmtClassCM)
	}
	if m.ClassVersion() != CMClassVersion {
		return nil, fmt.Errorf("%w: CM class version %d, want %d", ErrBadMAD, m.ClassVersion(), CMClassVersion)
	}
	return m, nil
}

func parseCMAttr(b []byte, attr uint16) (MAD, error) {
	m, err := ParseCM(b)
	if err != nil {
		return nil, err
	}
	if m.AttrID() != attr {
		return nil, fmt.Errorf("%w: CM attribute 0x%04x, want 0x%04x", ErrBadMAD, m.AttrID(), attr)
	}
	return m, nil
}

// PutCM zeroes b's first MADLen bytes and writes the header the kernel's
// cm_format_mad_hdr writes: base version 1, class CM, class version 2,
// method Send, status 0, the attribute ID and the transaction ID. b must
// be at least MADLen bytes. The message's fields are then set through its
// view (CMReq(m).SetLocalCommID(...) and so on).
func PutCM(b []byte, attr uint16, tid uint64) MAD {
	clear(b[:MADLen])
	return PutMADHdr(b, MADHdr{
		BaseVersion:  MADBaseVersion,
		MgmtClass:    MgmtClassCM,
		ClassVersion: CMClassVersion,
		Method:       MADMethodSend,
		TID:          tid,
		AttrID:       attr,
	})
}

// Service IDs of the RDMA CM port spaces (cma.c cma_get_service_id:
// (u64)ps << 16 | port, with enum rdma_ucm_port_space RDMA_PS_TCP 0x0106,
// RDMA_PS_UDP 0x0111, RDMA_PS_IB 0x013F, RDMA_PS_IPOIB 0x0002).
const (
	RDMAPSIPoIB = 0x0002
	RDMAPSTCP   = 0x0106
	RDMAPSUDP   = 0x0111
	RDMAPSIB    = 0x013F
)

// RDMAServiceID returns the service ID of port in the port space ps.
func RDMAServiceID(ps uint16, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// RDMAServiceIDParts splits a service ID into its port space and port;
// ok is false when the top 32 bits are not zero (not an RDMA CM ID).
func RDMAServiceIDParts(id uint64) (ps, port uint16, ok bool) {
	return uint16(id >> 16), uint16(id), id>>32 == 0
}

// CMAHdrLen is the size of the header the RDMA CM puts at the start of a
// REQ's (and SIDR_REQ's) private data (cma.c struct cma_hdr).
const (
	CMAHdrLen     = 36
	CMAHdrVersion = 0 // CMA_VERSION
)

// CMAHeader is cma.c's struct cma_hdr: u8 cma_version, u8 ip_version (in
// the high nibble: 4 or 6), be16 port (the source port), then the source
// and destination addresses, 16 bytes each. cma_format_hdr writes an IPv4
// address in the last 4 bytes after 12 zero bytes (not ::ffff-mapped).
type CMAHeader struct {
	Version   uint8
	IPVersion uint8 // 4 or 6: the high nibble of byte 1
	SrcPort   uint16
	Src, Dst  netip.Addr
}

// ParseCMAHeader reads the CMA header at the start of b (a REQ's private
// data). It refuses a short buffer, a version other than 0 and an IP
// version other than 4 or 6, with errors wrapping ErrBadMAD.
func ParseCMAHeader(b []byte) (CMAHeader, error) {
	var h CMAHeader
	if len(b) < CMAHdrLen {
		return h, fmt.Errorf("%w: CMA header needs %d bytes, have %d", ErrBadMAD, CMAHdrLen, len(b))
	}
	h.Version, h.IPVersion, h.SrcPort = b[0], b[1]>>4, be.Uint16(b[2:])
	if h.Version != CMAHdrVersion {
		return h, fmt.Errorf("%w: CMA header version %d", ErrBadMAD, h.Version)
	}
	switch h.IPVersion {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(b[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(b[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return h, fmt.Errorf("%w: CMA header IP version %d", ErrBadMAD, h.IPVersion)
	}
	return h, nil
}

// PutCMAHeader writes h as the first CMAHdrLen bytes of b: an IPv4 address
// (h.IPVersion 4; a 4-in-6 address is unmapped) in the last 4 bytes of its
// 16, IPv6 addresses whole; an invalid or mismatched address is left zero. The low nibble of byte 1 is zero.
func PutCMAHeader(b []byte, h CMAHeader) {
	clear(b[:CMAHdrLen])
	b[0], b[1] = h.Version, h.IPVersion<<4
	be.PutUint16(b[2:], h.SrcPort)
	put := func(d []byte, a netip.Addr) {
		switch {
		case h.IPVersion == 4 && a.Unmap().Is4():
			a4 := a.Unmap().As4()
			copy(d[12:], a4[:])
		case h.IPVersion != 4 && a.IsValid():
			a16 := a.As16()
			copy(d, a16[:])
		}
	}
	put(b[4:20], h.Src)
	put(b[20:36], h.Dst)
}
