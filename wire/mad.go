package wire

import (
	"errors"
	"fmt"
)

// Management datagrams (IBTA Vol 1 chapter 13.4; kernel include/rdma/ib_mad.h).
// Every MAD is 256 bytes carried as the payload of a UD SEND to QP 1 (the
// GSI) with Q_Key 0x80010000; its first 24 bytes are the common MAD header
// (struct ib_mad_hdr), the rest belongs to the management class.

// ErrBadMAD is wrapped by every error of ParseMAD, ParseCM and the CM
// message parsers.
var ErrBadMAD = errors.New("wire: malformed MAD")

const (
	MADLen    = 256 // IB_MGMT_MAD_SIZE: every IB MAD
	MADHdrLen = 24  // sizeof(struct ib_mad_hdr)

	MADBaseVersion = 1    // IB_MGMT_BASE_VERSION
	MgmtClassCM    = 0x07 // IB_MGMT_CLASS_CM
	CMClassVersion = 2    // IB_CM_CLASS_VERSION (cm.c registers only this one)

	GSIQKey = 0x80010000 // IB_QP1_QKEY: the Q_Key of every QP1 datagram

	MgmtClassSubnLIDRouted     = 0x01   // IB_MGMT_CLASS_SUBN_LID_ROUTED: SMPs, QP0 only
	MgmtClassSubnDirectedRoute = 0x81   // IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE: SMPs, QP0 only
	MADAttrClassPortInfo       = 0x0001 // IB_MGMT_CLASSPORTINFO_ATTR_ID
)

// MAD methods (ib_mad.h IB_MGMT_METHOD_*). The CM sends everything with
// MethodSend.
const (
	MADMethodGet     = 0x01
	MADMethodSet     = 0x02
	MADMethodSend    = 0x03
	MADMethodTrap    = 0x05
	MADMethodReport  = 0x06
	MADMethodResp    = 0x80 // IB_MGMT_METHOD_RESP: the response bit
	MADMethodGetResp = 0x81
)

// MAD is a view of one 256-byte management datagram.
type MAD []byte

// ParseMAD returns the MAD at the start of b, received on QP1, after the
// checks the kernel's mad.c validate_mad makes before any agent sees it: at
// least MADLen bytes; base version 1 (OPA's 0x80 is not supported); not a
// subnet management class (SMPs belong to QP0, which RoCE has not); and a
// CM MAD other than ClassPortInfo must use method Send. Bytes after the
// first MADLen are not part of the view.
func ParseMAD(b []byte) (MAD, error) {
	if len(b) < MADLen {
		return nil, fmt.Errorf("%w: %d bytes, a MAD has %d", ErrBadMAD, len(b), MADLen)
	}
	m := MAD(b[:MADLen])
	if m.BaseVersion() != MADBaseVersion {
		return nil, fmt.Errorf("%w: base version %d, want %d", ErrBadMAD, m.BaseVersion(), MADBaseVersion)
	}
	switch c := m.MgmtClass(); {
	case c == MgmtClassSubnLIDRouted || c == MgmtClassSubnDirectedRoute:
		return nil, fmt.Errorf("%w: subnet management class 0x%02x on QP1", ErrBadMAD, c)
	case c == MgmtClassCM && m.AttrID() != MADAttrClassPortInfo && m.Method() != MADMethodSend:
		return nil, fmt.Errorf("%w: CM attribute 0x%04x with method 0x%02x, not Send", ErrBadMAD, m.AttrID(), m.Method())
	}
	return m, nil
}

// struct ib_mad_hdr: u8 base_version, u8 mgmt_class, u8 class_version,
// u8 method, be16 status, be16 class_specific, be64 tid, be16 attr_id,
// be16 resv, be32 attr_mod.
func (m MAD) BaseVersion() uint8    { return m[0] }
func (m MAD) MgmtClass() uint8      { return m[1] }
func (m MAD) ClassVersion() uint8   { return m[2] }
func (m MAD) Method() uint8         { return m[3] }
func (m MAD) Status() uint16        { return be.Uint16(m[4:]) }
func (m MAD) ClassSpecific() uint16 { return be.Uint16(m[6:]) }
func (m MAD) TID() uint64           { return be.Uint64(m[8:]) }
func (m MAD) AttrID() uint16        { return be.Uint16(m[16:]) }
func (m MAD) Resv() uint16          { return be.Uint16(m[18:]) }
func (m MAD) AttrMod() uint32       { return be.Uint32(m[20:]) }

// Data is the class-specific part after the header (232 bytes).
func (m MAD) Data() []byte { return m[MADHdrLen:MADLen] }

// MADHdr is the common MAD header as values.
type MADHdr struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64
	AttrID        uint16
	Resv          uint16
	AttrMod       uint32
}

// Hdr returns m's header as values.
func (m MAD) Hdr() MADHdr {
	return MADHdr{m.BaseVersion(), m.MgmtClass(), m.ClassVersion(), m.Method(),
		m.Status(), m.ClassSpecific(), m.TID(), m.AttrID(), m.Resv(), m.AttrMod()}
}

// PutMADHdr writes h as the first MADHdrLen bytes of b, which must be at
// least MADLen bytes, and returns the MAD view of b's first MADLen bytes.
// It does not touch the class data.
func PutMADHdr(b []byte, h MADHdr) MAD {
	m := MAD(b[:MADLen])
	m[0], m[1], m[2], m[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method
	be.PutUint16(m[4:], h.Status)
	be.PutUint16(m[6:], h.ClassSpecific)
	be.PutUint64(m[8:], h.TID)
	be.PutUint16(m[16:], h.AttrID)
	be.PutUint16(m[18:], h.Resv)
	be.PutUint32(m[20:], h.AttrMod)
	return m
}
