package link_test

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/test/netnstest"
	"github.com/softnic/softnic/verbs"
)

// waitMTU waits for the link to report want: the change arrives from the
// kernel's RTM_NEWLINK notification, asynchronously.
func waitMTU(t *testing.T, l *link.UDPLink, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.MTU() != want {
		if time.Now().After(deadline) {
			t.Fatalf("link MTU %d, want %d (no RTM_NEWLINK seen)", l.MTU(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUDPLinkFollowsInterfaceMTU opens UDP links on a veth's IPv4 and
// IPv6 addresses and on loopback in a namespace of its own, checks that
// they report the interfaces' MTUs, and changes the veth's MTU: the links
// and a NIC's active MTU follow (rxe_net.c NETDEV_CHANGEMTU ->
// rxe_set_mtu). Root only.
func TestUDPLinkFollowsInterfaceMTU(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("mtu-%d-la", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("mtu-%d-lb", os.Getpid()))
	netnstest.Veth(t, a, "mtu0", "10.77.0.1/24", b, "mtu1", "10.77.0.2/24", 1500)
	a.AddAddr(t, "mtu0", "fd00:77::1/64")

	var l4, l6, lo *link.UDPLink
	var names [3]string
	var mtus [3]int
	err := a.Do(func() error {
		var err error
		if l4, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("10.77.0.1")}); err != nil {
			return err
		}
		if l6, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("fd00:77::1")}); err != nil {
			return err
		}
		if lo, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.0.0.2")}); err != nil {
			return err
		}
		for i, s := range []string{"10.77.0.1", "fd00:77::1", "127.0.0.5"} {
			if names[i], mtus[i], err = link.InterfaceMTU(netip.MustParseAddr(s)); err != nil {
				return err
			}
		}
		if _, _, err := link.InterfaceMTU(netip.MustParseAddr("10.78.0.1")); err == nil {
			return fmt.Errorf("InterfaceMTU(10.78.0.1) found an interface; none holds it")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*link.UDPLink{l4, l6, lo} {
		defer l.Close()
	}
	if names != [3]string{"mtu0", "mtu0", "lo"} || mtus != [3]int{1500, 1500, 65536} {
		t.Errorf("InterfaceMTU: %v %v, want [mtu0 mtu0 lo] [1500 1500 65536]", names, mtus)
	}
	if l4.MTU() != 1500 || l6.MTU() != 1500 || lo.MTU() != 65536 {
		t.Fatalf("link MTUs %d %d %d, want 1500 1500 65536", l4.MTU(), l6.MTU(), lo.MTU())
	}
	dev, err := verbs.Open(verbs.Config{Link: l4})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	active := func() ibv.MTU {
		pa, err := dev.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		return pa.ActiveMTU
	}
	if m := active(); m != ibv.MTU1024 {
		t.Fatalf("active MTU on a 1500 veth %v, want 1024", m)
	}
	for _, c := range []struct {
		mtu  int
		want ibv.MTU
	}{{9000, ibv.MTU4096}, {4175, ibv.MTU2048}, {1280, ibv.MTU1024}, {1500, ibv.MTU1024}} {
		a.SetMTU(t, "mtu0", c.mtu)
		waitMTU(t, l4, c.mtu)
		waitMTU(t, l6, c.mtu)
		if m := active(); m != c.want {
			t.Errorf("veth MTU %d: active MTU %v, want %v", c.mtu, m, c.want)
		}
	}
	if lo.MTU() != 65536 {
		t.Errorf("the loopback link followed another interface: MTU %d", lo.MTU())
	}
}
