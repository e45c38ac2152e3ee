package link_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/test/netnstest"
)

// TestUDPLinkResolveRoute resolves routes and neighbours from UDP links on
// a veth in a namespace of their own, as rdma_resolve_addr does, against
// what the kernel says: the peer (10.94.0.2, fd94::2) through the veth,
// its link-layer address resolved (ARP, neighbour discovery) though the
// table had no entry; the link's own address, local, no neighbour; a
// destination with no route, ENETUNREACH; behind an unreachable route,
// EHOSTUNREACH; a prohibit route, EACCES; one on the veth's subnet that
// nobody answers for, ETIMEDOUT when the context ends (after it, not
// before); through a gateway, the gateway's address resolved; and with
// the veth set down, no route. Root only.
func TestUDPLinkResolveRoute(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("p30b-%d-ra", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("p30b-%d-rb", os.Getpid()))
	netnstest.Veth(t, a, "p30br0", "10.94.0.1/24", b, "p30br1", "10.94.0.2/24", 1500)
	a.AddAddr(t, "p30br0", "fd94::1/64")
	b.AddAddr(t, "p30br1", "fd94::2/64")
	b.IP(t, "link", "set", "p30br1", "address", "02:94:00:00:00:02")
	a.IP(t, "route", "add", "unreachable", "10.95.0.0/16")
	a.IP(t, "route", "add", "prohibit", "10.96.0.0/16")
	a.IP(t, "route", "add", "10.97.0.0/16", "via", "10.94.0.2")
	peerMAC := net.HardwareAddr{0x02, 0x94, 0, 0, 0, 2}

	var l4, l6 *link.UDPLink
	err := a.Do(func() error {
		var err error
		if l4, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("10.94.0.1")}); err != nil {
			return err
		}
		l6, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("fd94::1")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l4.Close()
	defer l6.Close()
	ifindex := 0
	a.Do(func() error {
		ifi, err := net.InterfaceByName("p30br0")
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	})

	resolve := func(l link.Link, dst string, d time.Duration) (link.Route, time.Duration, error) {
		// The clock starts before the deadline is set: a resolve that
		// ends at the deadline then measures at least d.
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		// Through the pcap recorder: a wrapper forwards the question.
		rt, err := link.ResolveRoute(ctx, link.NewPcapLink(l, nil), netip.MustParseAddr(dst))
		return rt, time.Since(start), err
	}
	for _, c := range []struct {
		l    link.Link
		dst  string
		want link.Route
	}{
		{l4, "10.94.0.2", link.Route{Src: netip.MustParseAddr("10.94.0.1"), Iface: ifindex, HWAddr: peerMAC}},
		{l6, "fd94::2", link.Route{Src: netip.MustParseAddr("fd94::1"), Iface: ifindex, HWAddr: peerMAC}},
		{l4, "10.97.1.1", link.Route{Src: netip.MustParseAddr("10.94.0.1"), Gateway: netip.MustParseAddr("10.94.0.2"),
			Iface: ifindex, HWAddr: peerMAC}},
	} {
		rt, _, err := resolve(c.l, c.dst, 5*time.Second)
		if err != nil || rt.Src != c.want.Src || rt.Gateway != c.want.Gateway || rt.Iface != c.want.Iface ||
			rt.Local || rt.HWAddr.String() != c.want.HWAddr.String() {
			t.Errorf("route to %s: %+v, %v; want %+v", c.dst, rt, err, c.want)
		}
	}
	if rt, _, err := resolve(l4, "10.94.0.1", time.Second); err != nil || !rt.Local || rt.HWAddr != nil {
		t.Errorf("route to the link's own address: %+v, %v; want local, no neighbour", rt, err)
	}
	for _, c := range []struct {
		dst  string
		want syscall.Errno
	}{{"10.98.0.1", syscall.ENETUNREACH}, {"10.95.0.1", syscall.EHOSTUNREACH}, {"10.96.0.1", syscall.EACCES}} {
		if _, _, err := resolve(l4, c.dst, time.Second); !errors.Is(err, c.want) {
			t.Errorf("route to %s: %v, want %v", c.dst, err, c.want)
		}
	}
	for _, c := range []struct {
		l   link.Link
		dst string
	}{{l4, "10.94.0.99"}, {l6, "fd94::99"}} {
		_, took, err := resolve(c.l, c.dst, 300*time.Millisecond)
		// Not before the context's end; the upper bound only catches a
		// resolve that ignores the context (a loaded machine may take
		// seconds to run the goroutine again).
		if !errors.Is(err, syscall.ETIMEDOUT) || took < 300*time.Millisecond || took > 30*time.Second {
			t.Errorf("route to %s, nobody there: %v after %v; want ETIMEDOUT at the context's end (300 ms)", c.dst, err, took)
		}
	}
	a.IP(t, "link", "set", "p30br0", "down")
	if _, _, err := resolve(l4, "10.94.0.2", time.Second); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("route to the peer with the veth down: %v, want ENETUNREACH", err)
	}
}

// Route questions from several goroutines at once (rdma_resolve_addr on
// two IDs, as ucmatose -c 2 and udaddy -c 2 ask) each get their own
// answer: the answers once shared the link's receive buffer, which the
// next question (a route's, a neighbour's) overwrote while the last answer
// was still being read: ADDR_ERROR -EINVAL in about one lookup of 400 to
// a neighbour, or a wrong answer. Half the goroutines ask for the peer
// on a veth (route and neighbour), half for the link's own address
// (route only). Root only.
func TestUDPLinkResolveRouteConcurrent(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("p41-%d-ra", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("p41-%d-rb", os.Getpid()))
	netnstest.Veth(t, a, "p41r0", "10.93.0.1/24", b, "p41r1", "10.93.0.2/24", 1500)
	b.IP(t, "link", "set", "p41r1", "address", "02:93:00:00:00:02")
	peerMAC := net.HardwareAddr{0x02, 0x93, 0, 0, 0, 2}
	self, peer := netip.MustParseAddr("10.93.0.1"), netip.MustParseAddr("10.93.0.2")
	var l *link.UDPLink
	if err := a.Do(func() error {
		var err error
		l, err = link.ListenUDP(link.UDPConfig{Addr: self})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const goroutines, each = 4, 1500
	errs := make(chan error, goroutines*each)
	var wg sync.WaitGroup
	for g := range goroutines {
		dst := []netip.Addr{peer, self}[g%2]
		wg.Go(func() {
			for range each {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				rt, err := link.ResolveRoute(ctx, l, dst)
				cancel()
				switch {
				case err != nil:
					errs <- err
				case dst == self && !rt.Local:
					errs <- fmt.Errorf("route to %v: %+v, want local", dst, rt)
				case dst == peer && (rt.Local || rt.Src != self || rt.HWAddr.String() != peerMAC.String()):
					errs <- fmt.Errorf("route to %v: %+v, want from %v to %v", dst, rt, self, peerMAC)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 3 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d lookups failed", n, goroutines*each)
	}
}
