package nic

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// orderLink records the order in which WriteBatch got its datagrams (as
// "OPCODE/QPN/length") and fails the ones described as fail.
type orderLink struct {
	*feedLink
	fail  string
	order []string
}

func (l *orderLink) WriteBatch(msgs []link.Datagram) (int, error) {
	l.order = l.order[:0]
	for i := range msgs {
		b := wire.BTH(msgs[i].Buf)
		d := fmt.Sprintf("%v/%#x/%d", b.Opcode(), b.DestQP(), msgs[i].Len())
		l.order = append(l.order, d)
		if d == l.fail {
			msgs[i].Err = syscall.EMSGSIZE
		}
	}
	return len(msgs), nil
}

// A batch of two datagrams, the shorter first, to one destination and of
// two streams (a response and a request, or two QPs), goes to the link
// longer first, so that the two leave in one GSO send (gsoPair); the
// batch keeps its order otherwise, and each datagram's send error is
// reported in the order the transport queued them.
func TestGSOPair(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.3")
	type dg struct {
		op   wire.Opcode
		qpn  uint32
		size int // payload bytes
		dst  netip.Addr
	}
	ack := dg{wire.RCAck, 0x11, 0, a}
	write := dg{wire.RCWriteOnly, 0x11, 8, a}
	for _, c := range []struct {
		name    string
		dgs     []dg
		swapped bool
	}{
		{"ACK then the answer", []dg{ack, write}, true},
		{"two QPs' requests", []dg{{wire.RCSendOnly, 0x12, 8, a}, {wire.RCSendOnly, 0x11, 64, a}}, true},
		{"one QP's requests", []dg{{wire.RCSendOnly, 0x11, 8, a}, {wire.RCSendOnly, 0x11, 64, a}}, false},
		{"one QP's responses", []dg{ack, {wire.RCReadResponseOnly, 0x11, 64, a}}, false},
		{"longer first already", []dg{write, ack}, false},
		{"two destinations", []dg{ack, {wire.RCWriteOnly, 0x11, 8, b}}, false},
		{"three datagrams", []dg{ack, write, write}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &orderLink{feedLink: newFeedLink()}
			var ctr transport.Counters
			var tx txBatch
			tx.init(l, &ctr, false)
			tx.begin()
			var queued []string
			for _, d := range c.dgs {
				e := wire.Encap{Src: l.addr, Dst: d.dst, DstPort: wire.UDPPort, HopLimit: 64}
				h := wire.Headers{BTH: wire.BTHFields{Opcode: d.op, PKey: wire.DefaultPKey, DestQP: d.qpn}}
				n, err := wire.Build(tx.Buf(), &e, &h, make([]byte, d.size))
				if err != nil {
					t.Fatal(err)
				}
				tx.Send(n, &e)
				queued = append(queued, fmt.Sprintf("%v/%#x/%d", d.op, d.qpn, n))
			}
			l.fail = queued[0]
			errs := tx.Flush()
			want := slices.Clone(queued)
			if c.swapped {
				want[0], want[1] = want[1], want[0]
			}
			if !slices.Equal(l.order, want) {
				t.Errorf("the link got %v, want %v", l.order, want)
			}
			// The first queued datagram failed, wherever it went.
			if len(errs) != len(c.dgs) || errs[0] != syscall.EMSGSIZE || slices.ContainsFunc(errs[1:], func(e syscall.Errno) bool { return e != 0 }) {
				t.Errorf("errors %v, want EMSGSIZE for the first queued and none after", errs)
			}
		})
	}
}
