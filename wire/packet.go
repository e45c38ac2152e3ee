package wire

import (
	"encoding/binary"
	"fmt"
)

// Packet is one parsed RoCEv2 packet (rxe_hdr.h struct rxe_pkt_info): the
// opcode's table row and slices into the caller's buffer. It is filled once
// by Parse; handlers read it and never re-parse.
type Packet struct {
	Opcode  Opcode
	Info    *OpInfo // Opcode's row of the opcode table
	Raw     []byte  // the whole UDP payload, BTH through ICRC
	Hdr     []byte  // BTH and every extension header (Info.Length bytes)
	Payload []byte  // payload without pad
	Pad     int     // pad count from the BTH
}

// Mask returns the opcode's header and semantics bits.
func (p *Packet) Mask() Mask { return p.Info.Mask }

// Is reports whether the packet's opcode has every bit of m.
func (p *Packet) Is(m Mask) bool { return p.Info.Mask&m == m }

// BTH returns the base transport header view.
func (p *Packet) BTH() BTH { return BTH(p.Hdr[:BTHLen]) }

// PSN returns the BTH PSN.
func (p *Packet) PSN() PSN { return p.BTH().PSN() }

// DestQP returns the BTH destination QP number.
func (p *Packet) DestQP() uint32 { return p.BTH().DestQP() }

// AckReq reports whether the BTH AckReq bit is set.
func (p *Packet) AckReq() bool { return p.BTH().AckReq() }

// SE reports whether the BTH solicited-event bit is set.
func (p *Packet) SE() bool { return p.BTH().SE() }

// ICRC returns the ICRC the packet carries.
func (p *Packet) ICRC() uint32 { return StoredICRC(p.Raw) }

func (p *Packet) ext(h Header) []byte {
	if !p.Info.Has(h) {
		return nil
	}
	off := int(p.Info.Offset[h])
	return p.Hdr[off : off+headerLen[h]]
}

// Extension-header views; each is nil when the opcode does not carry it.
func (p *Packet) RDETH() RDETH               { return RDETH(p.ext(HdrRDETH)) }
func (p *Packet) DETH() DETH                 { return DETH(p.ext(HdrDETH)) }
func (p *Packet) XRCETH() XRCETH             { return XRCETH(p.ext(HdrXRCETH)) }
func (p *Packet) FETH() FETH                 { return FETH(p.ext(HdrFETH)) }
func (p *Packet) RETH() RETH                 { return RETH(p.ext(HdrRETH)) }
func (p *Packet) AtomicETH() AtomicETH       { return AtomicETH(p.ext(HdrAtomicETH)) }
func (p *Packet) AETH() AETH                 { return AETH(p.ext(HdrAETH)) }
func (p *Packet) AtomicAckETH() AtomicAckETH { return AtomicAckETH(p.ext(HdrAtomicAckETH)) }
func (p *Packet) ImmDt() ImmDt               { return ImmDt(p.ext(HdrImmDt)) }
func (p *Packet) IETH() IETH                 { return IETH(p.ext(HdrIETH)) }
func (p *Packet) CNP() []byte                { return p.ext(HdrCNP) }

// Parse parses pkt, a whole UDP payload (BTH through ICRC), into p. It
// checks everything that does not depend on a QP: length, transport
// version, opcode, header lengths for the opcode, pad and the opcode's
// payload rule. It neither verifies the ICRC (see CheckICRC) nor checks the
// payload against the path MTU (see CheckPMTU). p's slices alias pkt.
// Errors wrap ErrMalformed.
func Parse(pkt []byte, p *Packet) error {
	if len(pkt) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	bth := BTH(pkt[:BTHLen])
	if bth.TVer() != 0 {
		return ErrBadVersion
	}
	op := bth.Opcode()
	info := &opTable[op]
	if info.Name == "" {
		return fmt.Errorf("%w 0x%02x", ErrUnknownOpcode, uint8(op))
	}
	if len(pkt) < info.Length+ICRCLen {
		return fmt.Errorf("%w: %s needs %d header bytes, packet has %d", ErrTruncated, info.Name, info.Length+ICRCLen, len(pkt))
	}
	if len(pkt)%4 != 0 {
		return fmt.Errorf("%w: %d bytes is not a multiple of 4", ErrBadLength, len(pkt))
	}
	body := len(pkt) - info.Length - ICRCLen
	pad := bth.Pad()
	if pad > body {
		return fmt.Errorf("%w: pad %d with %d bytes after the headers", ErrBadPad, pad, body)
	}
	n := body - pad
	switch info.Payload {
	case PayloadNone, PayloadCNP:
		if body != 0 {
			return fmt.Errorf("%w: %s carries no payload, got %d bytes", ErrBadLength, info.Name, body)
		}
	case PayloadExact8:
		if n != 8 || pad != 0 {
			return fmt.Errorf("%w: %s carries exactly 8 bytes, got %d", ErrBadLength, info.Name, n)
		}
	case PayloadFull:
		if pad != 0 {
			return fmt.Errorf("%w: %s must be a whole PMTU with no pad", ErrBadPad, info.Name)
		}
	}
	p.Opcode = op
	p.Info = info
	p.Raw = pkt
	p.Hdr = pkt[:info.Length]
	p.Payload = pkt[info.Length : info.Length+n]
	p.Pad = pad
	return nil
}

// CheckPMTU checks the payload length against the path MTU, by the
// opcode's payload rule: FIRST and MIDDLE exactly one PMTU, LAST 1..PMTU,
// ONLY 0..PMTU (IBTA C9-89..C9-92; rxe_resp.c check_length).
func (p *Packet) CheckPMTU(pmtu int) error {
	n := len(p.Payload)
	switch p.Info.Payload {
	case PayloadFull:
		if n != pmtu {
			return fmt.Errorf("%w: %s payload %d, PMTU %d", ErrBadLength, p.Info.Name, n, pmtu)
		}
	case PayloadLast:
		if n < 1 || n > pmtu {
			return fmt.Errorf("%w: %s payload %d, PMTU %d", ErrBadLength, p.Info.Name, n, pmtu)
		}
	case PayloadUpToPMTU:
		if n > pmtu {
			return fmt.Errorf("%w: %s payload %d, PMTU %d", ErrBadLength, p.Info.Name, n, pmtu)
		}
	}
	return nil
}

// Headers holds the fields of every header a packet may carry; only those
// of the opcode's headers are used. It is what Build encodes and what
// Packet.Headers decodes.
type Headers struct {
	BTH          BTHFields
	RDETH        RDETHFields
	DETH         DETHFields
	XRCETH       XRCETHFields
	FETH         FETHFields
	RETH         RETHFields
	AtomicETH    AtomicETHFields
	AETH         AETHFields
	AtomicAckETH AtomicAckETHFields
	Imm          uint32 // ImmDt
	InvRKey      uint32 // IETH
}

// Headers decodes every header of p.
func (p *Packet) Headers() Headers {
	h := Headers{BTH: p.BTH().Fields()}
	if v := p.RDETH(); v != nil {
		h.RDETH = v.Fields()
	}
	if v := p.DETH(); v != nil {
		h.DETH = v.Fields()
	}
	if v := p.XRCETH(); v != nil {
		h.XRCETH = v.Fields()
	}
	if v := p.FETH(); v != nil {
		h.FETH = v.Fields()
	}
	if v := p.RETH(); v != nil {
		h.RETH = v.Fields()
	}
	if v := p.AtomicETH(); v != nil {
		h.AtomicETH = v.Fields()
	}
	if v := p.AETH(); v != nil {
		h.AETH = v.Fields()
	}
	if v := p.AtomicAckETH(); v != nil {
		h.AtomicAckETH = v.Fields()
	}
	if v := p.ImmDt(); v != nil {
		h.Imm = v.Imm()
	}
	if v := p.IETH(); v != nil {
		h.InvRKey = v.RKey()
	}
	return h
}

// PutHeaders writes the transport headers of h.BTH.Opcode into b and
// returns their length. The BTH pad count is written as h.BTH.Pad; Build
// sets it from the payload. b must hold Opcode.Info().Length bytes.
func PutHeaders(b []byte, h *Headers) (int, error) {
	info := &opTable[h.BTH.Opcode]
	if info.Name == "" {
		return 0, fmt.Errorf("%w 0x%02x", ErrUnknownOpcode, uint8(h.BTH.Opcode))
	}
	if len(b) < info.Length {
		return 0, ErrTruncated
	}
	BTH(b).Encode(&h.BTH)
	at := func(hd Header) []byte {
		off := int(info.Offset[hd])
		return b[off : off+headerLen[hd]]
	}
	m := info.Mask
	if m&HasRDETH != 0 {
		RDETH(at(HdrRDETH)).Encode(&h.RDETH)
	}
	if m&HasDETH != 0 {
		DETH(at(HdrDETH)).Encode(&h.DETH)
	}
	if m&HasXRCETH != 0 {
		XRCETH(at(HdrXRCETH)).Encode(&h.XRCETH)
	}
	if m&HasFETH != 0 {
		FETH(at(HdrFETH)).Encode(&h.FETH)
	}
	if m&HasRETH != 0 {
		RETH(at(HdrRETH)).Encode(&h.RETH)
	}
	if m&HasAtomicETH != 0 {
		AtomicETH(at(HdrAtomicETH)).Encode(&h.AtomicETH)
	}
	if m&HasAETH != 0 {
		AETH(at(HdrAETH)).Encode(&h.AETH)
	}
	if m&HasAtomicAckETH != 0 {
		AtomicAckETH(at(HdrAtomicAckETH)).Encode(&h.AtomicAckETH)
	}
	if m&HasImmDt != 0 {
		ImmDt(at(HdrImmDt)).SetImm(h.Imm)
	}
	if m&HasIETH != 0 {
		IETH(at(HdrIETH)).SetRKey(h.InvRKey)
	}
	if m&HasCNP != 0 {
		clear(at(HdrCNP))
	}
	return info.Length, nil
}

// PadFor returns the pad count for a payload of n bytes: bytes to the next
// multiple of four (IBTA 9.2; rxe: (-payload) & 3).
func PadFor(n int) int { return -n & 3 }

// PacketLen returns the UDP payload length of a packet of opcode op with n
// payload bytes: headers, payload, pad and ICRC.
func PacketLen(op Opcode, n int) int {
	return opTable[op].Length + n + PadFor(n) + ICRCLen
}

// Build writes a complete UDP payload into b: the headers of h (with the
// pad count set from len(payload)), the payload, zero pad bytes, and the
// ICRC computed for e. It returns the number of bytes written.
func Build(b []byte, e *Encap, h *Headers, payload []byte) (int, error) {
	n, err := PutHeaders(b, h)
	if err != nil {
		return 0, err
	}
	pad := PadFor(len(payload))
	total := n + len(payload) + pad + ICRCLen
	if len(b) < total {
		return 0, ErrTruncated
	}
	BTH(b).SetPad(pad)
	copy(b[n:], payload)
	clear(b[n+len(payload) : n+len(payload)+pad])
	SetICRC(e, b[:total])
	return total, nil
}

// Finish completes a packet whose headers and n payload bytes are already
// in b (headers from PutHeaders, payload copied in place after them): it
// sets the pad count, zeroes the pad and writes the ICRC for e. It returns
// the packet length. It is Build for callers that gather payload straight
// into the send buffer.
func Finish(b []byte, e *Encap, hdrLen, n int) (int, error) {
	pad := PadFor(n)
	total := hdrLen + n + pad + ICRCLen
	if len(b) < total || hdrLen < BTHLen {
		return 0, ErrTruncated
	}
	BTH(b).SetPad(pad)
	clear(b[hdrLen+n : hdrLen+n+pad])
	SetICRC(e, b[:total])
	return total, nil
}

// FinishSplit completes a packet whose headers are in b[:hdrLen] and whose
// payload a link sends from where it lies (link.Datagram.Payload) instead
// of from a copy after the headers: it sets the pad count and writes the
// pad and the ICRC for e, computed over headers, payload and pad, at
// b[hdrLen:]. It returns the length of b's part, hdrLen+pad+ICRCLen; the
// packet is b[:hdrLen], then payload, then the rest of that part.
//
// payload is registered memory, which the application and other QPs may
// write at any time (DMA, package mem): the ICRC reads it with dmaCRC,
// which the race detector does not instrument. A write between this call
// and the send leaves a packet whose ICRC does not match, which the
// receiver drops as it would a corrupted one.
func FinishSplit(b []byte, e *Encap, hdrLen int, payload []byte) (int, error) {
	pad := PadFor(len(payload))
	n := hdrLen + pad + ICRCLen
	if len(b) < n || hdrLen < BTHLen {
		return 0, ErrTruncated
	}
	BTH(b).SetPad(pad)
	tail := b[hdrLen:n]
	clear(tail[:pad])
	crc := icrcHeaders(e, b[:BTHLen], hdrLen+len(payload)+pad+ICRCLen)
	crc = crcSmall(crc, b[BTHLen:hdrLen])
	crc = dmaCRC(crc, payload)
	crc = crcSmall(crc, tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], crc)
	return n, nil
}
