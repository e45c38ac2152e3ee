package link_test

import (
	"context"
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

// nextEvent waits up to 10 s for dev's next asynchronous event (the
// kernel's RTM_NEWLINK arrives asynchronously) and acknowledges it.
func nextEvent(t *testing.T, dev *verbs.Device) ibv.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := dev.GetAsyncEvent(ctx)
	if err != nil {
		t.Fatalf("no asynchronous event: %v", err)
	}
	if err := dev.AckAsyncEvent(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// noEvent checks that dev raises no event within 200 ms.
func noEvent(t *testing.T, dev *verbs.Device, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if ev, err := dev.GetAsyncEvent(ctx); err == nil {
		t.Errorf("%s: event %v, want none", what, ev)
		dev.AckAsyncEvent(ev)
	}
}

// portIs checks QueryPort's state, physical state, speed and width.
func portIs(t *testing.T, what string, dev *verbs.Device, state verbs.PortState, phys, speed, width uint8) {
	t.Helper()
	p, err := dev.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if verbs.PortState(p.State) != state || p.PhysState != phys || p.ActiveSpeed != speed || p.ActiveWidth != width {
		t.Errorf("%s: port %v phys %d speed %d width %d, want %v phys %d speed %d width %d", what,
			verbs.PortState(p.State), p.PhysState, p.ActiveSpeed, p.ActiveWidth, state, phys, speed, width)
	}
}

// TestUDPLinkFollowsInterfaceState opens UDP links on a veth and on
// loopback in a namespace of its own and a device on each, and takes the
// veth down and up as an operator would (ip link set): the link's state
// (IFF_UP, IFF_LOWER_UP) follows the kernel's RTM_NEWLINK, and the port
// with it as rxe's follows its netdev (rxe_notify: NETDEV_DOWN,
// NETDEV_CHANGE, NETDEV_UP): PORT_ERR, DOWN and Disabled when the veth is
// set down, and a UD SEND then fails with LOC_QP_OP_ERR without a packet
// counted sent; up while its peer is down, no carrier: still DOWN, but
// Polling, and no event; the peer up, PORT_ACTIVE. The speed is the
// veth's ethtool speed, 10 Gb/s, which the kernel's ib_get_eth_speed
// maps to 1X FDR10, and loopback's, unknown, 1X SDR. Closing the link
// under the device takes the port down for good. Root only.
func TestUDPLinkFollowsInterfaceState(t *testing.T) {
	netnstest.Require(t)
	a := netnstest.New(t, fmt.Sprintf("p30b-%d-sa", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("p30b-%d-sb", os.Getpid()))
	netnstest.Veth(t, a, "p30bs0", "10.93.0.1/24", b, "p30bs1", "10.93.0.2/24", 1500)

	var l4, lo *link.UDPLink
	err := a.Do(func() error {
		var err error
		if l4, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("10.93.0.1")}); err != nil {
			return err
		}
		lo, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.0.0.9")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	if s, ok := l4.LinkState(); !ok || s != (link.LinkState{Up: true, Carrier: true, Speed: 10000}) {
		t.Errorf("veth link state %+v (%v), want up, carrier, 10000 Mb/s", s, ok)
	}
	if s, ok := lo.LinkState(); !ok || s != (link.LinkState{Up: true, Carrier: true}) {
		t.Errorf("loopback link state %+v (%v), want up, carrier, unknown speed", s, ok)
	}
	dev, err := verbs.Open(verbs.Config{Link: l4})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	devLo, err := verbs.Open(verbs.Config{Link: lo, Name: "softnic1"})
	if err != nil {
		t.Fatal(err)
	}
	defer devLo.Close()
	if ev := nextEvent(t, dev); ev.Type != ibv.EventPortActive {
		t.Fatalf("first event %v, want PORT_ACTIVE", ev)
	}
	portIs(t, "veth up", dev, verbs.PortActive, 5, 8, 1)
	portIs(t, "loopback", devLo, verbs.PortActive, 5, 1, 1)

	// A UD QP to send through the veth.
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := dev.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	mr, err := pd.RegMR(buf, ibv.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		a    ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: 1}, ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort | ibv.QPAttrQKey},
		{ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState},
		{ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState | ibv.QPAttrSQPSN},
	} {
		if err := qp.Modify(&m.a, m.mask); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr("10.93.0.2"), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}

	a.IP(t, "link", "set", "p30bs0", "down")
	if ev := nextEvent(t, dev); ev.Type != ibv.EventPortErr {
		t.Fatalf("event after ip link set down: %v, want PORT_ERR", ev)
	}
	portIs(t, "veth down", dev, verbs.PortDown, 3, 8, 1)
	if n := dev.Counters().LinkDowned; n != 1 {
		t.Errorf("link_downed %d, want 1", n)
	}
	sent := dev.Counters().SentPkts
	if _, err := qp.PostSend(ibv.SendWR{WRID: 7, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{mr.SGE(0, 100)}, AH: ah, RemoteQPN: 0x11, RemoteQKey: 1}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]ibv.WorkCompletion, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n, err := cq.Wait(ctx, wcs)
	cancel()
	if err != nil || n != 1 || wcs[0].Status != ibv.WCLocQPOpErr {
		t.Errorf("UD SEND on the down veth: %d completions %+v (%v), want LOC_QP_OP_ERR", n, wcs[:n], err)
	}
	if got := dev.Counters().SentPkts; got != sent {
		t.Errorf("sent_pkts %d -> %d across a SEND the down interface refused", sent, got)
	}
	if st := l4.Stats(); st.TxPackets != 0 || st.TxErrors == 0 {
		t.Errorf("link stats: %d sent, %d errors; want none sent and the refusal counted", st.TxPackets, st.TxErrors)
	}

	b.IP(t, "link", "set", "p30bs1", "down")
	a.IP(t, "link", "set", "p30bs0", "up")
	noEvent(t, dev, "up without a carrier")
	portIs(t, "veth up, peer down", dev, verbs.PortDown, 2, 8, 1)
	b.IP(t, "link", "set", "p30bs1", "up")
	if ev := nextEvent(t, dev); ev.Type != ibv.EventPortActive {
		t.Fatalf("event once the peer is up: %v, want PORT_ACTIVE", ev)
	}
	portIs(t, "veth up again", dev, verbs.PortActive, 5, 8, 1)

	if err := l4.Close(); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, dev); ev.Type != ibv.EventPortErr {
		t.Fatalf("event after the link closed: %v, want PORT_ERR", ev)
	}
	portIs(t, "link closed", dev, verbs.PortDown, 3, 1, 1)
	if n := dev.Counters().LinkDowned; n != 2 {
		t.Errorf("link_downed %d, want 2", n)
	}
}
