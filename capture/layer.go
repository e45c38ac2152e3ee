package capture

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/softnic/softnic/wire"
)

// LayerTypeNumber is the gopacket layer-type number of [LayerTypeRoCE],
// from the 1000-1999 range gopacket leaves to applications.
const LayerTypeNumber = 1791

// LayerTypeRoCE is the gopacket layer type of a RoCEv2 packet: the UDP
// payload on port 4791, BTH through ICRC (IBTA Annex A17).
var LayerTypeRoCE = gopacket.RegisterLayerType(LayerTypeNumber, gopacket.LayerTypeMetadata{
	Name:    "RoCEv2",
	Decoder: gopacket.DecodeFunc(decodeRoCE),
})

func init() {
	// As gopacket's layers/ports.go does for VXLAN on 4789: UDP payloads to
	// or from port 4791 decode as RoCEv2.
	layers.RegisterUDPPortLayerType(layers.UDPPort(wire.UDPPort), LayerTypeRoCE)
}

// RoCE is a decoded RoCEv2 packet. Every field comes from [wire.Parse]:
// the header fields are wire's zero-copy views into the decoded bytes, nil
// when the opcode does not carry that header. LayerContents is the BTH and
// the extension headers; LayerPayload is the payload without pad and ICRC.
type RoCE struct {
	layers.BaseLayer
	// Packet is wire's parse result; its slices alias the decoded bytes.
	Packet wire.Packet
	Opcode wire.Opcode
	BTH    wire.BTH
	// Extension headers, in wire order; nil when absent.
	RDETH        wire.RDETH
	DETH         wire.DETH
	XRCETH       wire.XRCETH
	FETH         wire.FETH
	RETH         wire.RETH
	AtomicETH    wire.AtomicETH
	AETH         wire.AETH
	AtomicAckETH wire.AtomicAckETH
	ImmDt        wire.ImmDt
	IETH         wire.IETH
	// Pad is the pad count from the BTH; ICRC the ICRC the packet carries.
	Pad  int
	ICRC uint32
}

var (
	_ gopacket.Layer         = (*RoCE)(nil)
	_ gopacket.DecodingLayer = (*RoCE)(nil)
)

// LayerType returns LayerTypeRoCE.
func (r *RoCE) LayerType() gopacket.LayerType { return LayerTypeRoCE }

// CanDecode returns LayerTypeRoCE, the class of layers r decodes.
func (r *RoCE) CanDecode() gopacket.LayerClass { return LayerTypeRoCE }

// NextLayerType returns gopacket.LayerTypePayload: the RoCE payload is
// opaque application data, which gopacket then offers as the packet's
// ApplicationLayer.
func (r *RoCE) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data, a whole UDP payload (BTH through ICRC),
// with wire.Parse. It does not verify the ICRC, which needs the IP and UDP
// headers (see [CheckICRC]). On error every field is cleared, and a
// truncated packet is reported through df.SetTruncated.
func (r *RoCE) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*r = RoCE{}
	if err := wire.Parse(data, &r.Packet); err != nil {
		r.Packet = wire.Packet{}
		r.Contents = data
		if errors.Is(err, wire.ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	p := &r.Packet
	r.Contents = p.Hdr
	r.Payload = p.Payload
	r.Opcode = p.Opcode
	r.BTH = p.BTH()
	r.RDETH = p.RDETH()
	r.DETH = p.DETH()
	r.XRCETH = p.XRCETH()
	r.FETH = p.FETH()
	r.RETH = p.RETH()
	r.AtomicETH = p.AtomicETH()
	r.AETH = p.AETH()
	r.AtomicAckETH = p.AtomicAckETH()
	r.ImmDt = p.ImmDt()
	r.IETH = p.IETH()
	r.Pad = p.Pad
	r.ICRC = p.ICRC()
	return nil
}

func decodeRoCE(data []byte, p gopacket.PacketBuilder) error {
	r := &RoCE{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// String summarises the packet in one line: opcode, destination QP, PSN,
// AckReq, the fields of each extension header and the payload length, e.g.
//
//	RC_RDMA_WRITE_ONLY qpn=0x11 psn=0x2a ackreq=1 RETH[va=0x7f0000 rkey=0x1234 len=64] payload=64
//
// Decoding failures give "RoCEv2(undecoded)".
func (r *RoCE) String() string {
	if r.BTH == nil {
		return "RoCEv2(undecoded)"
	}
	var b strings.Builder
	b.WriteString(r.Opcode.String())
	fmt.Fprintf(&b, " qpn=%#x psn=%#x ackreq=%d", r.BTH.DestQP(), uint32(r.BTH.PSN()), b2i(r.BTH.AckReq()))
	if r.BTH.SE() {
		b.WriteString(" se=1")
	}
	if r.BTH.MigReq() {
		b.WriteString(" migreq=1")
	}
	if r.BTH.FECN() {
		b.WriteString(" fecn=1")
	}
	if r.BTH.BECN() {
		b.WriteString(" becn=1")
	}
	if k := r.BTH.PKey(); k != wire.DefaultPKey {
		fmt.Fprintf(&b, " pkey=%#x", k)
	}
	if h := r.RDETH; h != nil {
		fmt.Fprintf(&b, " RDETH[eecnxt=%#x]", h.EECnxt())
	}
	if h := r.DETH; h != nil {
		fmt.Fprintf(&b, " DETH[qkey=%#x srcqp=%#x]", h.QKey(), h.SrcQP())
	}
	if h := r.XRCETH; h != nil {
		fmt.Fprintf(&b, " XRCETH[srq=%#x]", h.XRCSRQ())
	}
	if h := r.FETH; h != nil {
		fmt.Fprintf(&b, " FETH[type=%s selectivity=%s]", FlushTypeString(h.PlacementType()), FlushSelectivityString(h.Selectivity()))
	}
	if h := r.RETH; h != nil {
		fmt.Fprintf(&b, " RETH[va=%#x rkey=%#x len=%d]", h.VA(), h.RKey(), h.DMALen())
	}
	if h := r.AtomicETH; h != nil {
		if r.Opcode.Op() == wire.RCFetchAdd.Op() {
			fmt.Fprintf(&b, " AtomicETH[va=%#x rkey=%#x add=%#x]", h.VA(), h.RKey(), h.SwapAdd())
		} else {
			fmt.Fprintf(&b, " AtomicETH[va=%#x rkey=%#x swap=%#x compare=%#x]", h.VA(), h.RKey(), h.SwapAdd(), h.Compare())
		}
	}
	if h := r.AETH; h != nil {
		fmt.Fprintf(&b, " AETH[%s msn=%d]", h.Syndrome(), h.MSN())
	}
	if h := r.AtomicAckETH; h != nil {
		fmt.Fprintf(&b, " AtomicAckETH[orig=%#x]", h.Orig())
	}
	if h := r.ImmDt; h != nil {
		fmt.Fprintf(&b, " ImmDt[%#x]", h.Imm())
	}
	if h := r.IETH; h != nil {
		fmt.Fprintf(&b, " IETH[rkey=%#x]", h.RKey())
	}
	fmt.Fprintf(&b, " payload=%d", len(r.Packet.Payload))
	return b.String()
}

// FlushTypeString names a FETH placement type: "global", "persistent",
// "global|persistent", "none", or the number when reserved bits are set
// (IBA A19.4.4; libibverbs IBV_FLUSH_GLOBAL/PERSISTENT).
func FlushTypeString(t uint8) string {
	switch t {
	case 0:
		return "none"
	case wire.FlushGlobal:
		return "global"
	case wire.FlushPersistent:
		return "persistent"
	case wire.FlushGlobal | wire.FlushPersistent:
		return "global|persistent"
	}
	return fmt.Sprintf("%#x", t)
}

// FlushSelectivityString names a FETH selectivity level: "range" (the RETH
// range), "mr" (the whole MR) or the number when reserved.
func FlushSelectivityString(s uint8) string {
	switch s {
	case wire.FlushRange:
		return "range"
	case wire.FlushMR:
		return "mr"
	}
	return fmt.Sprintf("%d", s)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// CheckICRC verifies the ICRC of the RoCEv2 packet in pkt, which must have
// been decoded from the IP layer or below (the ICRC covers the IP and UDP
// headers). It returns wire.ErrBadICRC on mismatch, and an error wrapping
// wire.ErrNotRoCE when pkt has no RoCE or IP layer.
func CheckICRC(pkt gopacket.Packet) error {
	if pkt.Layer(LayerTypeRoCE) == nil {
		return fmt.Errorf("%w: no RoCEv2 layer", wire.ErrNotRoCE)
	}
	nl := pkt.NetworkLayer()
	if nl == nil {
		return fmt.Errorf("%w: no IP layer", wire.ErrNotRoCE)
	}
	ip := make([]byte, 0, len(nl.LayerContents())+len(nl.LayerPayload()))
	ip = append(append(ip, nl.LayerContents()...), nl.LayerPayload()...)
	e, payload, err := wire.ParseEncap(ip)
	if err != nil {
		return err
	}
	return wire.CheckICRC(&e, payload)
}
