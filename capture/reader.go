package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/softnic/softnic/wire"
)

// Datagram is one UDP datagram read from a capture.
type Datagram struct {
	// Index is the frame's 1-based number in the file, counting every
	// frame, as Wireshark and tshark number them.
	Index int
	Time  time.Time
	// Encap is the IP and UDP header, as wire.ParseEncap decodes it.
	Encap wire.Encap
	// Payload is the UDP payload, trimmed to the UDP length.
	Payload []byte
}

// FrameError reports one frame that looks like IP/UDP but cannot be
// decoded (cut short by the capture's snap length, inconsistent lengths,
// a frame shorter than its link header). Reading can go on after it.
type FrameError struct {
	Index int // 1-based frame number
	Time  time.Time
	// DstPort is the UDP destination port when the UDP header was captured,
	// else 0; wire.UDPPort marks a broken RoCEv2 packet.
	DstPort uint16
	Err     error
}

func (e *FrameError) Error() string { return fmt.Sprintf("packet %d: %v", e.Index, e.Err) }

// Unwrap returns the underlying error.
func (e *FrameError) Unwrap() error { return e.Err }

// packetSource is what pcapgo's pcap and pcapng readers have in common.
type packetSource interface {
	ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Reader yields the UDP datagrams of a pcap or pcapng capture (gzip-
// compressed pcap too), skipping frames that carry none. It understands
// the link types Linux tools write: Ethernet with any number of 802.1Q or
// 802.1ad tags, raw IP (LINKTYPE_RAW 101, DLT_RAW 12 and 14, IPV4 228,
// IPV6 229), Linux cooked SLL (113) and SLL2 (276), and BSD loopback
// (NULL 0, LOOP 108). IP datagrams that wire.ParseEncap refuses as not
// RoCE-capable (non-UDP, fragments, IPv4 options, IPv6 extension headers)
// are skipped too.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	src     packetSource
	link    layers.LinkType // pcap only; pcapng gives one per packet
	ng      bool
	frames  int
	skipped int
}

var pcapngMagic = []byte{0x0A, 0x0D, 0x0D, 0x0A}

// NewReader reads the capture's file header from r and returns a Reader.
// It fails on input that is neither pcap nor pcapng, and on a pcap of a
// link type it does not understand.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading capture header: %w", err)
	}
	if string(magic) == string(pcapngMagic) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("reading pcapng header: %w", err)
		}
		return &Reader{src: ng, ng: true}, nil
	}
	pr, err := pcapgo.NewReader(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("not a pcap or pcapng file: %w", err)
	}
	lt := pr.LinkType()
	if !supportedLink(lt) {
		return nil, fmt.Errorf("unsupported pcap link type %v (%d)", lt, uint32(lt))
	}
	return &Reader{src: pr, link: lt}, nil
}

// Next returns the next UDP datagram. At the end of the capture it returns
// io.EOF. A frame that cannot be decoded gives a *FrameError, after which
// Next may be called again; any other error means the capture itself is
// unreadable from that point (typically a truncated last record).
func (r *Reader) Next() (Datagram, error) {
	for {
		data, ci, err := r.src.ReadPacketData()
		if err != nil {
			if err == io.EOF {
				return Datagram{}, io.EOF
			}
			return Datagram{}, fmt.Errorf("reading packet %d: %w", r.frames+1, err)
		}
		r.frames++
		lt := r.link
		if r.ng {
			lt = layers.LinkTypeNull
			ok := false
			if len(ci.AncillaryData) > 0 {
				lt, ok = ci.AncillaryData[0].(layers.LinkType)
			}
			if !ok || !supportedLink(lt) {
				r.skipped++
				continue
			}
		}
		ip, err := ipFromFrame(lt, data)
		if err == errNotIP {
			r.skipped++
			continue
		}
		if err != nil {
			return Datagram{}, &FrameError{Index: r.frames, Time: ci.Timestamp, Err: err}
		}
		e, payload, err := wire.ParseEncap(ip)
		if err != nil {
			if errors.Is(err, wire.ErrNotRoCE) {
				r.skipped++
				continue
			}
			if ci.CaptureLength < ci.Length {
				err = fmt.Errorf("frame cut at %d of %d bytes by the capture: %w", ci.CaptureLength, ci.Length, err)
			}
			return Datagram{}, &FrameError{Index: r.frames, Time: ci.Timestamp, DstPort: udpDstPort(ip), Err: err}
		}
		return Datagram{Index: r.frames, Time: ci.Timestamp, Encap: e, Payload: payload}, nil
	}
}

// Frames returns the number of frames read so far.
func (r *Reader) Frames() int { return r.frames }

// Skipped returns the number of frames read so far that carried no UDP
// datagram (or one wire.ParseEncap refuses).
func (r *Reader) Skipped() int { return r.skipped }

// ReadFile returns every UDP datagram of the capture file name. Any error,
// a *FrameError included, ends the read.
func ReadFile(name string) ([]Datagram, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var ds []Datagram
	for {
		d, err := r.Next()
		if err == io.EOF {
			return ds, nil
		}
		if err != nil {
			return ds, fmt.Errorf("%s: %w", name, err)
		}
		ds = append(ds, d)
	}
}
