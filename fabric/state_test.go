package fabric

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// TestEndpointLinkState: an endpoint administratively down refuses every
// send (ENETDOWN, DropLinkDown) and receives nothing; one up without a
// carrier takes its sends and loses them, and receives nothing; the
// watchers are called for changes of Up or Carrier only, and at Close,
// after which every datagram is marked EBADF and the state is down.
func TestEndpointLinkState(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	if s, ok := a.LinkState(); !ok || s != (link.LinkState{Up: true, Carrier: true}) {
		t.Fatalf("new endpoint's state %+v (%v), want up with a carrier", s, ok)
	}
	calls := 0
	stop, ok := a.WatchLinkState(func() { calls++ })
	if !ok {
		t.Fatal("WatchLinkState refused")
	}
	defer stop()
	send := func(from *Endpoint, to netip.Addr) *link.Datagram {
		t.Helper()
		e := newEncap(from.LocalAddr(), to)
		d := []link.Datagram{{Encap: e, Buf: build(t, &e, wire.RCSendOnly, 0, payload(0, 64))}}
		if _, err := from.WriteBatch(d); err != nil && err != link.ErrLinkClosed {
			t.Fatal(err)
		}
		return &d[0]
	}

	a.SetLinkState(link.LinkState{})
	if d := send(a, addrB); d.Err != syscall.ENETDOWN {
		t.Errorf("send from a down endpoint: Err %v, want ENETDOWN", d.Err)
	}
	send(b, addrA)
	if queued(a) != 0 || queued(b) != 0 {
		t.Errorf("queued %d at the down endpoint, %d at its peer; want none", queued(a), queued(b))
	}
	a.SetLinkState(link.LinkState{Up: true})
	if d := send(a, addrB); d.Err != 0 {
		t.Errorf("send without a carrier: Err %v, want none (the queue loses it)", d.Err)
	}
	send(b, addrA)
	if queued(a) != 0 || queued(b) != 0 {
		t.Errorf("queued %d at the endpoint without a carrier, %d at its peer; want none", queued(a), queued(b))
	}
	a.SetLinkState(link.LinkState{Up: true, Carrier: true, Speed: 1000})
	a.SetLinkState(link.LinkState{Up: true, Carrier: true, Speed: 10000}) // speed only: no call
	send(b, addrA)
	if queued(a) != 1 {
		t.Errorf("queued %d once up again, want 1", queued(a))
	}
	if calls != 3 {
		t.Errorf("watcher called %d times, want 3 (down, up, carrier)", calls)
	}
	if st := f.Stats(); st.DropLinkDown.Packets != 4 || st.Sent.Packets != st.Delivered.Packets+st.Dropped().Packets {
		t.Errorf("fabric stats %+v: want 4 DropLinkDown and every datagram accounted for", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Errorf("watcher called %d times after Close, want 4", calls)
	}
	if s, _ := a.LinkState(); s.Up || s.Carrier {
		t.Errorf("closed endpoint's state %+v, want down", s)
	}
	if d := send(a, addrB); d.Err != syscall.EBADF {
		t.Errorf("send after Close: Err %v, want EBADF", d.Err)
	}
}

// TestAddHost: a datagram to a host without a RoCE NIC (AddHost) draws a
// port unreachable, which the sender's watchers hear from its next read,
// not from the WriteBatch; one to an address that is nothing draws
// nothing; an endpoint attached at a host's address receives as any.
func TestAddHost(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	host := netip.MustParseAddr("10.0.0.9")
	f.AddHost(host)
	var heard []link.SendError
	stop, _ := a.WatchSendErrors(func(se link.SendError) { heard = append(heard, se) })
	defer stop()
	e := newEncap(a.LocalAddr(), host)
	d := []link.Datagram{{Encap: e, Buf: build(t, &e, wire.UDSendOnly, 0, payload(0, 64))}}
	if n, err := a.WriteBatch(d); n != 1 || err != nil || d[0].Err != 0 {
		t.Fatalf("WriteBatch to a host = %d, %v, Err %v; want it taken", n, err, d[0].Err)
	}
	if len(heard) != 0 {
		t.Fatalf("heard %v from WriteBatch itself", heard)
	}
	sendSeq(t, b, addrA, 1)
	msgs := make([]link.Datagram, 4)
	for i := range msgs {
		msgs[i].Buf = make([]byte, link.MaxDatagram)
	}
	if n, err := a.ReadBatch(msgs); n != 1 || err != nil {
		t.Fatalf("ReadBatch = %d, %v; want b's datagram", n, err)
	}
	want := link.SendError{Dst: netip.AddrPortFrom(host, wire.UDPPort), From: host, Errno: syscall.ECONNREFUSED}
	if len(heard) != 1 || heard[0] != want {
		t.Fatalf("heard %+v, want %+v", heard, want)
	}
	e = newEncap(a.LocalAddr(), netip.MustParseAddr("10.0.0.10"))
	a.WriteBatch([]link.Datagram{{Encap: e, Buf: build(t, &e, wire.UDSendOnly, 0, payload(0, 64))}})
	if n, _ := a.TryReadBatch(msgs); n != 0 || len(heard) != 1 {
		t.Fatalf("after a datagram to nothing: read %d, heard %v; want nothing", n, heard)
	}
	c, err := f.Attach(host)
	if err != nil {
		t.Fatal(err)
	}
	sendSeq(t, a, host, 1)
	if queued(c) != 1 || len(heard) != 1 {
		t.Fatalf("endpoint at a host's address: %d queued, heard %v", queued(c), heard)
	}
}
