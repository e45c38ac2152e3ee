package verbs_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// mcastAH makes an address handle of e's PD towards group g.
func (e *udEnd) mcastAH(t testing.TB, g string, hop uint8) *verbs.AH {
	t.Helper()
	ah, err := e.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr(g), HopLimit: hop}})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

// gidOf returns the GID of address a.
func gidOf(a string) verbs.GID { return verbs.GIDFromAddr(netip.MustParseAddr(a)) }

// mcastRecv is one receiving UD QP in the multicast tests: its device's
// end and, for a second QP on that device, the QP and its buffer area.
type mcastRecv struct {
	e   *udEnd
	qp  *verbs.QP
	cq  *verbs.CQ
	off int // where its receive buffers start in e.buf
}

func (r *mcastRecv) post(t testing.TB, n, size int, wrid0 uint64) {
	t.Helper()
	for i := range n {
		must2(t)(r.qp.PostRecv(ibv.RecvWR{WRID: wrid0 + uint64(i), SGList: []ibv.SGE{r.e.mr.SGE(r.off+i*size, size)}}))
	}
}

// TestMcastFabric: a sender and three receivers on two devices (two QPs on
// one) attached to 239.1.2.3: every receiver gets every datagram, a copy
// each, with the sender's QPN, the GRH of the group and the payload; the
// wire carries one datagram a send, to the group address, with the AH's
// hop limit and DestQP 0xFFFFFF. Detaching one QP stops its copies only;
// detaching the device's last QP and destroying the other device's QP
// make their links leave the group.
func TestMcastFabric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 21})
		defer f.Close()
		tp := newTap(f)
		const group = "239.1.2.3"
		gid := gidOf("::ffff:" + group)
		s := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 0x4242})
		a := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 0x4242})
		b := newUDEnd(t, f, "10.0.0.3", udOpts{qkey: 0x4242})
		a2cq, err := a.dev.CreateCQ(256, nil)
		must(t, err)
		recvs := []*mcastRecv{
			{e: a, qp: a.qp, cq: a.cq, off: 0},
			{e: a, qp: newUDQP(t, a.pd, a2cq, udOpts{qkey: 0x4242}), cq: a2cq, off: 1 << 19},
			{e: b, qp: b.qp, cq: b.cq, off: 0},
		}
		for _, r := range recvs {
			must(t, r.qp.AttachMcast(gid, 0))
			r.post(t, 8, 1024, 100)
		}
		// Attaching again is harmless: still one copy.
		must(t, a.qp.AttachMcast(gid, 0xFFFF))
		ah := s.mcastAH(t, group, 5)
		const n = 200
		send := func(k int) {
			t.Helper()
			for i := range n {
				s.buf[i] = byte(i + 13*k)
			}
			s.send(t, ah, verbs.MulticastQPN, 0x4242, uint64(k), 0, n)
			if w := waitWC(t, s.cq, 1)[0]; w.Status != ibv.WCSuccess {
				t.Fatalf("send %d: %+v", k, w)
			}
		}
		check := func(k int, r *mcastRecv) {
			t.Helper()
			w := waitWC(t, r.cq, 1)[0]
			if w.Status != ibv.WCSuccess || w.SrcQP != s.qp.QPN() || w.QPNum != r.qp.QPN() ||
				w.Flags != ibv.WCGRH || w.ByteLen != verbs.GRHLen+n {
				t.Fatalf("send %d, QP %#x: completion %+v", k, r.qp.QPN(), w)
			}
			buf := r.e.buf[r.off+int(w.WRID-100)*1024:]
			g, err := verbs.ParseGRH(buf[:verbs.GRHLen])
			if err != nil || g.Src != s.dev.Addr() || g.Dst != netip.MustParseAddr(group) || g.HopLimit != 5 {
				t.Fatalf("send %d, QP %#x: GRH %+v, %v", k, r.qp.QPN(), g, err)
			}
			if !bytes.Equal(buf[verbs.GRHLen:verbs.GRHLen+n], s.buf[:n]) {
				t.Fatalf("send %d, QP %#x: payload differs", k, r.qp.QPN())
			}
		}
		quiet := func(rs ...*mcastRecv) {
			t.Helper()
			time.Sleep(10 * time.Millisecond)
			for _, r := range rs {
				if got := pollAll(r.cq); len(got) != 0 {
					t.Fatalf("QP %#x got %+v", r.qp.QPN(), got)
				}
			}
		}
		for k := range 3 {
			send(k)
			for _, r := range recvs {
				check(k, r)
			}
		}
		quiet(recvs...)
		pkts := tp.all()
		if len(pkts) != 3 {
			t.Fatalf("%d datagrams on the wire, want 3 (one a send)", len(pkts))
		}
		for _, p := range pkts {
			if p.Encap.Dst != netip.MustParseAddr(group) || p.Encap.HopLimit != 5 || p.Wire.DestQP() != wire.MulticastQPN {
				t.Fatalf("datagram to %v hop %d DestQP %#x", p.Encap.Dst, p.Encap.HopLimit, p.Wire.DestQP())
			}
		}

		// Detach a's first QP: the other two still get everything.
		must(t, a.qp.DetachMcast(gid, 0))
		send(3)
		check(3, recvs[1])
		check(3, recvs[2])
		quiet(recvs...)
		// a's last QP detaches, b's is destroyed: both links leave.
		must(t, recvs[1].qp.DetachMcast(gid, 0))
		must(t, b.qp.Destroy())
		send(4)
		quiet(recvs...)
		if st := f.Stats(); st.DropNoRoute.Packets != 1 {
			t.Fatalf("fabric DropNoRoute %d, want 1 (the group has no members)", st.DropNoRoute)
		}
		if a.dev.Counters().DropAddr != 0 || b.dev.Counters().DropAddr != 0 {
			t.Fatal("a device that left the group was sent its datagram")
		}
	})
}

// TestMcastQKeyAndSelf: each attached QP checks its own Q_Key (one with
// another Q_Key drops and counts, the others receive), and a sender
// attached to the group gets its own datagram, as with IP_MULTICAST_LOOP.
// Over IPv6, to ff0e::1:2:3.
func TestMcastQKeyAndSelf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 22})
		defer f.Close()
		const group = "ff0e::1:2:3"
		gid := gidOf(group)
		s := newUDEnd(t, f, "fd00::1", udOpts{qkey: 7})
		a := newUDEnd(t, f, "fd00::2", udOpts{qkey: 7})
		b := newUDEnd(t, f, "fd00::3", udOpts{qkey: 8})
		for _, e := range []*udEnd{s, a, b} {
			must(t, e.qp.AttachMcast(gid, 0))
			e.postRecvs(t, 2, 0, 512, 1)
		}
		ah := s.mcastAH(t, group, 0)
		s.send(t, ah, verbs.MulticastQPN, 7, 9, 4096, 100)
		if w := waitWC(t, s.cq, 2); w[0].Status != ibv.WCSuccess || w[1].Status != ibv.WCSuccess {
			t.Fatalf("sender completions %+v", w)
		}
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != s.qp.QPN() {
			t.Fatalf("a: %+v", w)
		}
		time.Sleep(10 * time.Millisecond)
		if got := pollAll(b.cq); len(got) != 0 || b.dev.Counters().DropQKey != 1 {
			t.Fatalf("b (Q_Key 8): %+v, DropQKey %d; want nothing and 1", got, b.dev.Counters().DropQKey)
		}
		g, err := verbs.ParseGRH(s.buf[:verbs.GRHLen])
		if err != nil || g.Dst != netip.MustParseAddr(group) || g.HopLimit != 64 {
			t.Fatalf("sender's own copy: GRH %+v, %v (hop limit 0 in the AH keeps 64)", g, err)
		}
	})
}

// TestMcastDrops: a datagram to a group no QP of the device is attached
// to (its link joined for another reason) is dropped as not addressed to
// the device, and one to an attached group with a DestQP other than
// 0xFFFFFF is dropped as for no QP; neither completes.
func TestMcastDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 23})
		defer f.Close()
		s := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 1})
		ep, err := f.Attach(netip.MustParseAddr("10.0.0.2"))
		must(t, err)
		dev, err := verbs.Open(verbs.Config{Link: ep})
		must(t, err)
		defer dev.Close()
		a := &udEnd{dev: dev, buf: make([]byte, 1<<16)}
		a.pd, err = dev.AllocPD()
		must(t, err)
		a.cq, err = dev.CreateCQ(64, nil)
		must(t, err)
		a.mr, err = a.pd.RegMR(a.buf, ibv.AccessLocalWrite)
		must(t, err)
		a.qp = newUDQP(t, a.pd, a.cq, udOpts{qkey: 1})
		must(t, a.qp.AttachMcast(gidOf("::ffff:239.0.0.1"), 0))
		a.postRecvs(t, 4, 0, 512, 1)
		must(t, ep.JoinGroup(netip.MustParseAddr("239.0.0.2"))) // the link's, no QP's

		s.send(t, s.mcastAH(t, "239.0.0.2", 1), verbs.MulticastQPN, 1, 1, 0, 10)
		s.send(t, s.mcastAH(t, "239.0.0.1", 1), a.qp.QPN(), 1, 2, 0, 10)
		waitWC(t, s.cq, 2)
		time.Sleep(10 * time.Millisecond)
		if got := pollAll(a.cq); len(got) != 0 {
			t.Fatalf("completions %+v", got)
		}
		if c := dev.Counters(); c.DropAddr != 1 || c.DropNoQP != 1 {
			t.Fatalf("DropAddr %d DropNoQP %d, want 1 and 1", c.DropAddr, c.DropNoQP)
		}
		// The attached group still works.
		s.send(t, s.mcastAH(t, "239.0.0.1", 1), verbs.MulticastQPN, 1, 3, 0, 10)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("%+v", w)
		}
	})
}

// TestMcastMisuse: what AttachMcast and DetachMcast refuse (EINVAL, as
// ib_attach_mcast and rxe): non-UD QPs (the GSI QP too), GIDs that are not
// multicast, a group of the other family, detaching a group not attached,
// a destroyed QP, and a group's 57th QP (max_mcast_qp_attach); QueryDevice
// reports rxe's limits.
func TestMcastMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 24})
		defer f.Close()
		e := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 1, maxWR: 4})
		attr := e.dev.QueryDevice()
		if attr.MaxMcastGrp != 8192 || attr.MaxMcastQPAttach != 56 || attr.MaxTotalMcastQPAttach != 0x70000 {
			t.Fatalf("device multicast limits %d/%d/%#x, want rxe's 8192/56/0x70000",
				attr.MaxMcastGrp, attr.MaxMcastQPAttach, attr.MaxTotalMcastQPAttach)
		}
		good := gidOf("::ffff:239.1.1.1")
		for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
			qp, err := e.pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq, Cap: gsiCap})
			must(t, err)
			if err := qp.AttachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%v QP: AttachMcast = %v, want EINVAL", typ, err)
			}
			if err := qp.DetachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%v QP: DetachMcast = %v, want EINVAL", typ, err)
			}
		}
		gsi, err := e.pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq, Cap: gsiCap})
		must(t, err)
		if err := gsi.AttachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("GSI QP: AttachMcast = %v, want EINVAL", err)
		}
		for _, g := range []string{"::ffff:10.0.0.9", "::239.1.1.1", "fd00::1", "::ffff:255.255.255.255", "ff0e::1"} {
			if err := e.qp.AttachMcast(gidOf(g), 0); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("AttachMcast(%s) = %v, want EINVAL", g, err)
			}
		}
		if verbs.IsMulticastGID(gidOf("::ffff:10.0.0.9")) || !verbs.IsMulticastGID(good) || !verbs.IsMulticastGID(gidOf("ff02::1")) {
			t.Error("IsMulticastGID")
		}
		if err := e.qp.DetachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("DetachMcast of a group not attached = %v, want EINVAL", err)
		}
		must(t, e.qp.AttachMcast(good, 0))
		must(t, e.qp.DetachMcast(good, 0))
		if err := e.qp.DetachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("second DetachMcast = %v, want EINVAL", err)
		}
		// max_mcast_qp_attach: e.qp and 55 more, then one too many.
		must(t, e.qp.AttachMcast(good, 0))
		var qps []*verbs.QP
		for range 56 {
			qps = append(qps, newUDQP(t, e.pd, e.cq, udOpts{qkey: 1, maxWR: 1}))
		}
		for i, qp := range qps {
			err := qp.AttachMcast(good, 0)
			if i < 55 && err != nil {
				t.Fatalf("QP %d: %v", i+2, err)
			}
			if i == 55 && !errors.Is(err, verbs.EINVAL) {
				t.Fatalf("57th QP: AttachMcast = %v, want EINVAL", err)
			}
		}
		// Another group takes it; a destroyed QP is refused.
		must(t, qps[55].AttachMcast(gidOf("::ffff:239.1.1.2"), 0))
		must(t, qps[55].Destroy())
		if err := qps[55].AttachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("destroyed QP: AttachMcast = %v, want EINVAL", err)
		}
		var nilQP *verbs.QP
		if err := nilQP.AttachMcast(good, 0); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("nil QP: %v", err)
		}
	})
}

// TestMcastNoMulticastLink: a device on a link that cannot receive
// multicast reports no multicast limits and refuses attaches with EINVAL
// (rxe with max_mcast_grp 0).
func TestMcastNoMulticastLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 25})
		defer f.Close()
		ep, err := f.Attach(netip.MustParseAddr("10.0.0.1"))
		must(t, err)
		dev, err := verbs.Open(verbs.Config{Link: noMcastLink{ep}})
		must(t, err)
		defer dev.Close()
		if a := dev.QueryDevice(); a.MaxMcastGrp != 0 || a.MaxMcastQPAttach != 0 {
			t.Fatalf("limits %d/%d, want 0", a.MaxMcastGrp, a.MaxMcastQPAttach)
		}
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(4, nil)
		must(t, err)
		qp := newUDQP(t, pd, cq, udOpts{qkey: 1, maxWR: 1})
		if err := qp.AttachMcast(gidOf("::ffff:239.1.1.1"), 0); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("AttachMcast = %v, want EINVAL", err)
		}
	})
}

// noMcastLink hides the fabric endpoint's Multicaster.
type noMcastLink struct{ ep *fabric.Endpoint }

func (l noMcastLink) ReadBatch(m []link.Datagram) (int, error)  { return l.ep.ReadBatch(m) }
func (l noMcastLink) WriteBatch(m []link.Datagram) (int, error) { return l.ep.WriteBatch(m) }
func (l noMcastLink) BatchSize() int                            { return l.ep.BatchSize() }
func (l noMcastLink) LocalAddr() netip.Addr                     { return l.ep.LocalAddr() }
func (l noMcastLink) SrcPort() uint16                           { return 0 }
func (l noMcastLink) MTU() int                                  { return l.ep.MTU() }
func (l noMcastLink) Close() error                              { return l.ep.Close() }
