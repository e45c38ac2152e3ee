package ud_test

// UD's wire rules between nodes on the fabric: the datagram a SEND makes,
// the GRH area a receive gets, the Q_Key, length and MTU rules, loss, and
// the send queue error state (IBTA chapters 9 and 10 for UD; rxe_req.c,
// rxe_resp.c and rxe_recv.c for IB_QPT_UD; rxe-interop-facts.md §2.11).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/internal/transport/ud"
	"github.com/softnic/softnic/wire"
)

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

// TestUDGRHIPv4 checks a UD SEND between IPv4 nodes: the datagram on the
// wire (UD opcode, DETH, rxe's source port, TOS and TTL from the AH),
// and the receive side byte by byte: 20 zero bytes, the IPv4 header as
// it arrived, the payload, and the completion's flags, source QP and
// byte count (rxe-interop-facts.md §2.11).
func TestUDGRHIPv4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		rec := n.Recorder()
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 0x1111})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 0x2222})
		av := a.avTo(b, 0x28, 17, 0xABCDE)
		const size = 101
		for i := range size {
			a.buf[i] = byte(i*3 + 1)
		}
		b.postRecvs(1, 0, 4096, 7)
		a.send(av, b.qpn(), 0x2222, 1, 0, size)
		if w := a.waitWC(1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCSend || w.ByteLen != size {
			t.Fatalf("send completion %+v", w)
		}
		w := b.waitWC(1)[0]
		if w.Status != ibv.WCSuccess || w.WRID != 7 || w.Opcode != ibv.WCRecv || w.Flags != ibv.WCGRH ||
			w.SrcQP != a.qpn() || w.QPNum != b.qpn() || w.ByteLen != ud.GRHLen+size {
			t.Fatalf("recv completion %+v, want GRH flag, src_qp %#x, byte_len %d", w, a.qpn(), ud.GRHLen+size)
		}

		pkts := rec.Match(nil)
		if len(pkts) != 1 {
			t.Fatalf("%d datagrams on the wire, want 1", len(pkts))
		}
		p := &pkts[0]
		// The AH asks for hop limit 17; the wire carries the route's, as
		// Linux RoCE stacks do (transport.RouteHopLimit).
		const ttl = transport.RouteHopLimit
		pad := -size & 3
		udpLen := 12 + 8 + size + pad + 4 // BTH, DETH, payload, pad, ICRC
		tt.Check(t, p, tt.Opcode(wire.UDSendOnly), tt.DETH(0x2222, a.qpn()), tt.DestQP(b.qpn()), tt.AckReq(false),
			tt.Ports(wire.RxeSrcPort(a.qpn()), wire.UDPPort), tt.IPHeader(0x28, ttl, 0), tt.PayloadLen(size), tt.Pad())
		if p.Encap.FragOff != wire.IPv4DF || len(p.Data) != udpLen {
			t.Errorf("frag %#x, UDP payload %d bytes; want DF, %d", p.Encap.FragOff, len(p.Data), udpLen)
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
		if !bytes.Equal(b.buf[40:40+size], a.buf[:size]) {
			t.Fatal("payload differs")
		}
	})
}

// TestUDGRHIPv6 is TestUDGRHIPv4 on fd00::/64: the GRH area is the IPv6
// header with the AH's traffic class and flow label.
func TestUDGRHIPv6(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 2)
		rec := n.Recorder()
		a := newEnd(t, n, "fd00::1", opts{qkey: 0x77})
		b := newEnd(t, n, "fd00::2", opts{qkey: 0x77})
		av := a.avTo(b, 0x48, 9, 0x12345)
		const size = 1000
		for i := range size {
			a.buf[i] = byte(i ^ 0xA5)
		}
		b.postRecvs(1, 0, 2000, 1)
		a.send(av, b.qpn(), 0x77, 1, 0, size)
		a.waitWC(1)
		w := b.waitWC(1)[0]
		if w.Status != ibv.WCSuccess || w.Flags != ibv.WCGRH || w.SrcQP != a.qpn() || w.ByteLen != 40+size {
			t.Fatalf("recv completion %+v", w)
		}
		p := rec.Match(nil)[0]
		tt.Check(t, &p, tt.IPHeader(0x48, transport.RouteHopLimit, 0x12345))
		udpLen := 12 + 8 + size + 4
		want := make([]byte, 40)
		binary.BigEndian.PutUint32(want, 6<<28|0x48<<20|0x12345)
		binary.BigEndian.PutUint16(want[4:], uint16(8+udpLen))
		want[6] = 17
		want[7] = transport.RouteHopLimit
		src, dst := a.node.Addr().As16(), b.node.Addr().As16()
		copy(want[8:], src[:])
		copy(want[24:], dst[:])
		if got := b.buf[:40]; !bytes.Equal(got, want) {
			t.Fatalf("GRH\n got % x\nwant % x", got, want)
		}
		if !bytes.Equal(b.buf[40:40+size], a.buf[:size]) {
			t.Fatal("payload differs")
		}
	})
}

// TestUDQKey: a datagram with another Q_Key than the receiver's is
// dropped and counted (qkey_viol_cntr), and the sender's WR still
// succeeds; a send Q_Key with its high bit set stands for the sending
// QP's own Q_Key (IBTA 10.2.5), and a QP's own Q_Key may not have it
// (the engine's modify check, IBTA 10.2.4).
func TestUDQKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 3)
		rec := n.Recorder()
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 0x5555})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 0x5555})
		c := newEnd(t, n, "10.0.0.3", opts{qkey: 0x6666})
		ab, ac := a.avTo(b, 0, 0, 0), a.avTo(c, 0, 0, 0)
		b.postRecvs(4, 0, 256, 0)
		c.postRecvs(4, 0, 256, 0)

		// Wrong Q_Key: dropped at b, counted; the send completes.
		a.send(ab, b.qpn(), 0x5556, 1, 0, 10)
		if w := a.waitWC(1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send completion %+v", w)
		}
		b.noWC(10 * time.Millisecond)
		if got := b.ctr().DropQKey.Load(); got != 1 {
			t.Fatalf("DropQKey = %d, want 1", got)
		}

		// High bit: a's own Q_Key 0x5555 goes on the wire and b takes it.
		a.send(ab, b.qpn(), 0x80000000, 2, 0, 10)
		a.waitWC(1)
		if w := b.waitWC(1)[0]; w.Status != ibv.WCSuccess || w.SrcQP != a.qpn() {
			t.Fatalf("recv completion %+v", w)
		}
		pkts := rec.Match(nil)
		tt.Check(t, &pkts[len(pkts)-1], tt.DETH(0x5555, a.qpn()))
		// c's Q_Key differs from a's: the same WR is dropped there.
		a.send(ac, c.qpn(), 0xFFFFFFFF, 3, 0, 10)
		a.waitWC(1)
		c.noWC(10 * time.Millisecond)
		if got := c.ctr().DropQKey.Load(); got != 1 {
			t.Fatalf("c: DropQKey %d, want 1", got)
		}

		// A QP may not take a controlled Q_Key (high bit set) for itself.
		err := a.modifyErr(ibv.QPAttr{State: ibv.QPStateRTS, QKey: 0x80000005}, ibv.QPAttrState|ibv.QPAttrQKey)
		if !errors.Is(err, transport.ErrAttrValue) {
			t.Fatalf("modify to a controlled Q_Key: %v, want an attribute value error", err)
		}
		// RTS→RTS may change the Q_Key: c now accepts 0x6666 from a.
		a.modify(ibv.QPAttr{State: ibv.QPStateRTS, QKey: 0x6666}, ibv.QPAttrState|ibv.QPAttrQKey)
		if got := a.query().QKey; got != 0x6666 {
			t.Fatalf("query qkey %#x", got)
		}
		a.send(ac, c.qpn(), 0x80000001, 4, 0, 10)
		a.waitWC(1)
		if w := c.waitWC(1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("c recv %+v", w)
		}
	})
}

// TestUDSendImm: SEND_WITH_IMM carries its immediate and SE, and a
// zero-byte one still fills the GRH area.
func TestUDSendImm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 4)
		rec := n.Recorder()
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 9})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 9})
		av := a.avTo(b, 0, 0, 0)
		b.postRecvs(2, 0, 512, 10)
		copy(a.buf, "hello, datagram")
		a.post(
			ibv.SendWR{WRID: 1, Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled | ibv.SendSolicited,
				Imm: 0xDEADBEEF, SGList: []ibv.SGE{a.sge(0, 15)}, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 9},
			ibv.SendWR{WRID: 2, Opcode: ibv.WRSendWithImm, Flags: ibv.SendSignaled,
				Imm: 42, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 9})
		a.waitWC(2)
		if !b.cq.Solicited() {
			t.Error("the SEND with SE did not complete as solicited")
		}
		ws := b.waitWC(2)
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
		pkts := rec.Match(nil)
		if len(pkts) != 2 {
			t.Fatalf("%d datagrams, want 2", len(pkts))
		}
		tt.Check(t, &pkts[0], tt.Opcode(wire.UDSendOnlyImm), tt.SE(true), tt.Imm(0xDEADBEEF), tt.PSN(0))
		tt.Check(t, &pkts[1], tt.Opcode(wire.UDSendOnlyImm), tt.SE(false), tt.Imm(42), tt.PSN(1), tt.PayloadLen(0))
	})
}

// TestUDRecvTooSmall: a receive buffer that cannot hold the GRH area and
// the payload drops the datagram and keeps the WQE for the next one (rxe
// class D); a 40-byte buffer takes a zero-byte datagram.
func TestUDRecvTooSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 5)
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 1})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 1})
		av := a.avTo(b, 0, 0, 0)
		b.postRecv(
			ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.sge(0, 40+50)}},
			ibv.RecvWR{WRID: 2, SGList: []ibv.SGE{b.sge(1000, 20), b.sge(2000, 20+100)}},
			ibv.RecvWR{WRID: 3, SGList: []ibv.SGE{b.sge(3000, 40)}})
		for i := range 200 {
			a.buf[i] = byte(i + 7)
		}
		a.send(av, b.qpn(), 1, 1, 0, 51) // 91 bytes into 90: dropped
		a.waitWC(1)
		b.noWC(10 * time.Millisecond)
		if got := b.ctr().DropLength.Load(); got != 1 {
			t.Fatalf("DropLength = %d, want 1", got)
		}
		a.send(av, b.qpn(), 1, 2, 0, 50) // exactly fits WR 1
		a.send(av, b.qpn(), 1, 3, 0, 100)
		a.send(av, b.qpn(), 1, 4, 0, 0)
		a.waitWC(3)
		ws := b.waitWC(3)
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
				n := tt.NewNet(t, 6)
				rec := n.Recorder()
				a := newEnd(t, n, "10.0.0.1", opts{qkey: 1, portMTU: mtu})
				b := newEnd(t, n, "10.0.0.2", opts{qkey: 1})
				if got := a.query().PathMTU; got != mtu {
					t.Fatalf("query path MTU %v, want the port's %v", got, mtu)
				}
				av := a.avTo(b, 0, 0, 0)
				b.postRecvs(2, 0, 8192, 1)
				m := mtu.Bytes()
				a.send(av, b.qpn(), 1, 1, 0, m+1)
				if w := a.waitWC(1)[0]; w.Status != ibv.WCSuccess || w.ByteLen != uint32(m+1) {
					t.Fatalf("oversize send completion %+v, want success", w)
				}
				n.Run(10 * time.Millisecond)
				if got := rec.Count(nil); got != 0 {
					t.Fatalf("%d datagrams sent for a message over the MTU", got)
				}
				a.send(av, b.qpn(), 1, 2, 0, m)
				a.waitWC(1)
				if w := b.waitWC(1)[0]; w.Status != ibv.WCSuccess || w.WRID != 1 || w.ByteLen != uint32(40+m) {
					t.Fatalf("recv %+v", w)
				}
				// The faked send consumed a PSN, as in rxe.
				p := rec.Match(nil)[0]
				tt.Check(t, &p, tt.PSN(1), tt.PayloadLen(m))
			})
		})
	}
}

// TestUDManySenders: eight nodes send 50 datagrams each to one UD QP;
// each arrives once, intact, with the right source QP and GRH source.
func TestUDManySenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 7)
		const senders, per, size = 8, 50, 300
		r := newEnd(t, n, "10.0.1.1", opts{qkey: 0xAB, maxWR: senders * per})
		r.postRecvs(senders*per, 0, 40+size, 0)
		var ss []*end
		for i := range senders {
			ss = append(ss, newEnd(t, n, fmt.Sprintf("10.0.2.%d", i+1), opts{qkey: 0xAB}))
		}
		for i, s := range ss {
			av := s.avTo(r, 0, 0, 0)
			for k := range per {
				p := s.buf[k*size : (k+1)*size]
				for j := range p {
					p[j] = byte(i*31 + k*7 + j)
				}
				binary.BigEndian.PutUint16(p, uint16(i<<8|k))
				s.post(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend,
					SGList: []ibv.SGE{s.sge(k*size, size)}, AH: av, RemoteQPN: r.qpn(), RemoteQKey: 0xAB})
			}
		}
		ws := r.waitWC(senders * per)
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
			if w.SrcQP != ss[i].qpn() {
				t.Fatalf("datagram %d/%d src_qp %#x, want %#x", i, k, w.SrcQP, ss[i].qpn())
			}
			// The GRH area ends with the IPv4 header, its source address
			// at bytes 12-15.
			if src, want := netip.AddrFrom4([4]byte(b[32:36])), ss[i].node.Addr(); src != want {
				t.Fatalf("datagram %d/%d GRH source %v, want %v", i, k, src, want)
			}
			if !bytes.Equal(b[42:], ss[i].buf[k*size+2:(k+1)*size]) {
				t.Fatalf("datagram %d/%d payload differs", i, k)
			}
		}
		if got := r.ctr().DropNoRecvWQE.Load(); got != 0 {
			t.Fatalf("DropNoRecvWQE = %d", got)
		}
	})
}

// TestUDLoss: on a lossy path datagrams simply vanish: every send
// completes successfully, each datagram that arrives is intact and
// unique, and received + lost = sent.
func TestUDLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seed, count, size = 8, 300, 64
		t.Logf("seed %d", seed)
		n := tt.NewNet(t, seed)
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 3, sigAll: true})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 3})
		n.Fabric().SetImpairment(fabric.Impairment{Loss: 0.25})
		av := a.avTo(b, 0, 0, 0)
		b.postRecvs(count, 0, 40+size, 0)
		for k := range count {
			binary.BigEndian.PutUint32(a.buf[k*size:], uint32(k))
			for j := 4; j < size; j++ {
				a.buf[k*size+j] = byte(k + j)
			}
			a.post(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend,
				SGList: []ibv.SGE{a.sge(k*size, size)}, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 3})
		}
		for _, w := range a.waitWC(count) {
			if w.Status != ibv.WCSuccess {
				t.Fatalf("send completion %+v", w)
			}
		}
		n.Run(100 * time.Millisecond)
		got := map[uint32]bool{}
		for _, w := range b.cq.Take(-1) {
			d := b.buf[int(w.WRID)*(40+size)+40:][:size]
			id := binary.BigEndian.Uint32(d)
			if w.Status != ibv.WCSuccess || id >= count || got[id] {
				t.Fatalf("completion %+v carries datagram %d (unexpected or twice)", w, id)
			}
			if !bytes.Equal(d, a.buf[int(id)*size:][:size]) {
				t.Fatalf("datagram %d differs", id)
			}
			got[id] = true
		}
		lost := n.Fabric().Stats().DropImpairment.Packets
		if len(got) == 0 || lost == 0 || uint64(len(got))+lost != count {
			t.Fatalf("received %d, lost %d, sent %d", len(got), lost, count)
		}
		t.Logf("received %d of %d", len(got), count)
	})
}

// TestUDSendLocalError: a send whose SGE the MR table refuses completes
// with a local protection error and moves the QP to SQE, the send queue
// error state of the unreliable services (IBTA 10.3.1; rxe moves it to
// ERR): the WRs behind it and those posted in SQE are flushed, receives
// still complete, and a modify to RTS resumes sending.
func TestUDSendLocalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 12)
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 5})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 5})
		av := a.avTo(b, 0, 0, 0)
		bad := a.sge(0, 8)
		bad.LKey ^= 0xFF
		a.post(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, SGList: []ibv.SGE{bad}, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 5},
			ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.sge(0, 8)}, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 5})
		ws := a.waitWC(2)
		if ws[0].WRID != 1 || ws[0].Status != ibv.WCLocProtErr || ws[1].WRID != 2 || ws[1].Status != ibv.WCWRFlushErr {
			t.Fatalf("completions %+v, want LOC_PROT_ERR then WR_FLUSH_ERR", ws)
		}
		if s := a.state(); s != ibv.QPStateSQE {
			t.Fatalf("state %v, want SQE", s)
		}
		if got := a.ctr().SendErr.Load(); got != 1 {
			t.Errorf("send_err %d, want 1", got)
		}
		// In SQE, sends are flushed and receives still complete.
		a.send(av, b.qpn(), 5, 3, 0, 8)
		if w := a.waitWC(1)[0]; w.WRID != 3 || w.Status != ibv.WCWRFlushErr {
			t.Fatalf("send in SQE: %+v", w)
		}
		a.postRecvs(1, 4096, 256, 100)
		b.send(b.avTo(a, 0, 0, 0), a.qpn(), 5, 1, 0, 4)
		b.waitWC(1)
		if w := a.waitWC(1)[0]; w.Status != ibv.WCSuccess || w.WRID != 100 {
			t.Fatalf("receive in SQE: %+v", w)
		}
		// SQE → RTS resumes.
		a.modify(ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState)
		a.send(av, b.qpn(), 5, 4, 0, 8)
		if w := a.waitWC(1)[0]; w.Status != ibv.WCSuccess {
			t.Fatalf("send after SQE→RTS: %+v", w)
		}
	})
}

// TestUDIdlePostRunsNow: one WR posted to an idle send queue asks the
// engine to send it at once on the posting goroutine (transport.RunNow),
// so its completion is queued before the post returns, as rxe's
// post_send runs its requester at once (pyverbs' test_resize_cq counts
// the completions right after posting); several WRs, or a post behind
// queued work, leave the sending to the processor (RunLater).
func TestUDIdlePostRunsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a := newEnd(t, n, "10.0.0.1", opts{qkey: 0x1111})
		b := newEnd(t, n, "10.0.0.2", opts{qkey: 0x2222})
		av := a.avTo(b, 0, 64, 0)
		wr := func(id uint64) ibv.SendWR {
			return ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.sge(0, 64)}, AH: av, RemoteQPN: b.qpn(), RemoteQKey: 0x2222}
		}
		for _, c := range []struct {
			name string
			wrs  []ibv.SendWR
			want transport.Run
		}{
			{"one WR to an idle queue", []ibv.SendWR{wr(1)}, transport.RunNow},
			{"one WR behind a queued one", []ibv.SendWR{wr(2)}, transport.RunLater},
		} {
			if _, run, err := a.qp.PostSend(c.wrs); err != nil || run != c.want {
				t.Errorf("%s: run %v, err %v; want %v", c.name, run, err, c.want)
			}
		}
		a.run(transport.RunLater)
		a.waitWC(2)
		if _, run, err := a.qp.PostSend([]ibv.SendWR{wr(3), wr(4)}); err != nil || run != transport.RunLater {
			t.Errorf("two WRs to an idle queue: run %v, err %v; want later", run, err)
		}
	})
}
