package transporttest

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// CQ is a transport.CQ that keeps every completion until the test takes
// it, and whether it was solicited.
type CQ struct {
	mu        sync.Mutex
	wcs       []ibv.WorkCompletion // guarded by mu
	solicited []bool               // guarded by mu
}

var _ transport.CQ = (*CQ)(nil)

// Push keeps wc; the CQ never overflows.
func (c *CQ) Push(wc *ibv.WorkCompletion, solicited bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wcs = append(c.wcs, *wc)
	c.solicited = append(c.solicited, solicited)
	return true
}

// Len returns how many completions the CQ holds.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.wcs)
}

// Take removes and returns the oldest n completions (all with n < 0).
func (c *CQ) Take(n int) []ibv.WorkCompletion {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 || n > len(c.wcs) {
		n = len(c.wcs)
	}
	out := append([]ibv.WorkCompletion(nil), c.wcs[:n]...)
	c.wcs = append(c.wcs[:0], c.wcs[n:]...)
	c.solicited = append(c.solicited[:0], c.solicited[n:]...)
	return out
}

// Solicited reports whether the oldest completion held was pushed as
// solicited.
func (c *CQ) Solicited() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.solicited) > 0 && c.solicited[0]
}

// Raw is a bare fabric endpoint that sends packets built byte by byte:
// a peer no transport would be (misaligned atomics, broken opcode
// sequences, foreign P_Keys).
type Raw struct {
	t     testing.TB
	ep    *fabric.Endpoint
	Encap wire.Encap      // the IP/UDP header of what Send sends
	rx    []link.Datagram // Receive's, with their buffers
	pkts  []wire.Packet   // what Receive returned last
}

// Raw attaches a raw endpoint at addr sending to dst from UDP port
// sport.
func (n *Net) Raw(addr string, dst netip.Addr, sport uint16) *Raw {
	n.t.Helper()
	return AttachRaw(n.t, n.fabric, addr, dst, sport)
}

// AttachRaw attaches a raw endpoint to f at addr sending to dst from UDP
// port sport: Net.Raw for a fabric the test runs itself (an engine's).
func AttachRaw(t testing.TB, f *fabric.Fabric, addr string, dst netip.Addr, sport uint16) *Raw {
	t.Helper()
	a := netip.MustParseAddr(addr)
	ep, err := f.Attach(a)
	if err != nil {
		t.Fatal(err)
	}
	return &Raw{t: t, ep: ep, Encap: wire.Encap{Src: a, Dst: dst, SrcPort: sport,
		DstPort: wire.UDPPort, HopLimit: transport.RouteHopLimit, FragOff: wire.IPv4DF}}
}

// Addr returns the endpoint's address.
func (r *Raw) Addr() netip.Addr { return r.ep.LocalAddr() }

// Send builds a packet of headers h and payload, as h gives them (the
// BTH's destination QP and P_Key included), and offers it to the fabric.
func (r *Raw) Send(h wire.Headers, payload []byte) {
	r.t.Helper()
	b := make([]byte, link.MaxDatagram)
	n, err := wire.Build(b, &r.Encap, &h, payload)
	if err != nil {
		r.t.Fatalf("build %v: %v", h.BTH.Opcode, err)
	}
	if _, err := r.ep.WriteBatch([]link.Datagram{{Encap: r.Encap, Buf: b[:n]}}); err != nil {
		r.t.Fatal(err)
	}
}

// Receive returns, parsed, the datagrams queued at the endpoint for it
// (the responses a QP sent it), without waiting; one that does not parse
// fails the test. The packets are over Receive's own buffers: valid
// until the next call.
func (r *Raw) Receive() []wire.Packet {
	r.t.Helper()
	if r.rx == nil {
		r.rx = make([]link.Datagram, 64)
		for i := range r.rx {
			r.rx[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
	}
	out := r.pkts[:0]
	for taken := 0; ; {
		msgs := r.rx[taken:]
		if len(msgs) == 0 {
			// Every buffer holds a packet returned: more of them.
			r.rx = append(r.rx, make([]link.Datagram, len(r.rx))...)
			for i := taken; i < len(r.rx); i++ {
				r.rx[i].Buf = make([]byte, 0, link.MaxDatagram)
			}
			msgs = r.rx[taken:]
		}
		n, err := r.ep.TryReadBatch(msgs)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, m := range msgs[:n] {
			var p wire.Packet
			if err := wire.Parse(m.Buf, &p); err != nil {
				r.t.Fatalf("a datagram to the raw endpoint: %v", err)
			}
			out = append(out, p)
		}
		taken += n
		if n < len(msgs) {
			r.pkts = out
			return out
		}
	}
}
