package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/softnic/softnic/wire"
)

// Snaplen is the snap length the Writer declares: room for any RoCEv2
// packet (a 4096-byte PMTU plus headers) and for 64 KiB UDP datagrams.
const Snaplen = 262144

// DefaultLinkType is the link type tools should write: Ethernet, the
// link type of rxe's own tcpdump captures and the one every pcap reader
// handles. tshark 4.0 dissects LinkTypeRaw records as RoCEv2 just as well
// (TestTsharkDissectsWriter checks both).
const DefaultLinkType = layers.LinkTypeEthernet

// maxIPPayload is the most an IPv4 total length or IPv6 payload length
// field can state.
const maxIPPayload = 0xFFFF

// Writer writes RoCEv2 datagrams to a pcap stream with nanosecond
// timestamps. With layers.LinkTypeRaw (LINKTYPE_RAW, 101) each record is
// the bare IPv4 or IPv6 datagram; with layers.LinkTypeEthernet a synthetic
// Ethernet II header comes first, with locally administered MAC addresses
// 02:00:a.b.c.d made from the last four bytes of each IP address. tshark
// dissects both as IP/UDP/InfiniBand. IPv4 headers carry a correct header
// checksum; the UDP checksum is whatever the Encap says (rxe sends 0).
//
// A Writer is safe for concurrent use: each record is written whole.
type Writer struct {
	link layers.LinkType

	mu  sync.Mutex
	pw  *pcapgo.Writer // guarded by mu
	buf []byte         // guarded by mu
}

// NewWriter writes a pcap file header for link type link (LinkTypeRaw or
// LinkTypeEthernet) to w and returns a Writer for its records.
func NewWriter(w io.Writer, link layers.LinkType) (*Writer, error) {
	if link != layers.LinkTypeRaw && link != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("capture: writer supports link types Raw and Ethernet, not %v", link)
	}
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(Snaplen, link); err != nil {
		return nil, err
	}
	return &Writer{link: link, pw: pw}, nil
}

// LinkType returns the link type of the records.
func (w *Writer) LinkType() layers.LinkType { return w.link }

// WriteDatagram writes one record: the IP and UDP headers e describes,
// followed by udpPayload (a RoCEv2 packet, BTH through ICRC, as wire.Build
// makes it), captured at ts. Lengths are set from udpPayload. Both of e's
// addresses must be valid and of one family (an IPv4-mapped IPv6 address
// counts as IPv4, as on the wire).
func (w *Writer) WriteDatagram(ts time.Time, e *wire.Encap, udpPayload []byte) error {
	if !e.Src.IsValid() || !e.Dst.IsValid() {
		return fmt.Errorf("capture: datagram %v > %v: invalid address", e.Src, e.Dst)
	}
	if e.Src.Unmap().Is4() != e.Dst.Unmap().Is4() {
		return fmt.Errorf("capture: datagram %v > %v: mixed IPv4 and IPv6", e.Src, e.Dst)
	}
	ipLen := e.HeaderLen() + len(udpPayload)
	limit := maxIPPayload
	if !e.IsIPv4() {
		limit += wire.IPv6HeaderLen
	}
	if ipLen > limit {
		return fmt.Errorf("capture: %d-byte UDP payload does not fit one IP datagram", len(udpPayload))
	}
	var l2 int
	if w.link == layers.LinkTypeEthernet {
		l2 = ethHeaderLen
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := l2 + ipLen
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	b := w.buf[:n]
	if l2 > 0 {
		putEthernet(b, e)
	}
	h := e.PutHeaders(b[l2:], len(udpPayload))
	copy(b[l2+h:], udpPayload)
	return w.pw.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: n, Length: n}, b)
}

// putEthernet writes a synthetic Ethernet II header for e into b.
func putEthernet(b []byte, e *wire.Encap) {
	putMAC(b[0:6], e.Dst)
	putMAC(b[6:12], e.Src)
	et := uint16(etherTypeIPv6)
	if e.IsIPv4() {
		et = etherTypeIPv4
	}
	binary.BigEndian.PutUint16(b[12:], et)
}

// putMAC writes 02:00 and the last four bytes of a (a locally
// administered unicast address).
func putMAC(b []byte, a netip.Addr) {
	a16 := a.As16()
	b[0], b[1] = 0x02, 0x00
	copy(b[2:6], a16[12:])
}
