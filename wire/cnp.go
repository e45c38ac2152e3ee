package wire

import "fmt"

// Congestion notification (RoCEv2 Annex A17.9.3) and the ECN field of
// the IP header (RFC 3168), which DCQCN (Zhu et al., SIGCOMM 2015) reads
// and writes: a sender marks its packets ECN-capable (ECT), a switch
// whose queue builds marks them Congestion Experienced (CE), and the
// receiver answers a CE mark with a CNP to the sending QP.

// The ECN codepoints of the low two bits of the IPv4 TOS / IPv6 traffic
// class (RFC 3168 5).
const (
	ECNMask   = 0x03
	ECNNotECT = 0x00 // not ECN-capable
	ECNECT1   = 0x01 // ECN-capable transport (1)
	ECNECT0   = 0x02 // ECN-capable transport (0): what DCQCN senders set
	ECNCE     = 0x03 // congestion experienced
)

// ECN returns the ECN codepoint of traffic class tc.
func ECN(tc uint8) uint8 { return tc & ECNMask }

// WithECN returns traffic class tc with its ECN codepoint set to ecn,
// its DSCP kept.
func WithECN(tc, ecn uint8) uint8 { return tc&^ECNMask | ecn&ECNMask }

// CNPLength is the UDP payload length of a CNP: BTH, the 16 reserved
// bytes and the ICRC.
const CNPLength = BTHLen + CNPLen + ICRCLen

// BuildCNP writes a CNP for QP destQP into b, its ICRC computed for e,
// and returns its length, CNPLength (A17.9.3): BTH opcode 0x81 with the
// BECN bit set, the default P_Key, DestQP the QP that sent the marked
// packet, PSN 0, then 16 reserved zero bytes and the ICRC.
func BuildCNP(b []byte, e *Encap, destQP uint32) (int, error) {
	h := Headers{BTH: BTHFields{Opcode: CNP, PKey: DefaultPKey, BECN: true, DestQP: destQP & QPNMask}}
	return Build(b, e, &h, nil)
}

// CheckCNP checks a parsed CNP beyond what Parse checks (its length): the
// BECN bit, which A17.9.3 requires set. The PSN and the reserved bytes
// are not looked at: a receiver ignores reserved fields.
func (p *Packet) CheckCNP() error {
	if p.Opcode != CNP {
		return fmt.Errorf("%w: %v is not a CNP", ErrMalformed, p.Opcode)
	}
	if !p.BTH().BECN() {
		return fmt.Errorf("%w: CNP without BECN", ErrMalformed)
	}
	return nil
}
