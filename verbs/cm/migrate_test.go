package cm_test

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/wire"
)

// TestSetNotify: a channel's function hears when an event comes to wait
// and when none is left, as a librdmacm channel's fd turns readable and
// back: through GetEvent, and when Destroy drops an ID's events.
func TestSetNotify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		var heard []bool
		bd.a.ch.SetNotify(func(ready bool) { heard = append(heard, ready) })
		id, err := bd.a.cm.CreateID(bd.a.ch, nil, cm.PSTCP, ibv.QPTypeRC)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(addrB, port), time.Second); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventAddrResolved)
		if err := id.ResolveRoute(time.Second); err != nil {
			t.Fatal(err)
		}
		// The event is dropped with its ID, unread.
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
		want := []bool{false, true, false, true, false}
		if len(heard) != len(want) {
			t.Fatalf("heard %v, want %v", heard, want)
		}
		for i := range want {
			if heard[i] != want[i] {
				t.Fatalf("heard %v, want %v", heard, want)
			}
		}
		bd.a.ch.SetNotify(nil)
	})
}

// TestMigrate: rdma_migrate_id moves an ID and its waiting events to
// another channel, and what comes after goes there; a listener's
// connection requests move with it.
func TestMigrate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		cli := bd.resolve(false)
		if err := cli.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// The request waits on b's channel; the listener moves.
		ch2 := bd.b.cm.CreateEventChannel()
		if err := l.Migrate(ch2); err != nil {
			t.Fatal(err)
		}
		quiet(t, bd.b.ch)
		req := expect(t, ch2, cm.EventConnectRequest)
		srv := req.ID
		if req.ListenID != l {
			t.Fatalf("request for %v", req.ListenID)
		}
		mkQP(t, srv)
		if err := srv.Accept(&cm.ConnParam{RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		// The new ID is on the channel the listener had when the
		// request came: it did not move.
		expect(t, bd.b.ch, cm.EventEstablished)
		expect(t, bd.a.ch, cm.EventEstablished)
		// The client moves before its DISCONNECTED comes.
		ch3 := bd.a.cm.CreateEventChannel()
		if err := cli.Migrate(ch3); err != nil {
			t.Fatal(err)
		}
		if err := bd.a.ch.Close(); err != nil {
			t.Errorf("the old channel keeps an ID: %v", err)
		}
		if err := srv.Disconnect(); err != nil {
			t.Fatal(err)
		}
		expect(t, ch3, cm.EventDisconnected)
		if err := cli.Migrate(nil); err == nil {
			t.Error("Migrate(nil) succeeded")
		}
		if err := cli.Migrate(bd.b.ch); err == nil {
			t.Error("Migrate to another CM's channel succeeded")
		}
		for _, id := range []*cm.ID{cli, srv} {
			id.DestroyQP()
			id.Destroy()
		}
		l.Destroy()
		bd.noIDs()
	})
}

// TestRoute: an ID's route is its path once resolved, and the request's
// path seen from the passive side.
func TestRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		if r := l.Route(); r.Resolved {
			t.Errorf("listener route %+v", r)
		}
		cli := bd.resolve(false)
		r := cli.Route()
		if !r.Resolved || r.SGID != addrA || r.DGID != addrB || r.HopLimit != 64 || r.PKey != 0xffff ||
			r.MTU == 0 || r.PacketLifeTime != 18 {
			t.Errorf("client route %+v", r)
		}
		if err := cli.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		req := expect(t, bd.b.ch, cm.EventConnectRequest)
		s := req.ID.Route()
		if !s.Resolved || s.SGID != addrB || s.DGID != addrA || s.FlowLabel != r.FlowLabel || s.MTU != r.MTU {
			t.Errorf("server route %+v, client's %+v", s, r)
		}
		req.ID.Reject(nil)
		expect(t, bd.a.ch, cm.EventRejected)
		req.ID.Destroy()
		cli.DestroyQP()
		cli.Destroy()
		l.Destroy()
		bd.noIDs()
	})
}

// TestOrphanDREQ: an established ID's orphan DREQ names both comm IDs
// and the peer's QP, as the DREQ Disconnect sends, without sending it or
// leaving the established state; an ID that is not connected has none.
func TestOrphanDREQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		cli := bd.resolve(false)
		if _, _, _, ok := cli.OrphanDREQ(); ok {
			t.Error("an orphan DREQ before the connection")
		}
		if err := cli.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		srv := expect(t, bd.b.ch, cm.EventConnectRequest).ID
		mkQP(t, srv)
		if err := srv.Accept(&cm.ConnParam{RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventEstablished)
		expect(t, bd.b.ch, cm.EventEstablished)
		from, to, mad, ok := cli.OrphanDREQ()
		if !ok || from != addrA || to != addrB {
			t.Fatalf("orphan DREQ %v from %v to %v", ok, from, to)
		}
		m := wire.CMDreq(mad)
		if wire.MAD(mad).AttrID() != wire.CMAttrDREQ || wire.MAD(mad).MgmtClass() != wire.MgmtClassCM ||
			m.RemoteQPN() != srv.QP().QPN() || m.LocalCommID() == 0 || m.RemoteCommID() == 0 {
			t.Errorf("orphan DREQ attr %#x QPN %d comm IDs %#x %#x", wire.MAD(mad).AttrID(), m.RemoteQPN(),
				m.LocalCommID(), m.RemoteCommID())
		}
		quiet(t, bd.b.ch)
		if err := cli.Disconnect(); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.b.ch, cm.EventDisconnected)
		if _, _, _, ok := cli.OrphanDREQ(); ok {
			t.Error("an orphan DREQ after the disconnect")
		}
		for _, id := range []*cm.ID{cli, srv} {
			id.DestroyQP()
			id.Destroy()
		}
		l.Destroy()
	})
}
