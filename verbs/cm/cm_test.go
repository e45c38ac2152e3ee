package cm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/wire"
)

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
)

const port = 7174

// host is one process: a device on the fabric and its CM.
type host struct {
	dev *verbs.Device
	cm  *cm.CM
	ch  *cm.EventChannel
}

type bed struct {
	t    *testing.T
	f    *fabric.Fabric
	clk  *clock.Manual
	a, b *host
}

// newBed opens two hosts on a fabric, the CMs on a manual clock. It runs
// inside a synctest bubble: closing everything at the end leaves no
// goroutine, or the bubble fails the test.
func newBed(t *testing.T) *bed {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 3})
	clk := clock.NewManual(time.Unix(1e6, 0))
	bd := &bed{t: t, f: f, clk: clk}
	mk := func(a netip.Addr) *host {
		ep, err := f.Attach(a)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := verbs.Open(verbs.Config{Link: ep})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return &host{dev: dev, cm: c, ch: c.CreateEventChannel()}
	}
	bd.a, bd.b = mk(addrA), mk(addrB)
	t.Cleanup(func() {
		for _, h := range []*host{bd.a, bd.b} {
			if err := h.cm.Close(); err != nil {
				t.Errorf("CM Close: %v", err)
			}
			h.dev.Close()
		}
		f.Close()
	})
	return bd
}

// next returns the channel's next event, failing after a (bubble) minute.
func next(t *testing.T, ch *cm.EventChannel) *cm.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev, err := ch.GetEvent(ctx)
	if err != nil {
		t.Fatalf("GetEvent: %v", err)
	}
	return ev
}

// expect takes the next event, checks its type and acks it.
func expect(t *testing.T, ch *cm.EventChannel, want cm.EventType) *cm.Event {
	t.Helper()
	ev := next(t, ch)
	if ev.Type != want {
		t.Fatalf("event %v (status %d), want %v", ev.Type, ev.Status, want)
	}
	if err := ev.Ack(); err != nil {
		t.Fatal(err)
	}
	return ev
}

// quiet checks that no event is pending on ch.
func quiet(t *testing.T, ch *cm.EventChannel) {
	t.Helper()
	synctest.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ev, err := ch.GetEvent(ctx); err == nil {
		t.Fatalf("unexpected event %v (status %d)", ev.Type, ev.Status)
	}
}

var qpCap = ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}

// listen makes b listen on port.
func (bd *bed) listen() *cm.ID {
	bd.t.Helper()
	l, err := bd.b.cm.CreateID(bd.b.ch, "listener", cm.PSTCP, ibv.QPTypeRC)
	if err != nil {
		bd.t.Fatal(err)
	}
	if err := l.BindAddr(netip.AddrPortFrom(addrB, port)); err != nil {
		bd.t.Fatal(err)
	}
	if err := l.Listen(4); err != nil {
		bd.t.Fatal(err)
	}
	return l
}

// resolve makes an ID on a resolved to b's port, with a QP unless noQP.
func (bd *bed) resolve(noQP bool) *cm.ID {
	bd.t.Helper()
	t := bd.t
	id, err := bd.a.cm.CreateID(bd.a.ch, "client", cm.PSTCP, ibv.QPTypeRC)
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
	expect(t, bd.a.ch, cm.EventRouteResolved)
	if !noQP {
		mkQP(t, id)
	}
	return id
}

// cqs remembers the CQ mkQP made for each ID.
var cqs = map[*cm.ID]*verbs.CQ{}

// mkQP gives id an RC QP on a CQ of its own, through the CM.
func mkQP(t *testing.T, id *cm.ID) *verbs.CQ {
	t.Helper()
	cq, err := id.Device().CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := id.CreateQP(nil, verbs.QPInitAttr{Type: id.QPType(), SendCQ: cq, RecvCQ: cq, Cap: qpCap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Destroy() })
	cqs[id] = cq
	return cq
}

// region is a registered buffer.
type region struct {
	buf []byte
	mr  *verbs.MR
}

func newRegion(t *testing.T, pd *verbs.PD, n int) *region {
	t.Helper()
	r := &region{buf: make([]byte, n)}
	var err error
	if r.mr, err = pd.RegMR(r.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitWC waits for one completion on the QP's CQ.
func waitWC(t *testing.T, cq *verbs.CQ) ibv.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc := make([]ibv.WorkCompletion, 1)
	if n, err := cq.Wait(ctx, wc); err != nil || n != 1 {
		t.Fatalf("CQ wait: %d, %v", n, err)
	}
	return wc[0]
}

// TestConnectTransferDisconnect is the whole life of an RC connection
// made by the CM: both sides' events exactly, a SEND and an RDMA WRITE on
// the QPs the CM moved to RTS, the disconnect and both timewaits.
func TestConnectTransferDisconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bd := newBed(t)
		l := bd.listen()
		cli := bd.resolve(false)
		if got := cli.LocalAddr().Addr(); got != addrA {
			t.Errorf("client bound to %v", got)
		}
		crecv := newRegion(t, cli.PD(), 64)
		cli.QP().PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{crecv.mr.SGE(0, 64)}})
		if err := cli.Connect(&cm.ConnParam{PrivateData: []byte("hello"), ResponderResources: 1, InitiatorDepth: 1,
			RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		req := next(t, bd.b.ch)
		if req.Type != cm.EventConnectRequest || req.ListenID != l || req.ID.Context() != "listener" {
			t.Fatalf("server event %v", req.Type)
		}
		srv := req.ID
		if !bytes.HasPrefix(req.Conn.PrivateData, []byte("hello")) || len(req.Conn.PrivateData) != 56 ||
			req.Conn.ResponderResources != 1 || req.Conn.InitiatorDepth != 1 || req.Conn.RetryCount != 7 ||
			req.Conn.QPNum != cli.QP().QPN() {
			t.Errorf("CONNECT_REQUEST conn %+v", req.Conn)
		}
		if srv.LocalAddr() != netip.AddrPortFrom(addrB, port) || srv.PeerAddr() != cli.LocalAddr() {
			t.Errorf("server ID addresses %v %v, client %v", srv.LocalAddr(), srv.PeerAddr(), cli.LocalAddr())
		}
		req.Ack()
		mkQP(t, srv)
		sbuf := newRegion(t, srv.PD(), 64)
		srv.QP().PostRecv(ibv.RecvWR{WRID: 2, SGList: []ibv.SGE{sbuf.mr.SGE(0, 32)}})
		// The server gives its buffer in the REP: va, rkey.
		pd := make([]byte, 12)
		binary.BigEndian.PutUint64(pd, sbuf.mr.Addr()+32)
		binary.BigEndian.PutUint32(pd[8:], sbuf.mr.RKey())
		if err := srv.Accept(&cm.ConnParam{PrivateData: pd, ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}); err != nil {
			t.Fatal(err)
		}
		est := expect(t, bd.a.ch, cm.EventEstablished)
		if est.ID != cli || !bytes.Equal(est.Conn.PrivateData[:12], pd) || len(est.Conn.PrivateData) != wire.CMRepPrivateDataLen ||
			est.Conn.QPNum != srv.QP().QPN() || est.Conn.ResponderResources != 1 {
			t.Errorf("client ESTABLISHED %+v", est.Conn)
		}
		if ev := expect(t, bd.b.ch, cm.EventEstablished); ev.ID != srv {
			t.Errorf("server ESTABLISHED for %v", ev.ID)
		}
		// The QPs: RTS, each other's QPN, PSNs crossed as the CM set them.
		ca, _ := cli.QP().Query()
		sa, _ := srv.QP().Query()
		if ca.State != ibv.QPStateRTS || sa.State != ibv.QPStateRTS || ca.DestQPN != srv.QP().QPN() ||
			sa.DestQPN != cli.QP().QPN() || ca.SQPSN != sa.RQPSN || sa.SQPSN != ca.RQPSN || ca.Timeout != 19 ||
			ca.MaxRdAtomic != 1 || sa.MaxDestRdAtomic != 1 || ca.AHAttr.GRH.FlowLabel != sa.AHAttr.GRH.FlowLabel {
			t.Errorf("QP attributes client %+v server %+v", ca, sa)
		}
		// A SEND and an RDMA WRITE.
		cbuf := newRegion(t, cli.PD(), 64)
		copy(cbuf.buf, "ping")
		copy(cbuf.buf[32:], "written by the client")
		rva, rkey := binary.BigEndian.Uint64(est.Conn.PrivateData), binary.BigEndian.Uint32(est.Conn.PrivateData[8:])
		if _, err := cli.QP().PostSend(
			ibv.SendWR{WRID: 10, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled, SGList: []ibv.SGE{cbuf.mr.SGE(32, 21)}, RemoteAddr: rva, RKey: rkey},
			ibv.SendWR{WRID: 11, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{cbuf.mr.SGE(0, 4)}}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if wc := waitWC(t, cqs[cli]); wc.Status != ibv.WCSuccess {
				t.Fatalf("client completion %+v", wc)
			}
		}
		if wc := waitWC(t, cqs[srv]); wc.Status != ibv.WCSuccess || wc.ByteLen != 4 {
			t.Fatalf("server completion %+v", wc)
		}
		if string(sbuf.buf[:4]) != "ping" || string(sbuf.buf[32:53]) != "written by the client" {
			t.Errorf("server memory %q", sbuf.buf)
		}
		// Disconnect from the client; the server answers.
		if err := cli.Disconnect(); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.b.ch, cm.EventDisconnected)
		if err := srv.Disconnect(); err != nil {
			t.Fatal(err)
		}
		expect(t, bd.a.ch, cm.EventDisconnected)
		if st := cli.QP().State(); st != ibv.QPStateErr {
			t.Errorf("client QP %v after disconnect", st)
		}
		quiet(t, bd.a.ch)
		quiet(t, bd.b.ch)
		// Timewait: 2048 ms (cm_convert_to_ms of the path's timeout 19).
		bd.clk.Advance(2048 * time.Millisecond)
		expect(t, bd.a.ch, cm.EventTimewaitExit)
		expect(t, bd.b.ch, cm.EventTimewaitExit)
		quiet(t, bd.a.ch)
		quiet(t, bd.b.ch)
		for _, id := range []*cm.ID{cli, srv} {
			if err := id.DestroyQP(); err != nil {
				t.Fatal(err)
			}
			if err := id.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
		l.Destroy()
		bd.noIDs()
	})
}

// noIDs checks that neither CM holds an ID, nor its IB CM agent.
func (bd *bed) noIDs() {
	bd.t.Helper()
	synctest.Wait()
	for _, h := range []*host{bd.a, bd.b} {
		if ids, ib := h.cm.NumIDs(); ids != 0 || ib != 0 {
			bd.t.Errorf("%v: %d IDs, %d IB CM IDs left", h.dev.Addr(), ids, ib)
		}
	}
}
