package verbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// udEnd is one device with a UD QP in RTS.
type udEnd struct {
	dev *verbs.Device
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	buf []byte
	mr  *verbs.MR
}

type udOpts struct {
	qkey    uint32
	portMTU ibv.MTU
	maxWR   uint32
	srq     *verbs.SRQ // attach the QP to it (created on another device: leave nil)
	sigAll  bool
	ops     verbs.SendOpsFlags
}

// openDev opens a device on f at addr, closed at cleanup.
func openDev(t testing.TB, f *fabric.Fabric, addr string, portMTU ibv.MTU) *verbs.Device {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := verbs.Open(verbs.Config{Link: ep, PortMTU: portMTU})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// newUDEnd opens a device at addr and makes a UD QP in RTS with o.qkey.
func newUDEnd(t testing.TB, f *fabric.Fabric, addr string, o udOpts) *udEnd {
	t.Helper()
	dev := openDev(t, f, addr, o.portMTU)
	e := &udEnd{dev: dev, buf: make([]byte, 1<<20)}
	var err error
	if e.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = dev.CreateCQ(4096, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	e.qp = newUDQP(t, e.pd, e.cq, o)
	return e
}

// newUDQP makes a UD QP of pd in RTS with o.qkey.
func newUDQP(t testing.TB, pd *verbs.PD, cq *verbs.CQ, o udOpts) *verbs.QP {
	t.Helper()
	if o.maxWR == 0 {
		o.maxWR = 512
	}
	qp, err := pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq, SRQ: o.srq,
		SigAll: o.sigAll, SendOpsFlags: o.ops,
		Cap: ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	udToRTS(t, qp, o.qkey)
	return qp
}

// udToRTS moves a UD QP RESET→INIT→RTR→RTS the way ibv_ud_pingpong does.
func udToRTS(t testing.TB, qp *verbs.QP, qkey uint32) {
	t.Helper()
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, QKey: qkey},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey))
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState))
	must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: 0}, ibv.QPAttrState|ibv.QPAttrSQPSN))
}

// ahTo makes an address handle of e's PD towards dst.
func (e *udEnd) ahTo(t testing.TB, dst *udEnd, tc, hop uint8, flow uint32) *verbs.AH {
	t.Helper()
	ah, err := e.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: dst.dev.Addr(), TrafficClass: tc, HopLimit: hop, FlowLabel: flow}})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

// postRecvs posts n receive WRs of size bytes each at consecutive offsets
// from off, WRIDs wrid0, wrid0+1, ...
func (e *udEnd) postRecvs(t testing.TB, n, off, size int, wrid0 uint64) {
	t.Helper()
	for i := range n {
		must2(t)(e.qp.PostRecv(ibv.RecvWR{WRID: wrid0 + uint64(i), SGList: []ibv.SGE{e.mr.SGE(off+i*size, size)}}))
	}
}

// send posts a signaled UD SEND of e.buf[off:off+n] to qpn through ah.
func (e *udEnd) send(t testing.TB, ah *verbs.AH, qpn, qkey uint32, wrid uint64, off, n int) {
	t.Helper()
	must2(t)(e.qp.PostSend(ibv.SendWR{WRID: wrid, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{e.mr.SGE(off, n)}, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey}))
}

// tap records the datagrams f carries.
type tap struct {
	mu   sync.Mutex
	pkts []fabric.Packet
}

func newTap(f *fabric.Fabric) *tap {
	tp := &tap{}
	f.Tap(func(p fabric.Packet) {
		tp.mu.Lock()
		tp.pkts = append(tp.pkts, p.Clone())
		tp.mu.Unlock()
	})
	return tp
}

func (tp *tap) all() []fabric.Packet {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]fabric.Packet(nil), tp.pkts...)
}

// csum16 is the IPv4 header checksum, written here independently of
// package wire.
func csum16(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// TestUDGRHIPv4 checks a UD SEND between IPv4 devices: the datagram on
// the wire (UD opcode, DETH, rxe's source port, TOS and TTL from the AH),
// and the receive side byte by byte: 20 zero bytes, the IPv4 header as
// it arrived, the payload, and the completion's flags, source QP and
// byte count (rxe-interop-facts.md §2.11).
func TestUDGRHIPv4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		tp := newTap(f)
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 0x1111})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 0x2222})
		ah := a.ahTo(t, b, 0x28, 17, 0xABCDE)
		const n = 101
		for i := range n {
			a.buf[i] = byte(i*3 + 1)
		}
		b.postRecvs(t, 1, 0, 4096, 7)
		a.send(t, ah, b.qp.QPN(), 0x2222, 1, 0, n)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCSend || w.ByteLen != n {
			t.Fatalf("send completion %+v", w)
		}
		w := waitWC(t, b.cq, 1)[0]
		if w.Status != ibv.WCSuccess || w.WRID != 7 || w.Opcode != ibv.WCRecv || w.Flags != ibv.WCGRH ||
			w.SrcQP != a.qp.QPN() || w.QPNum != b.qp.QPN() || w.ByteLen != verbs.GRHLen+n {
			t.Fatalf("recv completion %+v, want GRH flag, src_qp %#x, byte_len %d", w, a.qp.QPN(), verbs.GRHLen+n)
		}

		pkts := tp.all()
		if len(pkts) != 1 {
			t.Fatalf("%d datagrams on the wire, want 1", len(pkts))
		}
		p := pkts[0]
		// The AH asks for hop limit 17; the wire carries the route's, as
		// Linux RoCE stacks do (transport.RouteHopLimit).
		const ttl = transport.RouteHopLimit
		pad := -n & 3
		udpLen := 12 + 8 + n + pad + 4 // BTH, DETH, payload, pad, ICRC
		switch {
		case p.Wire.Opcode != wire.UDSendOnly:
			t.Errorf("opcode %v, want UD_SEND_ONLY", p.Wire.Opcode)
		case p.Wire.DETH().QKey() != 0x2222 || p.Wire.DETH().SrcQP() != a.qp.QPN():
			t.Errorf("DETH qkey %#x src %#x, want 0x2222 %#x", p.Wire.DETH().QKey(), p.Wire.DETH().SrcQP(), a.qp.QPN())
		case p.Wire.DestQP() != b.qp.QPN() || p.Wire.AckReq():
			t.Errorf("BTH dest %#x ackreq %v", p.Wire.DestQP(), p.Wire.AckReq())
		case p.Encap.SrcPort != wire.RxeSrcPort(a.qp.QPN()) || p.Encap.DstPort != wire.UDPPort:
			t.Errorf("UDP ports %d->%d, want %d->%d", p.Encap.SrcPort, p.Encap.DstPort, wire.RxeSrcPort(a.qp.QPN()), wire.UDPPort)
		case p.Encap.TrafficClass != 0x28 || p.Encap.HopLimit != ttl || p.Encap.FragOff != 0x4000:
			t.Errorf("TOS %#x TTL %d frag %#x, want 0x28 %d DF", p.Encap.TrafficClass, p.Encap.HopLimit, p.Encap.FragOff, ttl)
		case len(p.Data) != udpLen:
			t.Errorf("UDP payload %d bytes, want %d", len(p.Data), udpLen)
		}

		want := make([]byte, 40)
		ip := want[20:]
		ip[0] = 0x45
		ip[1] = 0x28
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+udpLen))
		binary.BigEndian.PutUint16(ip[4:], p.Encap.ID)
		binary.BigEndian.PutUint16(ip[6:], 0x4000)
		ip[8] = ttl
		ip[9] = 17
		copy(ip[12:], []byte{10, 0, 0, 1})
		copy(ip[16:], []byte{10, 0, 0, 2})
		binary.BigEndian.PutUint16(ip[10:], csum16(ip[:20]))
		if got := b.buf[:40]; !bytes.Equal(got, want) {
			t.Fatalf("GRH area\n got % x\nwant % x", got, want)
		}
		if !bytes.Equal(b.buf[40:40+n], a.buf[:n]) {
			t.Fatal("payload differs")
		}
		g, err := verbs.ParseGRH(b.buf[:40])
		if err != nil || g.Src != a.dev.Addr() || g.Dst != b.dev.Addr() || g.TrafficClass != 0x28 || g.HopLimit != ttl {
			t.Fatalf("ParseGRH = %+v, %v", g, err)
		}
	})
}

// TestUDGRHIPv6 is TestUDGRHIPv4 on fd00::/64: the GRH area is the IPv6
// header with the AH's traffic class and flow label.
func TestUDGRHIPv6(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 2})
		defer f.Close()
		tp := newTap(f)
		a := newUDEnd(t, f, "fd00::1", udOpts{qkey: 0x77})
		b := newUDEnd(t, f, "fd00::2", udOpts{qkey: 0x77})
		ah := a.ahTo(t, b, 0x48, 9, 0x12345)
		const n = 1000
		for i := range n {
			a.buf[i] = byte(i ^ 0xA5)
		}
		b.postRecvs(t, 1, 0, 2000, 1)
		a.send(t, ah, b.qp.QPN(), 0x77, 1, 0, n)
		waitWC(t, a.cq, 1)
		w := waitWC(t, b.cq, 1)[0]
		if w.Status != ibv.WCSuccess || w.Flags != ibv.WCGRH || w.SrcQP != a.qp.QPN() || w.ByteLen != 40+n {
			t.Fatalf("recv completion %+v", w)
		}
		p := tp.all()[0]
		if p.Encap.FlowLabel != 0x12345 || p.Encap.TrafficClass != 0x48 || p.Encap.HopLimit != transport.RouteHopLimit {
			t.Errorf("IPv6 header tc %#x flow %#x hop %d, want 0x48 0x12345 %d", p.Encap.TrafficClass, p.Encap.FlowLabel, p.Encap.HopLimit, transport.RouteHopLimit)
		}
		udpLen := 12 + 8 + n + 4
		want := make([]byte, 40)
		binary.BigEndian.PutUint32(want, 6<<28|0x48<<20|0x12345)
		binary.BigEndian.PutUint16(want[4:], uint16(8+udpLen))
		want[6] = 17
		want[7] = transport.RouteHopLimit
		src, dst := a.dev.Addr().As16(), b.dev.Addr().As16()
		copy(want[8:], src[:])
		copy(want[24:], dst[:])
		if got := b.buf[:40]; !bytes.Equal(got, want) {
			t.Fatalf("GRH\n got % x\nwant % x", got, want)
		}
		if !bytes.Equal(b.buf[40:40+n], a.buf[:n]) {
			t.Fatal("payload differs")
		}
	})
}

// TestUDQKey: a datagram with another Q_Key than the receiver's is
// dropped and counted (qkey_viol_cntr), and the sender's WR still
// succeeds; a send Q_Key with its high bit set stands for the sending
// QP's own Q_Key (IBTA 10.2.5), and a QP's own Q_Key may not have it.
func TestUDQKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 3})
		defer f.Close()
		tp := newTap(f)
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 0x5555})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 0x5555})
		c := newUDEnd(t, f, "10.0.0.3", udOpts{qkey: 0x6666})
		ab, ac := a.ahTo(t, b, 0, 0, 0), a.ahTo(t, c, 0, 0, 0)
		b.postRecvs(t, 4, 0, 256, 0)
		c.postRecvs(t, 4, 0, 256, 0)

		// Wrong Q_Key: dropped at b, counted; the send completes.
		a.send(t, ab, b.qp.QPN(), 0x5556, 1, 0, 10)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send completion %+v", w)
		}
		time.Sleep(10 * time.Millisecond)
		if n := b.cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 {
			t.Fatalf("b completed %d receives for a wrong Q_Key", n)
		}
		if got := b.dev.Counters().DropQKey; got != 1 {
			t.Fatalf("DropQKey = %d, want 1", got)
		}

		// High bit: a's own Q_Key 0x5555 goes on the wire and b takes it.
		a.send(t, ab, b.qp.QPN(), 0x80000000, 2, 0, 10)
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != a.qp.QPN() {
			t.Fatalf("recv completion %+v", w)
		}
		pkts := tp.all()
		if q := pkts[len(pkts)-1].Wire.DETH().QKey(); q != 0x5555 {
			t.Fatalf("DETH Q_Key %#x for a WR Q_Key 0x80000000, want the QP's 0x5555", q)
		}
		// c's Q_Key differs from a's: the same WR is dropped there.
		a.send(t, ac, c.qp.QPN(), 0xFFFFFFFF, 3, 0, 10)
		waitWC(t, a.cq, 1)
		time.Sleep(10 * time.Millisecond)
		if n := c.cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 || c.dev.Counters().DropQKey != 1 {
			t.Fatalf("c: %d completions, DropQKey %d; want 0 and 1", n, c.dev.Counters().DropQKey)
		}

		// A QP may not take a controlled Q_Key (high bit set) for itself.
		err := a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, QKey: 0x80000005}, ibv.QPAttrState|ibv.QPAttrQKey)
		if !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("modify to a controlled Q_Key: %v, want EINVAL", err)
		}
		// RTS→RTS may change the Q_Key: c now accepts 0x6666 from a.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, QKey: 0x6666}, ibv.QPAttrState|ibv.QPAttrQKey))
		if at, _ := a.qp.Query(); at.QKey != 0x6666 {
			t.Fatalf("query qkey %#x", at.QKey)
		}
		a.send(t, ac, c.qp.QPN(), 0x80000001, 4, 0, 10)
		waitWC(t, a.cq, 1)
		if w := waitWC(t, c.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("c recv %+v", w)
		}
	})
}

// TestUDSendImm: SEND_WITH_IMM carries its immediate and SE, and a
// zero-byte one still fills the GRH area.
func TestUDSendImm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 4})
		defer f.Close()
		tp := newTap(f)
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 9})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 9})
		ah := a.ahTo(t, b, 0, 0, 0)
		b.postRecvs(t, 2, 0, 512, 10)
		copy(a.buf, "hello, datagram")
		must2(t)(a.qp.PostSend(
			ibv.SendWR{WRID: 1, Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled | ibv.SendSolicited,
				Imm: 0xDEADBEEF, SGList: []ibv.SGE{a.mr.SGE(0, 15)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 9},
			ibv.SendWR{WRID: 2, Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled,
				Imm: 42, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 9}))
		waitWC(t, a.cq, 2)
		ws := waitWC(t, b.cq, 2)
		if w := ws[0]; w.WRID != 10 || w.Flags != ibv.WCGRH|ibv.WCWithImm || w.Imm != 0xDEADBEEF || w.ByteLen != 40+15 || w.Opcode != ibv.WCRecv {
			t.Fatalf("first recv %+v", w)
		}
		if w := ws[1]; w.WRID != 11 || w.Flags != ibv.WCGRH|ibv.WCWithImm || w.Imm != 42 || w.ByteLen != 40 {
			t.Fatalf("second recv %+v", w)
		}
		if string(b.buf[40:55]) != "hello, datagram" {
			t.Fatalf("payload %q", b.buf[40:55])
		}
		if b.buf[512+20]>>4 != 4 {
			t.Fatal("zero-byte datagram left no IPv4 header in its GRH area")
		}
		pkts := tp.all()
		if p := pkts[0].Wire; p.Opcode != wire.UDSendOnlyImm || !p.SE() || p.ImmDt().Imm() != 0xDEADBEEF {
			t.Fatalf("first datagram %v SE %v", p.Opcode, p.SE())
		}
		if p := pkts[1].Wire; p.SE() || p.PSN() != pkts[0].Wire.PSN().Next() {
			t.Fatalf("second datagram SE %v PSN %d after %d", p.SE(), p.PSN(), pkts[0].Wire.PSN())
		}
	})
}

// TestUDRecvTooSmall: a receive buffer that cannot hold the GRH area and
// the payload drops the datagram and keeps the WQE for the next one (rxe
// class D); a 40-byte buffer takes a zero-byte datagram.
func TestUDRecvTooSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 1})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 1})
		ah := a.ahTo(t, b, 0, 0, 0)
		must2(t)(b.qp.PostRecv(
			ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 40+50)}},
			ibv.RecvWR{WRID: 2, SGList: []ibv.SGE{b.mr.SGE(1000, 20), b.mr.SGE(2000, 20+100)}},
			ibv.RecvWR{WRID: 3, SGList: []ibv.SGE{b.mr.SGE(3000, 40)}}))
		for i := range 200 {
			a.buf[i] = byte(i + 7)
		}
		a.send(t, ah, b.qp.QPN(), 1, 1, 0, 51) // 91 bytes into 90: dropped
		waitWC(t, a.cq, 1)
		time.Sleep(10 * time.Millisecond)
		if n := b.cq.Poll(make([]ibv.WorkCompletion, 4)); n != 0 {
			t.Fatalf("%d completions for a datagram too big for the buffer", n)
		}
		if got := b.dev.Counters().DropLength; got != 1 {
			t.Fatalf("DropLength = %d, want 1", got)
		}
		a.send(t, ah, b.qp.QPN(), 1, 2, 0, 50) // exactly fits WR 1
		a.send(t, ah, b.qp.QPN(), 1, 3, 0, 100)
		a.send(t, ah, b.qp.QPN(), 1, 4, 0, 0)
		waitWC(t, a.cq, 3)
		ws := waitWC(t, b.cq, 3)
		for i, want := range []struct {
			wrid uint64
			n    uint32
		}{{1, 90}, {2, 140}, {3, 40}} {
			if w := ws[i]; w.Status != ibv.WCSuccess || w.WRID != want.wrid || w.ByteLen != want.n {
				t.Fatalf("completion %d: %+v, want WRID %d byte_len %d", i, w, want.wrid, want.n)
			}
		}
		// WR 2 scattered the GRH over its first SGE and the next 20 bytes
		// of its second one, then the payload.
		if b.buf[1000+0] != 0 || b.buf[2000]>>4 != 4 || !bytes.Equal(b.buf[2020:2120], a.buf[:100]) {
			t.Fatal("WR 2's scatter list holds the wrong bytes")
		}
	})
}

// TestUDOverMTU: a UD message longer than the port MTU completes
// successfully and sends nothing (IBTA C10-93.1.1, rxe "fake a successful
// UD send"); one of exactly the port MTU goes through.
func TestUDOverMTU(t *testing.T) {
	for _, mtu := range []ibv.MTU{ibv.MTU1024, ibv.MTU4096} {
		t.Run(fmt.Sprint(mtu.Bytes()), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 6})
				defer f.Close()
				tp := newTap(f)
				a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 1, portMTU: mtu})
				b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 1})
				if pa, _ := a.dev.QueryPort(1); pa.ActiveMTU != mtu {
					t.Fatalf("active MTU %v, want %v", pa.ActiveMTU, mtu)
				}
				ah := a.ahTo(t, b, 0, 0, 0)
				b.postRecvs(t, 2, 0, 8192, 1)
				m := mtu.Bytes()
				a.send(t, ah, b.qp.QPN(), 1, 1, 0, m+1)
				if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.ByteLen != uint32(m+1) {
					t.Fatalf("oversize send completion %+v, want success", w)
				}
				time.Sleep(10 * time.Millisecond)
				if n := len(tp.all()); n != 0 {
					t.Fatalf("%d datagrams sent for a message over the MTU", n)
				}
				a.send(t, ah, b.qp.QPN(), 1, 2, 0, m)
				waitWC(t, a.cq, 1)
				if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 1 || w.ByteLen != uint32(40+m) {
					t.Fatalf("recv %+v", w)
				}
				// The faked send consumed a PSN, as in rxe.
				if p := tp.all()[0].Wire; p.PSN() != 1 {
					t.Fatalf("PSN %d after one faked send, want 1", p.PSN())
				}
			})
		})
	}
}

// TestUDManySenders: eight devices send 50 datagrams each to one UD QP;
// each arrives once, intact, with the right source QP and GRH source.
func TestUDManySenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 7})
		defer f.Close()
		const senders, per, size = 8, 50, 300
		r := newUDEnd(t, f, "10.0.1.1", udOpts{qkey: 0xAB, maxWR: senders * per})
		r.postRecvs(t, senders*per, 0, 40+size, 0)
		var ss []*udEnd
		for i := range senders {
			s := newUDEnd(t, f, fmt.Sprintf("10.0.2.%d", i+1), udOpts{qkey: 0xAB})
			ss = append(ss, s)
		}
		for i, s := range ss {
			ah := s.ahTo(t, r, 0, 0, 0)
			for k := range per {
				p := s.buf[k*size : (k+1)*size]
				for j := range p {
					p[j] = byte(i*31 + k*7 + j)
				}
				binary.BigEndian.PutUint16(p, uint16(i<<8|k))
				must2(t)(s.qp.PostSend(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend,
					SGList: []ibv.SGE{s.mr.SGE(k*size, size)}, AH: ah, RemoteQPN: r.qp.QPN(), RemoteQKey: 0xAB}))
			}
		}
		ws := waitWC(t, r.cq, senders*per)
		seen := map[uint16]bool{}
		for _, w := range ws {
			if w.Status != ibv.WCSuccess || w.ByteLen != 40+size {
				t.Fatalf("completion %+v", w)
			}
			b := r.buf[int(w.WRID)*(40+size):][:40+size]
			id := binary.BigEndian.Uint16(b[40:])
			i, k := int(id>>8), int(id&0xFF)
			if i >= senders || k >= per || seen[id] {
				t.Fatalf("datagram %d/%d unexpected or twice", i, k)
			}
			seen[id] = true
			if w.SrcQP != ss[i].qp.QPN() {
				t.Fatalf("datagram %d/%d src_qp %#x, want %#x", i, k, w.SrcQP, ss[i].qp.QPN())
			}
			if g, _ := verbs.ParseGRH(b); g.Src != ss[i].dev.Addr() {
				t.Fatalf("datagram %d/%d GRH source %v, want %v", i, k, g.Src, ss[i].dev.Addr())
			}
			if !bytes.Equal(b[42:], ss[i].buf[k*size+2:(k+1)*size]) {
				t.Fatalf("datagram %d/%d payload differs", i, k)
			}
		}
		if got := r.dev.Counters().DropNoRecvWQE; got != 0 {
			t.Fatalf("DropNoRecvWQE = %d", got)
		}
	})
}

// TestUDLoss: on a lossy path datagrams simply vanish: every send
// completes successfully, each datagram that arrives is intact and
// unique, and received + lost = sent.
func TestUDLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed, n, size = 8, 300, 64
		t.Logf("seed %d", seed)
		f := fabric.New(fabric.Config{Seed: seed})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 3, sigAll: true})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 3})
		f.SetImpairment(fabric.Impairment{Loss: 0.25})
		ah := a.ahTo(t, b, 0, 0, 0)
		b.postRecvs(t, n, 0, 40+size, 0)
		for k := range n {
			binary.BigEndian.PutUint32(a.buf[k*size:], uint32(k))
			for j := 4; j < size; j++ {
				a.buf[k*size+j] = byte(k + j)
			}
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend,
				SGList: []ibv.SGE{a.mr.SGE(k*size, size)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 3}))
		}
		for _, w := range waitWC(t, a.cq, n) {
			if w.Status != ibv.WCSuccess {
				t.Fatalf("send completion %+v", w)
			}
		}
		time.Sleep(100 * time.Millisecond)
		got := map[uint32]bool{}
		buf := make([]ibv.WorkCompletion, 64)
		for {
			k := b.cq.Poll(buf)
			if k == 0 {
				break
			}
			for _, w := range buf[:k] {
				d := b.buf[int(w.WRID)*(40+size)+40:][:size]
				id := binary.BigEndian.Uint32(d)
				if w.Status != ibv.WCSuccess || id >= n || got[id] {
					t.Fatalf("completion %+v carries datagram %d (unexpected or twice)", w, id)
				}
				if !bytes.Equal(d, a.buf[int(id)*size:][:size]) {
					t.Fatalf("datagram %d differs", id)
				}
				got[id] = true
			}
		}
		lost := f.Stats().DropImpairment.Packets
		if len(got) == 0 || lost == 0 || uint64(len(got))+lost != n {
			t.Fatalf("received %d, lost %d, sent %d", len(got), lost, n)
		}
		t.Logf("received %d of %d", len(got), n)
	})
}

// TestUDAddressHandles: CreateAH's checks, the PD the handle holds, and
// what a send WR does with a destroyed handle, one of another PD, and one
// destroyed after the WR was posted (the WR copied it). A failed send
// moves the QP to SQE: later WRs are flushed, receives go on, and a
// modify to RTS resumes sending.
func TestUDAddressHandles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 9})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 5})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 5})
		route := func(dgid string) ibv.AHAttr {
			return ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr(dgid)}}
		}
		bad := map[string]ibv.AHAttr{
			"not global":    {PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}},
			"no dgid":       {IsGlobal: true, PortNum: 1},
			"unspecified":   route("0.0.0.0"),
			"IPv6 on IPv4":  route("fd00::2"),
			"sgid index 1":  {IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), SGIDIndex: 1}},
			"port 2":        {IsGlobal: true, PortNum: 2, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}},
			"mapped, wrong": route("::ffff:0.0.0.0"),
		}
		for name, attr := range bad {
			if ah, err := a.pd.CreateAH(attr); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("CreateAH %s: %v, %v; want EINVAL", name, ah, err)
			}
		}
		mapped, err := a.pd.CreateAH(route("::ffff:10.0.0.2"))
		if err != nil {
			t.Fatalf("CreateAH with an IPv4-mapped GID: %v", err)
		}
		if err := a.pd.Dealloc(); !errors.Is(err, verbs.EBUSY) {
			t.Fatalf("Dealloc of a PD with a QP and AHs: %v, want EBUSY", err)
		}
		must(t, mapped.Destroy())
		if err := mapped.Destroy(); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("second Destroy: %v, want EINVAL", err)
		}

		b.postRecvs(t, 8, 0, 256, 0)
		copy(a.buf, "abcdefgh")
		// A handle destroyed after the post: the WR copied it.
		ah := a.ahTo(t, b, 0, 0, 0)
		a.send(t, ah, b.qp.QPN(), 5, 1, 0, 8)
		must(t, ah.Destroy())
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || string(b.buf[40:48]) != "abcdefgh" {
			t.Fatalf("recv %+v", w)
		}

		// Posting with the destroyed handle: LOC_QP_OP_ERR, then SQE.
		ah2 := a.ahTo(t, b, 0, 0, 0)
		must2(t)(a.qp.PostSend(
			ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5},
			ibv.SendWR{WRID: 3, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah2, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}))
		ws := waitWC(t, a.cq, 2)
		if ws[0].WRID != 2 || ws[0].Status != ibv.WCLocQPOpErr || ws[1].WRID != 3 || ws[1].Status != ibv.WCWRFlushErr {
			t.Fatalf("completions %+v, want LOC_QP_OP_ERR then WR_FLUSH_ERR", ws)
		}
		if s := a.qp.State(); s != ibv.QPStateSQE {
			t.Fatalf("state %v after a failed UD send, want SQE", s)
		}
		// In SQE, sends are flushed and receives still complete.
		a.send(t, ah2, b.qp.QPN(), 5, 4, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCWRFlushErr {
			t.Fatalf("send in SQE: %+v", w)
		}
		a.postRecvs(t, 1, 4096, 256, 100)
		bah := b.ahTo(t, a, 0, 0, 0)
		b.send(t, bah, a.qp.QPN(), 5, 1, 0, 4)
		waitWC(t, b.cq, 1)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 100 {
			t.Fatalf("receive in SQE: %+v", w)
		}
		// SQE → RTS resumes.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))
		a.send(t, ah2, b.qp.QPN(), 5, 5, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send after SQE→RTS: %+v", w)
		}
		waitWC(t, b.cq, 1)

		// A handle of another PD: LOC_QP_OP_ERR.
		pd2, err := a.dev.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		other, err := pd2.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		a.send(t, other, b.qp.QPN(), 5, 6, 0, 8)
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCLocQPOpErr {
			t.Fatalf("send through another PD's AH: %+v", w)
		}
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))

		// A bare *AHAttr works from any PD and is checked at post time.
		bare := &ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}}
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 7, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: bare, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send through a bare AHAttr: %+v", w)
		}
		waitWC(t, b.cq, 1)
		if n, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, AH: &ibv.AHAttr{PortNum: 1}}); n != 0 || !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post with a bad bare AHAttr: %d, %v", n, err)
		}
		var nilAH *verbs.AH
		if _, err := a.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, AH: nilAH}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post with a nil *AH: %v", err)
		}
	})
}

// TestUDPostRules: what a UD QP accepts in which state.
func TestUDPostRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 10})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 5})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 5})
		ah := a.ahTo(t, b, 0, 0, 0)
		wr := ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}
		for _, op := range []ibv.WROpcode{ibv.WRRDMAWrite, ibv.WRRDMARead, ibv.WRAtomicFetchAndAdd, ibv.WRSendWithInv} {
			w := wr
			w.Opcode = op
			if _, err := a.qp.PostSend(w); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("%v on a UD QP: %v, want EINVAL", op, err)
			}
		}
		noAH := wr
		noAH.AH = nil
		if _, err := a.qp.PostSend(noAH); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("UD send without AH: %v, want EINVAL", err)
		}
		big := wr
		big.RemoteQPN = 1 << 24
		if _, err := a.qp.PostSend(big); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("remote QPN 2^24: %v, want EINVAL", err)
		}

		// A QP in INIT cannot send; one in RTR receives.
		c, err := b.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: b.cq, RecvCQ: b.cq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("RESET→INIT without a Q_Key: %v, want EINVAL", err)
		}
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: 5},
			ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex|ibv.QPAttrQKey))
		if _, err := c.PostSend(wr); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("send in INIT: %v, want EINVAL", err)
		}
		must2(t)(c.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{b.mr.SGE(0, 100)}}))
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState))
		a.send(t, ah, c.QPN(), 5, 1, 0, 8)
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCSuccess || w.WRID != 9 || w.QPNum != c.QPN() {
			t.Fatalf("receive in RTR: %+v", w)
		}

		// ERR flushes the posted receives; RESET forgets the Q_Key's state.
		must2(t)(c.PostRecv(ibv.RecvWR{WRID: 10, SGList: []ibv.SGE{b.mr.SGE(0, 100)}}))
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if w := waitWC(t, b.cq, 1)[0]; w.Status != ibv.WCWRFlushErr || w.WRID != 10 {
			t.Fatalf("flush on ERR: %+v", w)
		}
		must(t, c.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState))

		// SQD stops sending; RTS resumes; the drained event is reported.
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true}, ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify))
		b.postRecvs(t, 1, 0, 100, 20)
		a.send(t, ah, b.qp.QPN(), 5, 2, 0, 8)
		time.Sleep(10 * time.Millisecond)
		if n := a.cq.Poll(make([]ibv.WorkCompletion, 2)); n != 0 {
			t.Fatal("a send went out in SQD")
		}
		evs, _ := a.dev.AsyncEvents()
		if !hasEvent(evs, ibv.EventSQDrained, a.qp.QPN()) {
			t.Fatalf("events %+v, want SQ_DRAINED", evs)
		}
		must(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState))
		waitWC(t, a.cq, 1)
		if w := waitWC(t, b.cq, 1)[0]; w.WRID != 20 {
			t.Fatalf("recv %+v", w)
		}
	})
}

func hasEvent(evs []ibv.AsyncEvent, typ ibv.AsyncEventType, qpn uint32) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.QPN == qpn {
			return true
		}
	}
	return false
}

// TestUDReply: a UD server answers whoever sent a datagram with an AH
// made from the completion and the GRH (ibv_create_ah_from_wc), on IPv4
// and IPv6; the QPEx interface carries UD WRs (ibv_wr_set_ud_addr).
func TestUDReply(t *testing.T) {
	for _, addrs := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"fd00::1", "fd00::2"}} {
		t.Run(addrs[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 11})
				defer f.Close()
				cl := newUDEnd(t, f, addrs[0], udOpts{qkey: 0x42, ops: verbs.SendOpsSend | verbs.SendOpsSendWithImm})
				sv := newUDEnd(t, f, addrs[1], udOpts{qkey: 0x42})
				cl.postRecvs(t, 1, 8192, 256, 50)
				sv.postRecvs(t, 1, 0, 256, 60)
				ah := cl.ahTo(t, sv, 0x10, 0, 0x777)
				copy(cl.buf, "ping")
				x, err := cl.qp.Ex()
				if err != nil {
					t.Fatal(err)
				}
				x.WrStart()
				x.WRID, x.WRFlags = 1, ibv.SendSignaled
				x.WrSendImm(7)
				x.WrSetUDAddr(ah, sv.qp.QPN(), 0x42)
				x.WrSetSGE(cl.mr.LKey(), cl.mr.Addr(), 4)
				must(t, x.WrComplete())
				waitWC(t, cl.cq, 1)
				w := waitWC(t, sv.cq, 1)[0]
				if w.Status != ibv.WCSuccess || w.Imm != 7 || string(sv.buf[40:44]) != "ping" {
					t.Fatalf("server recv %+v %q", w, sv.buf[40:44])
				}
				back, err := sv.pd.CreateAHFromWC(&w, sv.buf[:verbs.GRHLen], 1)
				if err != nil {
					t.Fatal(err)
				}
				at := back.Attr()
				if at.GRH.DGID != cl.dev.Addr() || at.GRH.TrafficClass != 0x10 || at.GRH.HopLimit != 0xFF ||
					(cl.dev.Addr().Is6() && at.GRH.FlowLabel != 0x777) {
					t.Fatalf("AH from WC %+v", at)
				}
				copy(sv.buf[4096:], "pong")
				sv.send(t, back, w.SrcQP, 0x42, 2, 4096, 4)
				waitWC(t, sv.cq, 1)
				if w := waitWC(t, cl.cq, 1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != sv.qp.QPN() || string(cl.buf[8192+40:8192+44]) != "pong" {
					t.Fatalf("client recv %+v", w)
				}
				// No GRH flag: no route back.
				if _, err := sv.pd.CreateAHFromWC(&ibv.WorkCompletion{}, sv.buf[:40], 1); !errors.Is(err, verbs.EINVAL) {
					t.Fatalf("AH from a WC without GRH: %v", err)
				}
			})
		})
	}
}

// TestUDSendLocalError: a send whose SGE the MR table refuses completes
// with a local protection error and moves the QP to SQE.
func TestUDSendLocalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 12})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: 5})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: 5})
		ah := a.ahTo(t, b, 0, 0, 0)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend,
			SGList: []ibv.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey() ^ 0xFF}}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 5}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCLocProtErr {
			t.Fatalf("completion %+v, want LOC_PROT_ERR", w)
		}
		if s := a.qp.State(); s != ibv.QPStateSQE {
			t.Fatalf("state %v, want SQE", s)
		}
	})
}
