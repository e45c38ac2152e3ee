package fabric

import (
	"bufio"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// pcap file format (https://www.tcpdump.org/manpages/pcap-savefile.5.html),
// written little-endian with microsecond timestamps.
const (
	pcapMagic        = 0xA1B2C3D4
	pcapVersionMajor = 2
	pcapVersionMinor = 4
	pcapSnapLen      = 65535
	pcapLinkTypeRaw  = 101 // LINKTYPE_RAW: the packet begins with an IPv4 or IPv6 header
	pcapHeaderLen    = 24
	pcapRecordLen    = 16
)

// pcapWriter writes one pcap record per datagram, each in a single Write
// to a buffered writer.
type pcapWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer // guarded by mu
	err error         // first write error; guarded by mu
	rec []byte        // record scratch; guarded by mu
}

func newPcapWriter(w io.Writer) *pcapWriter {
	p := &pcapWriter{
		w:   bufio.NewWriterSize(w, 64<<10),
		rec: make([]byte, pcapRecordLen+wire.IPv6HeaderLen+wire.UDPHeaderLen+link.MaxDatagram),
	}
	var h [pcapHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], pcapMagic)
	le.PutUint16(h[4:], pcapVersionMajor)
	le.PutUint16(h[6:], pcapVersionMinor)
	// thiszone and sigfigs stay zero.
	le.PutUint32(h[16:], pcapSnapLen)
	le.PutUint32(h[20:], pcapLinkTypeRaw)
	_, p.err = p.w.Write(h[:])
	return p
}

// write records the datagram data sent with the headers e describes at ts.
func (p *pcapWriter) write(ts time.Time, e *wire.Encap, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	n := e.PutHeaders(p.rec[pcapRecordLen:], len(data))
	n += copy(p.rec[pcapRecordLen+n:], data)
	le := binary.LittleEndian
	le.PutUint32(p.rec[0:], uint32(ts.Unix()))
	le.PutUint32(p.rec[4:], uint32(ts.Nanosecond()/1000))
	le.PutUint32(p.rec[8:], uint32(n))
	le.PutUint32(p.rec[12:], uint32(n))
	_, p.err = p.w.Write(p.rec[:pcapRecordLen+n])
}

func (p *pcapWriter) flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.err = p.w.Flush()
	return p.err
}
