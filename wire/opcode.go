package wire

import "fmt"

// Opcode is the BTH OpCode: the transport class in bits 7:5 and the
// operation in bits 4:0 (IBTA 9.2, Table 38).
type Opcode uint8

// Transport classes (the high three bits of the opcode).
const (
	ClassRC  Opcode = 0x00 // reliable connection
	ClassUC  Opcode = 0x20 // unreliable connection
	ClassRD  Opcode = 0x40 // reliable datagram
	ClassUD  Opcode = 0x60 // unreliable datagram
	ClassCNP Opcode = 0x80 // congestion notification (RoCEv2 A17.9.3)
	ClassXRC Opcode = 0xA0 // extended reliable connection

	classMask Opcode = 0xE0
)

// Operations (the low five bits of the opcode), shared by the classes.
const (
	opSendFirst      Opcode = 0x00
	opSendMiddle     Opcode = 0x01
	opSendLast       Opcode = 0x02
	opSendLastImm    Opcode = 0x03
	opSendOnly       Opcode = 0x04
	opSendOnlyImm    Opcode = 0x05
	opWriteFirst     Opcode = 0x06
	opWriteMiddle    Opcode = 0x07
	opWriteLast      Opcode = 0x08
	opWriteLastImm   Opcode = 0x09
	opWriteOnly      Opcode = 0x0A
	opWriteOnlyImm   Opcode = 0x0B
	opReadRequest    Opcode = 0x0C
	opReadRespFirst  Opcode = 0x0D
	opReadRespMiddle Opcode = 0x0E
	opReadRespLast   Opcode = 0x0F
	opReadRespOnly   Opcode = 0x10
	opAck            Opcode = 0x11
	opAtomicAck      Opcode = 0x12
	opCompareSwap    Opcode = 0x13
	opFetchAdd       Opcode = 0x14
	opResync         Opcode = 0x15
	opSendLastInv    Opcode = 0x16
	opSendOnlyInv    Opcode = 0x17
	opFlush          Opcode = 0x1C
	opAtomicWrite    Opcode = 0x1D
	opCNP            Opcode = 0x01
)

// The opcodes softnic sends and receives, named as in the kernel's ib_pack.h.
const (
	RCSendFirst          = ClassRC | opSendFirst
	RCSendMiddle         = ClassRC | opSendMiddle
	RCSendLast           = ClassRC | opSendLast
	RCSendLastImm        = ClassRC | opSendLastImm
	RCSendOnly           = ClassRC | opSendOnly
	RCSendOnlyImm        = ClassRC | opSendOnlyImm
	RCWriteFirst         = ClassRC | opWriteFirst
	RCWriteMiddle        = ClassRC | opWriteMiddle
	RCWriteLast          = ClassRC | opWriteLast
	RCWriteLastImm       = ClassRC | opWriteLastImm
	RCWriteOnly          = ClassRC | opWriteOnly
	RCWriteOnlyImm       = ClassRC | opWriteOnlyImm
	RCReadRequest        = ClassRC | opReadRequest
	RCReadResponseFirst  = ClassRC | opReadRespFirst
	RCReadResponseMiddle = ClassRC | opReadRespMiddle
	RCReadResponseLast   = ClassRC | opReadRespLast
	RCReadResponseOnly   = ClassRC | opReadRespOnly
	RCAck                = ClassRC | opAck
	RCAtomicAck          = ClassRC | opAtomicAck
	RCCompareSwap        = ClassRC | opCompareSwap
	RCFetchAdd           = ClassRC | opFetchAdd
	RCSendLastInv        = ClassRC | opSendLastInv
	RCSendOnlyInv        = ClassRC | opSendOnlyInv
	RCFlush              = ClassRC | opFlush
	RCAtomicWrite        = ClassRC | opAtomicWrite

	UCSendFirst    = ClassUC | opSendFirst
	UCSendMiddle   = ClassUC | opSendMiddle
	UCSendLast     = ClassUC | opSendLast
	UCSendLastImm  = ClassUC | opSendLastImm
	UCSendOnly     = ClassUC | opSendOnly
	UCSendOnlyImm  = ClassUC | opSendOnlyImm
	UCWriteFirst   = ClassUC | opWriteFirst
	UCWriteMiddle  = ClassUC | opWriteMiddle
	UCWriteLast    = ClassUC | opWriteLast
	UCWriteLastImm = ClassUC | opWriteLastImm
	UCWriteOnly    = ClassUC | opWriteOnly
	UCWriteOnlyImm = ClassUC | opWriteOnlyImm

	UDSendOnly    = ClassUD | opSendOnly
	UDSendOnlyImm = ClassUD | opSendOnlyImm

	CNP = ClassCNP | opCNP
)

// Class returns the transport class bits of op.
func (op Opcode) Class() Opcode { return op & classMask }

// Op returns op's operation bits with the class cleared; adding a class
// gives the same operation in that class (RCSendOnly.Op()|ClassUC == UCSendOnly).
func (op Opcode) Op() Opcode { return op &^ classMask }

// Info returns op's row of the opcode table. Rows of reserved opcodes have
// Valid() false.
func (op Opcode) Info() *OpInfo { return &opTable[op] }

// Valid reports whether op is a defined opcode.
func (op Opcode) Valid() bool { return opTable[op].Name != "" }

// Mask returns op's header and semantics bits.
func (op Opcode) Mask() Mask { return opTable[op].Mask }

// Is reports whether op has all the bits of m.
func (op Opcode) Is(m Mask) bool { return opTable[op].Mask&m == m }

// String returns the ib_pack.h-style name ("RC_SEND_ONLY") or "OPCODE_0xNN".
func (op Opcode) String() string {
	if n := opTable[op].Name; n != "" {
		return n
	}
	return fmt.Sprintf("OPCODE_0x%02X", uint8(op))
}

// Mask is an opcode's set of header-presence and semantics bits
// (rxe_opcode.h RXE_*_MASK).
type Mask uint32

// Header-presence bits. The numeric order of the header bits is the order
// the headers follow the BTH on the wire.
const (
	HasRDETH Mask = 1 << iota
	HasDETH
	HasXRCETH
	HasFETH
	HasRETH
	HasAtomicETH
	HasAETH
	HasAtomicAckETH
	HasImmDt
	HasIETH
	HasCNP

	headerBits = iota
)

// Semantics bits.
const (
	MaskRequest     Mask = 1 << (headerBits + iota) // sent by a requester
	MaskResponse                                    // sent by a responder (ACKs, read responses)
	MaskSend                                        // SEND family
	MaskWrite                                       // RDMA WRITE family
	MaskRead                                        // RDMA READ request or response
	MaskAtomic                                      // CMP_SWAP or FETCH_ADD (or their ACK)
	MaskAtomicWrite                                 // ATOMIC WRITE (IBA A19)
	MaskFlush                                       // FLUSH (IBA A19)
	MaskAck                                         // ACKNOWLEDGE or ATOMIC ACKNOWLEDGE
	MaskStart                                       // FIRST or ONLY packet of a message
	MaskMiddle                                      // MIDDLE packet
	MaskEnd                                         // LAST or ONLY packet of a message
	MaskPayload                                     // may carry payload
	MaskRecvWQE                                     // consumes a receive WQE at the responder (rxe RWR_MASK)
	MaskComplete                                    // completes a message at the responder (rxe COMP_MASK)
	MaskSolicited                                   // may carry SE (last packet of SEND / WRITE with imm)
	MaskImmediate                                   // carries immediate data
	MaskInvalidate                                  // carries an rkey to invalidate
	MaskCNP                                         // congestion notification packet
)

// PayloadRule says how much payload a packet of an opcode may carry,
// independent of the path MTU; [Packet.CheckPMTU] applies the MTU.
type PayloadRule uint8

const (
	PayloadNone     PayloadRule = iota // no payload (requests without data, ACKs)
	PayloadFull                        // exactly one PMTU (FIRST, MIDDLE)
	PayloadLast                        // 1..PMTU (LAST)
	PayloadUpToPMTU                    // 0..PMTU (ONLY)
	PayloadExact8                      // exactly 8 bytes (ATOMIC WRITE, IBA A19.4.2)
	PayloadCNP                         // 16 reserved bytes, carried as the CNP header
)

// Header identifies one extension header.
type Header uint8

// Extension headers, in wire order after the BTH.
const (
	HdrRDETH Header = iota
	HdrDETH
	HdrXRCETH
	HdrFETH
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH
	HdrCNP
	numHeaders
)

// Extension header lengths in bytes (IBTA 9.3; rxe_hdr.h).
const (
	BTHLen          = 12
	RDETHLen        = 4
	DETHLen         = 8
	XRCETHLen       = 4
	FETHLen         = 4
	RETHLen         = 16
	AtomicETHLen    = 28
	AETHLen         = 4
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	CNPLen          = 16
	ICRCLen         = 4
)

var headerLen = [numHeaders]int{
	HdrRDETH: RDETHLen, HdrDETH: DETHLen, HdrXRCETH: XRCETHLen, HdrFETH: FETHLen,
	HdrRETH: RETHLen, HdrAtomicETH: AtomicETHLen, HdrAETH: AETHLen,
	HdrAtomicAckETH: AtomicAckETHLen, HdrImmDt: ImmDtLen, HdrIETH: IETHLen, HdrCNP: CNPLen,
}

var headerName = [numHeaders]string{
	HdrRDETH: "RDETH", HdrDETH: "DETH", HdrXRCETH: "XRCETH", HdrFETH: "FETH", HdrRETH: "RETH",
	HdrAtomicETH: "AtomicETH", HdrAETH: "AETH", HdrAtomicAckETH: "AtomicAckETH",
	HdrImmDt: "ImmDt", HdrIETH: "IETH", HdrCNP: "CNP",
}

// String returns the header's IBTA name.
func (h Header) String() string {
	if h < numHeaders {
		return headerName[h]
	}
	return fmt.Sprintf("Header(%d)", uint8(h))
}

// Len returns the header's length in bytes (0 for an undefined header).
func (h Header) Len() int {
	if h >= numHeaders {
		return 0
	}
	return headerLen[h]
}

// Bit returns the presence bit of h in an opcode Mask.
func (h Header) Bit() Mask { return 1 << h }

// OpInfo is one row of the opcode table (rxe_opcode.c struct rxe_opcode_info).
type OpInfo struct {
	Name    string
	Mask    Mask
	Payload PayloadRule
	// Length is the length of all transport headers, BTH included.
	Length int
	// Offset[h] is header h's offset from the start of the BTH; valid only
	// when Mask has h.Bit().
	Offset [numHeaders]uint8
}

// Has reports whether packets of this opcode carry header h.
func (i *OpInfo) Has(h Header) bool { return i.Mask&h.Bit() != 0 }

// opTable is the single source of every opcode's headers and semantics.
var opTable = buildOpTable()

type opDef struct {
	op      Opcode
	name    string
	mask    Mask
	payload PayloadRule
}

// Operations of the connected and reliable-datagram classes
// (IBTA Table 38; rxe_opcode.c).
var baseOps = []opDef{
	{opSendFirst, "SEND_FIRST", MaskRequest | MaskSend | MaskStart | MaskPayload | MaskRecvWQE, PayloadFull},
	{opSendMiddle, "SEND_MIDDLE", MaskRequest | MaskSend | MaskMiddle | MaskPayload | MaskRecvWQE, PayloadFull},
	{opSendLast, "SEND_LAST", MaskRequest | MaskSend | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited, PayloadLast},
	{opSendLastImm, "SEND_LAST_WITH_IMMEDIATE", MaskRequest | MaskSend | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskImmediate | HasImmDt, PayloadLast},
	{opSendOnly, "SEND_ONLY", MaskRequest | MaskSend | MaskStart | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited, PayloadUpToPMTU},
	{opSendOnlyImm, "SEND_ONLY_WITH_IMMEDIATE", MaskRequest | MaskSend | MaskStart | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskImmediate | HasImmDt, PayloadUpToPMTU},
	{opWriteFirst, "RDMA_WRITE_FIRST", MaskRequest | MaskWrite | MaskStart | MaskPayload | HasRETH, PayloadFull},
	{opWriteMiddle, "RDMA_WRITE_MIDDLE", MaskRequest | MaskWrite | MaskMiddle | MaskPayload, PayloadFull},
	{opWriteLast, "RDMA_WRITE_LAST", MaskRequest | MaskWrite | MaskEnd | MaskPayload, PayloadLast},
	{opWriteLastImm, "RDMA_WRITE_LAST_WITH_IMMEDIATE", MaskRequest | MaskWrite | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskImmediate | HasImmDt, PayloadLast},
	{opWriteOnly, "RDMA_WRITE_ONLY", MaskRequest | MaskWrite | MaskStart | MaskEnd | MaskPayload | HasRETH, PayloadUpToPMTU},
	{opWriteOnlyImm, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", MaskRequest | MaskWrite | MaskStart | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskImmediate | HasRETH | HasImmDt, PayloadUpToPMTU},
	{opReadRequest, "RDMA_READ_REQUEST", MaskRequest | MaskRead | MaskStart | MaskEnd | HasRETH, PayloadNone},
	{opReadRespFirst, "RDMA_READ_RESPONSE_FIRST", MaskResponse | MaskRead | MaskStart | MaskPayload | HasAETH, PayloadFull},
	{opReadRespMiddle, "RDMA_READ_RESPONSE_MIDDLE", MaskResponse | MaskRead | MaskMiddle | MaskPayload, PayloadFull},
	{opReadRespLast, "RDMA_READ_RESPONSE_LAST", MaskResponse | MaskRead | MaskEnd | MaskPayload | HasAETH, PayloadLast},
	{opReadRespOnly, "RDMA_READ_RESPONSE_ONLY", MaskResponse | MaskRead | MaskStart | MaskEnd | MaskPayload | HasAETH, PayloadUpToPMTU},
	{opAck, "ACKNOWLEDGE", MaskResponse | MaskAck | MaskStart | MaskEnd | HasAETH, PayloadNone},
	{opAtomicAck, "ATOMIC_ACKNOWLEDGE", MaskResponse | MaskAck | MaskAtomic | MaskStart | MaskEnd | HasAETH | HasAtomicAckETH, PayloadNone},
	{opCompareSwap, "COMPARE_SWAP", MaskRequest | MaskAtomic | MaskStart | MaskEnd | HasAtomicETH, PayloadNone},
	{opFetchAdd, "FETCH_ADD", MaskRequest | MaskAtomic | MaskStart | MaskEnd | HasAtomicETH, PayloadNone},
	{opSendLastInv, "SEND_LAST_WITH_INVALIDATE", MaskRequest | MaskSend | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskInvalidate | HasIETH, PayloadLast},
	{opSendOnlyInv, "SEND_ONLY_WITH_INVALIDATE", MaskRequest | MaskSend | MaskStart | MaskEnd | MaskPayload | MaskRecvWQE | MaskComplete | MaskSolicited | MaskInvalidate | HasIETH, PayloadUpToPMTU},
	// IBA 1.5 Annex A19 memory placement extensions (RC and XRC only).
	{opFlush, "FLUSH", MaskRequest | MaskFlush | MaskStart | MaskEnd | HasFETH | HasRETH, PayloadNone},
	{opAtomicWrite, "ATOMIC_WRITE", MaskRequest | MaskAtomicWrite | MaskStart | MaskEnd | MaskPayload | HasRETH, PayloadExact8},
}

func buildOpTable() (t [256]OpInfo) {
	add := func(class Opcode, prefix string, extra Mask, d opDef) {
		info := &t[class|d.op]
		info.Name = prefix + d.name
		info.Mask = d.mask | extra
		info.Payload = d.payload
		off := BTHLen
		for h := Header(0); h < numHeaders; h++ {
			if info.Mask&h.Bit() != 0 {
				info.Offset[h] = uint8(off)
				off += headerLen[h]
			}
		}
		info.Length = off
	}
	for _, d := range baseOps {
		add(ClassRC, "RC_", 0, d)
		var xrc Mask
		if d.mask&MaskRequest != 0 {
			xrc = HasXRCETH // XRC requests carry the XRCETH; responses do not (IBTA 9.3.7)
		}
		add(ClassXRC, "XRC_", xrc, d)
		switch {
		case d.op <= opWriteOnlyImm:
			// UC: SEND and RDMA WRITE only (IBTA Table 38).
			add(ClassUC, "UC_", 0, d)
		}
		if d.op <= opFetchAdd {
			// RD: every request carries RDETH + DETH, every response RDETH.
			rd := HasRDETH
			if d.mask&MaskRequest != 0 {
				rd |= HasDETH
			}
			add(ClassRD, "RD_", rd, d)
		}
	}
	add(ClassRD, "RD_", HasRDETH|HasDETH, opDef{opResync, "RESYNC", MaskRequest | MaskStart | MaskEnd, PayloadNone})
	for _, d := range baseOps {
		if d.op == opSendOnly || d.op == opSendOnlyImm {
			add(ClassUD, "UD_", HasDETH, d)
		}
	}
	add(ClassCNP, "", 0, opDef{opCNP, "CNP", MaskCNP | HasCNP, PayloadCNP})
	return t
}
