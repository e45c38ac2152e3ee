package cm_test

// The CM and the network's answers: a host without a RoCE NIC refuses the
// REQ (ICMP port unreachable) and Connect ends at once; an address that
// says nothing times out as the kernel's CM does; QP1 recovers from a
// down link; the CQs the CM makes for an ID's QP.

import (
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/wire"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reqCounter counts the REQs the fabric carries to each address.
type reqCounter struct {
	mu sync.Mutex
	n  map[netip.Addr]int
}

func countREQs(f *fabric.Fabric) *reqCounter {
	rc := &reqCounter{n: map[netip.Addr]int{}}
	f.Tap(func(p fabric.Packet) {
		if !p.Parsed || p.Wire.DestQP() != 1 {
			return
		}
		if m := wire.MAD(p.Wire.Payload); len(m) >= wire.MADLen && m.AttrID() == wire.CMAttrREQ {
			rc.mu.Lock()
			rc.n[p.Dst]++
			rc.mu.Unlock()
		}
	})
	return rc
}

func (rc *reqCounter) to(a netip.Addr) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n[a]
}

// connectTo makes an ID on bd.a, resolves it to dst's port, gives it a QP
// and connects it.
func (bd *bed) connectTo(dst netip.Addr) *cm.ID {
	t := bd.t
	t.Helper()
	id, err := bd.a.cm.CreateID(bd.a.ch, dst, cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(dst, port), time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, bd.a.ch, cm.EventAddrResolved)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, bd.a.ch, cm.EventRouteResolved)
	mkQP(t, id)
	if err := id.Connect(nil); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestConnectRefusedByHost: a REQ to a host without a RoCE NIC draws an
// ICMP port unreachable (the fabric's model of one, fabric.AddHost),
// which the device's link reports: Connect ends with UNREACHABLE,
// -ECONNREFUSED, after that one REQ and without the CM's clock moving. A
// REQ to an address that says nothing is sent 16 times, 6144 ms apart,
// and UNREACHABLE -ETIMEDOUT comes 98.3 s after Connect, as the kernel's
// CM gives it for either (it hears no ICMP for rxe's socket). Before
// softnic listened to the link, the host's case took the same 98.3 s.
func TestConnectRefusedByHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		reqs := countREQs(bd.f)
		host, nothing := netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.8")
		bd.f.AddHost(host)

		start := bd.clk.Now()
		id := bd.connectTo(host)
		ev := expect(t, bd.a.ch, cm.EventUnreachable)
		if ev.ID != id || ev.Status != -int(syscall.ECONNREFUSED) {
			t.Errorf("UNREACHABLE for %v, status %d; want %d (-ECONNREFUSED)", ev.ID.Context(), ev.Status, -int(syscall.ECONNREFUSED))
		}
		if d := bd.clk.Now().Sub(start); d != 0 || reqs.to(host) != 1 {
			t.Errorf("refused after %v of the CM's clock and %d REQs; want at once, after 1", d, reqs.to(host))
		}
		quiet(t, bd.a.ch)

		start = bd.clk.Now()
		id2 := bd.connectTo(nothing)
		for range 16 {
			quiet(t, bd.a.ch)
			bd.clk.Advance(6144 * time.Millisecond)
			synctest.Wait()
		}
		ev = expect(t, bd.a.ch, cm.EventUnreachable)
		if ev.ID != id2 || ev.Status != -int(syscall.ETIMEDOUT) {
			t.Errorf("UNREACHABLE for %v, status %d; want -ETIMEDOUT", ev.ID.Context(), ev.Status)
		}
		if d := bd.clk.Now().Sub(start); d != 16*6144*time.Millisecond || reqs.to(nothing) != 16 {
			t.Errorf("timed out after %v and %d REQs; want 1m38.304s and 16", d, reqs.to(nothing))
		}
		for _, x := range []*cm.ID{id, id2} {
			must(t, x.DestroyQP())
			must(t, x.Destroy())
		}
		bd.noIDs()
	})
}

// TestCMRecoversFromDownLink: a REQ sent while the device's link is down
// fails on QP1 (LOC_QP_OP_ERR, the QP to SQE, as rxe fails a MAD with no
// route); the CM takes QP1 back to RTS, as the kernel's MAD layer does,
// and the REQ's retry, once the link is up, connects.
func TestCMRecoversFromDownLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		ep := bd.a.dev.Link().(*fabric.Endpoint)
		ep.SetLinkState(link.LinkState{})
		cli := bd.resolve(false)
		must(t, cli.Connect(nil))
		quiet(t, bd.b.ch)
		ep.SetLinkState(link.LinkState{Up: true, Carrier: true})
		bd.clk.Advance(6144 * time.Millisecond)
		req := expect(t, bd.b.ch, cm.EventConnectRequest)
		mkQP(t, req.ID)
		must(t, req.ID.Accept(nil))
		expect(t, bd.a.ch, cm.EventEstablished)
		expect(t, bd.b.ch, cm.EventEstablished)
		for _, id := range []*cm.ID{cli, req.ID} {
			must(t, id.DestroyQP())
			must(t, id.Destroy())
		}
		l.Destroy()
		bd.noIDs()
	})
}

// TestIDCQs: CreateQP without CQs makes a send CQ and a receive CQ, each
// on a completion channel of its own, as librdmacm's rdma_create_qp does
// (rdma_cm_id's send_cq, recv_cq, send_cq_channel, recv_cq_channel); the
// QP uses them (a SEND's completions arrive on them, the channels get the
// notifications); DestroyQP destroys them. Given CQs, the ID has none of
// its own.
func TestIDCQs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		cli := bd.resolve(true)
		if cli.SendCQ() != nil || cli.RecvCQ() != nil {
			t.Fatal("CQs before CreateQP")
		}
		if _, err := cli.CreateQP(nil, verbs.QPInitAttr{Cap: qpCap}); err != nil {
			t.Fatal(err)
		}
		scq, rcq, sch, rch := cli.SendCQ(), cli.RecvCQ(), cli.SendCQChannel(), cli.RecvCQChannel()
		if scq == nil || rcq == nil || sch == nil || rch == nil || scq == rcq || sch == rch {
			t.Fatalf("send CQ %p, recv CQ %p, channels %p %p: want two CQs on two channels", scq, rcq, sch, rch)
		}
		must(t, cli.Connect(nil))
		req := expect(t, bd.b.ch, cm.EventConnectRequest)
		srvCQ := mkQP(t, req.ID)
		must(t, req.ID.Accept(nil))
		expect(t, bd.a.ch, cm.EventEstablished)
		expect(t, bd.b.ch, cm.EventEstablished)

		buf := newRegion(t, cli.PD(), 64)
		must(t, scq.ReqNotify(false))
		must(t, rcq.ReqNotify(false))
		if _, err := cli.QP().PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{buf.mr.SGE(0, 32)}}); err != nil {
			t.Fatal(err)
		}
		sbuf := newRegion(t, req.ID.PD(), 64)
		if _, err := req.ID.QP().PostRecv(ibv.RecvWR{WRID: 4, SGList: []ibv.SGE{sbuf.mr.SGE(32, 32)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := req.ID.QP().PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{sbuf.mr.SGE(0, 8)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.QP().PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{buf.mr.SGE(32, 8)}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			ch   *verbs.CompChannel
			cq   *verbs.CQ
			wrid uint64
		}{{rch, rcq, 1}, {sch, scq, 3}} {
			got, err := c.ch.GetEventTimeout(t.Context(), 10*time.Second)
			if err != nil || got != c.cq {
				t.Fatalf("channel event %p, %v; want its CQ %p", got, err, c.cq)
			}
			got.AckEvents(1)
			if wc := waitWC(t, c.cq); wc.Status != ibv.WCSuccess || wc.WRID != c.wrid {
				t.Errorf("completion %+v, want WRID %d", wc, c.wrid)
			}
		}
		waitWC(t, srvCQ)
		waitWC(t, srvCQ)
		must(t, cli.Disconnect())
		expect(t, bd.b.ch, cm.EventDisconnected)
		must(t, cli.DestroyQP())
		if cli.SendCQ() != nil || cli.RecvCQ() != nil || cli.SendCQChannel() != nil || cli.RecvCQChannel() != nil {
			t.Error("CQs left after DestroyQP")
		}
		// Given CQs, the ID has none of its own.
		if req.ID.SendCQ() != nil || req.ID.RecvCQ() != nil {
			t.Error("the server ID, given its CQs, has CQs of its own")
		}
		must(t, req.ID.DestroyQP())
		must(t, req.ID.Destroy())
		must(t, cli.Destroy())
		l.Destroy()
		bd.clk.Advance(5 * time.Second)
		bd.noIDs()
	})
}
