package cm_test

import (
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// TestOptions: rdma_set_option's effects. TOS is the route's traffic
// class, ACK_TIMEOUT the RTS attributes' timeout, REUSEADDR lets two IDs
// that both ask bind one port until one listens, and each refuses the
// states the kernel refuses.
func TestOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		id, err := bd.a.cm.CreateID(bd.a.ch, nil, cm.PSTCP, ibv.QPTypeRC)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.SetTOS(0x28); err != nil {
			t.Fatal(err)
		}
		if err := id.SetAckTimeout(21); err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(addrB, port), time.Second); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventAddrResolved)
		if err := id.SetReuseAddr(true); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("REUSEADDR once bound: %v", err)
		}
		if err := id.ResolveRoute(time.Second); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventRouteResolved)
		if r := id.Route(); r.TrafficClass != 0x28 {
			t.Errorf("route traffic class %#x", r.TrafficClass)
		}
		if err := id.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		req := expect(t, bd.b.ch, cm.EventConnectRequest)
		if r := req.ID.Route(); r.TrafficClass != 0x28 {
			t.Errorf("the request's path traffic class %#x", r.TrafficClass)
		}
		if err := req.ID.Accept(&cm.ConnParam{QPNum: 99, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventConnectResponse)
		a, m, err := id.InitQPAttr(ibv.QPStateRTS)
		if err != nil || m&ibv.QPAttrTimeout == 0 || a.Timeout != 21 {
			t.Errorf("RTS attributes timeout %d (mask %#x): %v", a.Timeout, m, err)
		}
		ud, err := bd.a.cm.CreateID(bd.a.ch, nil, cm.PSUDP, ibv.QPTypeUD)
		if err != nil {
			t.Fatal(err)
		}
		if err := ud.SetAckTimeout(14); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("ACK_TIMEOUT on a UD ID: %v", err)
		}
		// REUSEADDR: two IDs that ask share the port; a third does not.
		var r [3]*cm.ID
		for i := range r {
			if r[i], err = bd.b.cm.CreateID(bd.b.ch, nil, cm.PSTCP, ibv.QPTypeRC); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				if err := r[i].SetReuseAddr(true); err != nil {
					t.Fatal(err)
				}
			}
		}
		at := netip.AddrPortFrom(addrB, port+1)
		if err := r[0].BindAddr(at); err != nil {
			t.Fatal(err)
		}
		if err := r[1].BindAddr(at); err != nil {
			t.Errorf("second REUSEADDR bind: %v", err)
		}
		if err := r[2].BindAddr(at); !errors.Is(err, cm.EADDRINUSE) {
			t.Errorf("a bind without REUSEADDR: %v", err)
		}
		if err := r[0].Listen(1); err != nil {
			t.Fatal(err)
		}
		if err := r[0].SetReuseAddr(false); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("REUSEADDR off while listening: %v", err)
		}
		for _, x := range append(r[:], ud, req.ID, id, l) {
			x.Destroy()
		}
		bd.noIDs()
	})
}
