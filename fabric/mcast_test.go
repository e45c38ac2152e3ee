package fabric

import (
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

var group = netip.MustParseAddr("239.1.2.3")

// TestGroupDelivery: a datagram to a multicast group reaches every member,
// the sender too when it joined, each copy with the Encap as sent; taps
// see it once; a non-member gets nothing; a group without members drops
// it as no route; leaving and closing end membership.
func TestGroupDelivery(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	c, err := f.Attach(addrC)
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Attach(netip.MustParseAddr("10.0.0.4"))
	if err != nil {
		t.Fatal(err)
	}
	var taps int
	f.Tap(func(Packet) { taps++ })
	for _, e := range []*Endpoint{a, b, c} {
		if err := e.JoinGroup(group); err != nil {
			t.Fatal(err)
		}
	}
	sendSeq(t, a, netip.AddrFrom16(group.As16()), 2) // the mapped form routes the same
	for _, e := range []*Endpoint{a, b, c} {
		got := drain(t, e)
		if !slices.Equal(psns(t, got), []wire.PSN{0, 1}) {
			t.Fatalf("%v: PSNs %v", e.LocalAddr(), psns(t, got))
		}
		if got[0].Encap.Src != addrA || got[0].Encap.Dst.Unmap() != group {
			t.Fatalf("%v: Encap %v -> %v", e.LocalAddr(), got[0].Encap.Src, got[0].Encap.Dst)
		}
	}
	if queued(d) != 0 || taps != 2 {
		t.Fatalf("non-member got %d, taps %d (want 0, 2)", queued(d), taps)
	}
	if st := f.Stats(); st.Sent.Packets != 2 || st.Replicated.Packets != 4 || st.Delivered.Packets != 6 {
		t.Fatalf("Sent %d Replicated %d Delivered %d, want 2, 4 and 6", st.Sent.Packets, st.Replicated.Packets, st.Delivered.Packets)
	}
	if err := b.LeaveGroup(group); err != nil {
		t.Fatal(err)
	}
	c.Close()
	sendSeq(t, d, group, 1)
	if queued(a) != 1 || queued(b) != 0 {
		t.Fatalf("after leave and close: a %d b %d queued, want 1 and 0", queued(a), queued(b))
	}
	if err := a.LeaveGroup(group); err != nil {
		t.Fatal(err)
	}
	sendSeq(t, d, group, 1)
	if got := d.Stats().DropNoRoute.Packets; got != 1 {
		t.Fatalf("DropNoRoute %d, want 1", got)
	}
}

// TestGroupImpairmentsPerPath: each member's copy goes through the path
// from the sender to that member: loss on one path drops only its copies,
// and a delay holds them until the clock reaches it.
func TestGroupImpairmentsPerPath(t *testing.T) {
	f, mc, a, b := pair(t, Config{Seed: 3})
	c, err := f.Attach(addrC)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Endpoint{b, c} {
		if err := e.JoinGroup(group); err != nil {
			t.Fatal(err)
		}
	}
	f.SetPathImpairment(addrA, addrB, Impairment{Loss: 1})
	f.SetPathImpairment(addrA, addrC, Impairment{Delay: time.Millisecond})
	sendSeq(t, a, group, 5)
	if queued(b) != 0 || queued(c) != 0 {
		t.Fatalf("queued b %d c %d before the delay", queued(b), queued(c))
	}
	mc.Advance(time.Millisecond)
	if got := psns(t, drain(t, c)); !slices.Equal(got, []wire.PSN{0, 1, 2, 3, 4}) {
		t.Fatalf("c: %v", got)
	}
	if queued(b) != 0 || a.Stats().DropImpairment.Packets != 5 {
		t.Fatalf("b queued %d, impairment drops %d; want 0 and 5", queued(b), a.Stats().DropImpairment.Packets)
	}
}

// TestGroupJoinErrors: only multicast addresses are joined, twice is
// EADDRINUSE, leaving a group not joined EADDRNOTAVAIL, a closed
// endpoint joins nothing.
func TestGroupJoinErrors(t *testing.T) {
	_, _, a, b := pair(t, Config{})
	if err := a.JoinGroup(addrB); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("join unicast: %v", err)
	}
	if err := a.JoinGroup(group); err != nil {
		t.Fatal(err)
	}
	if err := a.JoinGroup(group); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("join twice: %v", err)
	}
	if err := a.LeaveGroup(netip.MustParseAddr("ff02::1")); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("leave not joined: %v", err)
	}
	b.Close()
	if err := b.JoinGroup(group); !errors.Is(err, link.ErrLinkClosed) {
		t.Fatalf("join after close: %v", err)
	}
	var _ link.Multicaster = a
	if !link.CanMulticast(a) {
		t.Fatal("CanMulticast(endpoint) = false")
	}
}
