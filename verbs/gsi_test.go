package verbs_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// gsiCap is the GSI QPs' capacity in these tests.
var gsiCap = ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}

// newGSIEnd opens a device at addr with its GSI QP in RTS.
func newGSIEnd(t testing.TB, f *fabric.Fabric, addr string) *udEnd {
	t.Helper()
	dev := openDev(t, f, addr, 0)
	e := &udEnd{dev: dev, buf: make([]byte, 1<<16)}
	var err error
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = dev.CreateCQ(256, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = e.pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq, Cap: gsiCap}); err != nil {
		t.Fatal(err)
	}
	udToRTS(t, e.qp, verbs.GSIQKey)
	return e
}

// captureMADs returns the QP1 datagrams of the rxe rping capture
// (wire/testdata/rping_cm.pcap), in capture order.
func captureMADs(t testing.TB) []capture.Datagram {
	t.Helper()
	dgs, err := capture.ReadFile(filepath.Join("..", "wire", "testdata", "rping_cm.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var mads []capture.Datagram
	for _, d := range dgs {
		var p wire.Packet
		if d.Encap.DstPort == wire.UDPPort && wire.Parse(d.Payload, &p) == nil && p.DestQP() == 1 {
			mads = append(mads, d)
		}
	}
	if len(mads) != 5 {
		t.Fatalf("%d QP1 datagrams in the capture, want 5 (REQ, REP, RTU, DREQ, DREP)", len(mads))
	}
	return mads
}

// bthDETHNoPSN returns the BTH and DETH of a UD datagram with the PSN
// zeroed (AckReq kept).
func bthDETHNoPSN(udp []byte) []byte {
	h := bytes.Clone(udp[:wire.BTHLen+8])
	h[9], h[10], h[11] = 0, 0, 0
	return h
}

// TestGSIExchange: two devices exchange 256-byte MADs QP1↔QP1 both ways.
// Each datagram's BTH and DETH are rxe's byte for byte but for the PSN
// (the capture's REQ: UD_SEND_ONLY, AckReq, P_Key 0xFFFF, DestQP 1, Q_Key
// 0x80010000, source QP 1), whatever Q_Key the WR names, and leaves from
// rxe's QP1 UDP port; each arrives with the GRH of the sender's address,
// src_qp 1 and the MAD intact.
func TestGSIExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 11})
		defer f.Close()
		tp := newTap(f)
		a := newGSIEnd(t, f, "10.77.0.3")
		b := newGSIEnd(t, f, "10.77.0.2")
		if a.qp.QPN() != 1 || b.qp.QPN() != 1 {
			t.Fatalf("GSI QPNs %d, %d; want 1", a.qp.QPN(), b.qp.QPN())
		}
		if attr, _ := a.qp.Query(); attr.QKey != verbs.GSIQKey || attr.State != ibv.QPStateRTS {
			t.Fatalf("Query: Q_Key %#x state %v", attr.QKey, attr.State)
		}
		rxe := bthDETHNoPSN(captureMADs(t)[0].Payload)

		const mad = wire.MADLen
		ends := []*udEnd{a, b}
		for i, s := range ends {
			r := ends[1-i]
			for j := range mad {
				s.buf[j] = byte(j*7 + i)
			}
			r.postRecvs(t, 2, 0, verbs.GRHLen+mad, 10)
			ah := s.ahTo(t, r, 0, 64, 0)
			// The GSI QP sends GSIQKey whatever the WR says (rxe_req.c).
			for k, qkey := range []uint32{verbs.GSIQKey, 0x1234} {
				s.send(t, ah, 1, qkey, uint64(k), 0, mad)
				if w := waitWC(t, s.cq, 1)[0]; w.Status != ibv.WCSuccess || w.QPNum != 1 || w.ByteLen != mad {
					t.Fatalf("send completion %+v", w)
				}
				w := waitWC(t, r.cq, 1)[0]
				if w.Status != ibv.WCSuccess || w.SrcQP != 1 || w.QPNum != 1 || w.Flags != ibv.WCGRH || w.ByteLen != verbs.GRHLen+mad {
					t.Fatalf("recv completion %+v", w)
				}
				g, err := verbs.ParseGRH(r.buf[:verbs.GRHLen])
				if err != nil || g.Src != s.dev.Addr() || g.Dst != r.dev.Addr() {
					t.Fatalf("GRH %+v, %v; want %v -> %v", g, err, s.dev.Addr(), r.dev.Addr())
				}
				if !bytes.Equal(r.buf[verbs.GRHLen:verbs.GRHLen+mad], s.buf[:mad]) {
					t.Fatal("MAD differs")
				}
				r.postRecvs(t, 1, 0, verbs.GRHLen+mad, 20)
			}
		}
		pkts := tp.all()
		if len(pkts) != 4 {
			t.Fatalf("%d datagrams on the wire, want 4", len(pkts))
		}
		for i, p := range pkts {
			if got := bthDETHNoPSN(p.Data); !bytes.Equal(got, rxe) {
				t.Errorf("datagram %d: BTH+DETH (PSN zeroed)\n got % x\nwant % x (rxe)", i, got, rxe)
			}
			if p.Encap.SrcPort != wire.RxeSrcPort(1) || p.Encap.DstPort != wire.UDPPort {
				t.Errorf("datagram %d: UDP ports %d->%d, want %d->%d", i, p.Encap.SrcPort, p.Encap.DstPort, wire.RxeSrcPort(1), wire.UDPPort)
			}
			if len(p.Data) != wire.BTHLen+8+mad+4 {
				t.Errorf("datagram %d: %d bytes", i, len(p.Data))
			}
		}
		if a.dev.Counters().DropQKey != 0 || b.dev.Counters().DropQKey != 0 {
			t.Fatal("Q_Key drops")
		}
	})
}

// TestGSIQKey: QP1 takes only datagrams whose Q_Key is GSIQKey
// (rxe_recv.c check_keys); others are dropped and counted as any UD Q_Key
// violation, and the sender's WR still completes.
func TestGSIQKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 12})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 0x1234})
		b := newGSIEnd(t, f, "10.0.0.2")
		b.postRecvs(t, 4, 0, 512, 0)
		ah := a.ahTo(t, b, 0, 0, 0)

		for i, qkey := range []uint32{0x1234, 0x80010001, 0x00010000} {
			a.send(t, ah, 1, qkey, uint64(i), 0, 256)
			if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
				t.Fatalf("send completion %+v", w)
			}
		}
		time.Sleep(10 * time.Millisecond)
		if n := b.cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 {
			t.Fatalf("QP1 completed %d receives of wrong Q_Keys", n)
		}
		if got := b.dev.Counters().DropQKey; got != 3 {
			t.Fatalf("DropQKey = %d, want 3", got)
		}
		// An ordinary QP cannot send GSIQKey: a controlled Q_Key in a WR
		// stands for its own (IBTA 10.2.5), dropped again.
		a.send(t, ah, 1, verbs.GSIQKey, 8, 0, 256)
		waitWC(t, a.cq, 1)
		time.Sleep(10 * time.Millisecond)
		if got := b.dev.Counters().DropQKey; got != 4 {
			t.Fatalf("DropQKey = %d, want 4", got)
		}
		// Another device's QP1: taken, src_qp 1.
		c := newGSIEnd(t, f, "10.0.0.3")
		c.send(t, c.ahTo(t, b, 0, 0, 0), 1, verbs.GSIQKey, 9, 0, 256)
		waitWC(t, c.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != 1 || w.WRID != 0 {
			t.Fatalf("recv completion %+v", w)
		}
		if got := b.dev.Counters().DropQKey; got != 4 {
			t.Fatalf("DropQKey = %d after a good datagram, want 4", got)
		}
	})
}

// TestGSILifetime: one GSI QP per device (EBUSY while it lives, on any
// PD), QPN 1 free again after Destroy; ordinary QPs never get QPN 1.
func TestGSILifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 13})
		defer f.Close()
		a := newGSIEnd(t, f, "10.0.0.1")
		pd2, err := a.dev.AllocPD()
		must(t, err)
		attr := verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq, Cap: gsiCap}
		for _, pd := range []*verbs.PD{a.pd, pd2} {
			if qp, err := pd.CreateGSIQP(attr); !errors.Is(err, verbs.EBUSY) {
				t.Fatalf("second CreateGSIQP = %v, %v; want EBUSY", qp, err)
			}
		}
		var others []*verbs.QP
		for range 4 {
			qp, err := a.pd.CreateQP(attr)
			must(t, err)
			if qp.QPN() <= 1 {
				t.Fatalf("ordinary QP got QPN %d", qp.QPN())
			}
			others = append(others, qp)
		}
		must(t, a.qp.Destroy())
		qp, err := pd2.CreateGSIQP(attr)
		if err != nil || qp.QPN() != 1 {
			t.Fatalf("CreateGSIQP after Destroy = QPN %d, %v", qp.QPN(), err)
		}
		// The new one works: RTS and a MAD from a second device.
		udToRTS(t, qp, verbs.GSIQKey)
		mr, err := pd2.RegMR(make([]byte, 4096), ibv.AccessLocalWrite)
		must(t, err)
		must2(t)(qp.PostRecv(ibv.RecvWR{WRID: 5, SGList: []ibv.SGE{mr.SGE(0, 4096)}}))
		b := newGSIEnd(t, f, "10.0.0.2")
		b.send(t, b.ahTo(t, &udEnd{dev: a.dev}, 0, 0, 0), 1, verbs.GSIQKey, 1, 0, wire.MADLen)
		waitWC(t, b.cq, 1)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 5 || w.SrcQP != 1 {
			t.Fatalf("recv completion %+v", w)
		}
		for _, o := range others {
			must(t, o.Destroy())
		}
		must(t, qp.Destroy())
	})
}

// TestGSICaptureREQ delivers the capture's REQ, exactly as rxe sent it
// (headers, ICRC and all), to a softnic GSI QP at the capture's
// destination address: it arrives intact with src_qp 1 and the GRH of
// the capture's IPv4 header.
func TestGSICaptureREQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		req := captureMADs(t)[0]
		f := fabric.New(fabric.Config{Seed: 14})
		defer f.Close()
		b := newGSIEnd(t, f, req.Encap.Dst.String())
		b.postRecvs(t, 1, 0, verbs.GRHLen+wire.MADLen, 3)
		src, err := f.Attach(req.Encap.Src)
		must(t, err)
		dg := []link.Datagram{{Encap: req.Encap, Buf: bytes.Clone(req.Payload)}}
		if _, err := src.WriteBatch(dg); err != nil {
			t.Fatal(err)
		}
		w := waitWC(t, b.cq, 1)[0]
		if w.Status != ibv.WCSuccess || w.WRID != 3 || w.SrcQP != 1 || w.QPNum != 1 || w.Flags != ibv.WCGRH ||
			w.ByteLen != verbs.GRHLen+wire.MADLen {
			t.Fatalf("recv completion %+v", w)
		}
		var p wire.Packet
		must(t, wire.Parse(req.Payload, &p))
		if !bytes.Equal(b.buf[verbs.GRHLen:verbs.GRHLen+wire.MADLen], p.Payload) {
			t.Fatal("the REQ MAD differs from the capture's")
		}
		if _, err := wire.ParseCMReq(b.buf[verbs.GRHLen : verbs.GRHLen+wire.MADLen]); err != nil {
			t.Fatalf("ParseCMReq: %v", err)
		}
		g, err := verbs.ParseGRH(b.buf[:verbs.GRHLen])
		if err != nil || g.Src != req.Encap.Src || g.Dst != req.Encap.Dst || g.HopLimit != req.Encap.HopLimit ||
			g.TrafficClass != req.Encap.TrafficClass {
			t.Fatalf("GRH %+v, %v; want the capture's %v -> %v ttl %d", g, err, req.Encap.Src, req.Encap.Dst, req.Encap.HopLimit)
		}
		if c := b.dev.Counters(); c.ICRCErr != 0 || c.DropQKey != 0 || c.DropMalformed != 0 {
			t.Fatalf("counters %+v", c)
		}
	})
}

// TestGSIMisuse: what CreateGSIQP and a GSI QP's Modify refuse, each
// with EINVAL and nothing created or changed.
func TestGSIMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 15})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.1", 0)
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(16, nil)
		must(t, err)
		srq, err := pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		ud := verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: gsiCap}
		with := func(f func(*verbs.QPInitAttr)) verbs.QPInitAttr { a := ud; f(&a); return a }
		for name, attr := range map[string]verbs.QPInitAttr{
			"RC":       with(func(a *verbs.QPInitAttr) { a.Type = ibv.QPTypeRC }),
			"UC":       with(func(a *verbs.QPInitAttr) { a.Type = ibv.QPTypeUC }),
			"SRQ":      with(func(a *verbs.QPInitAttr) { a.SRQ = srq }),
			"TSO":      with(func(a *verbs.QPInitAttr) { a.MaxTSOHeader = 64 }),
			"no CQ":    with(func(a *verbs.QPInitAttr) { a.RecvCQ = nil }),
			"too deep": with(func(a *verbs.QPInitAttr) { a.Cap.MaxSendWR = 1 << 20 }),
		} {
			if qp, err := pd.CreateGSIQP(attr); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%s: CreateGSIQP = %v, %v; want EINVAL", name, qp, err)
			}
		}
		qp, err := pd.CreateGSIQP(ud)
		if err != nil || qp.QPN() != 1 {
			t.Fatalf("CreateGSIQP after the refusals = %v, %v", qp, err)
		}
		// Q_Key other than GSIQKey: EINVAL, at INIT and later.
		err = qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: 0x11},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey)
		if !errors.Is(err, verbs.EINVAL) || qp.State() != ibv.QPStateReset {
			t.Fatalf("INIT with Q_Key 0x11 = %v, state %v; want EINVAL, RESET", err, qp.State())
		}
		udToRTS(t, qp, verbs.GSIQKey)
		if err := qp.Modify(&ibv.QPAttr{QKey: 0x80010001}, ibv.QPAttrQKey); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("RTS Q_Key change = %v, want EINVAL", err)
		}
		must(t, qp.Modify(&ibv.QPAttr{QKey: verbs.GSIQKey}, ibv.QPAttrQKey))
		if attr, _ := qp.Query(); attr.QKey != verbs.GSIQKey {
			t.Fatalf("Q_Key %#x", attr.QKey)
		}
		// Nil PD, destroyed PD.
		var nilPD *verbs.PD
		if _, err := nilPD.CreateGSIQP(ud); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("nil PD: %v", err)
		}
		must(t, qp.Destroy())
		if err := qp.Destroy(); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("second Destroy = %v", err)
		}
		must(t, srq.Destroy())
		must(t, pd.Dealloc())
		if _, err := pd.CreateGSIQP(ud); err == nil {
			t.Fatal("CreateGSIQP on a deallocated PD succeeded")
		}
	})
}
