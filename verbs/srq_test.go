package verbs_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// srqServer is a device whose QPs share one SRQ.
type srqServer struct {
	*end
	srq  *verbs.SRQ
	slot int // bytes per receive WQE
}

// newSRQServer opens a device at addr with an SRQ of maxWR WQEs of slot
// bytes each, all posted (WRID = slot index).
func newSRQServer(t testing.TB, f *fabric.Fabric, addr string, maxWR, slot int) *srqServer {
	t.Helper()
	dev := openDev(t, f, addr, 0)
	s := &srqServer{end: &end{dev: dev, buf: make([]byte, maxWR*slot)}, slot: slot}
	var err error
	if s.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = dev.CreateCQ(8192, nil); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(s.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if s.srq, err = s.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: uint32(maxWR), MaxSGE: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range maxWR {
		s.repost(t, i)
	}
	return s
}

func (s *srqServer) repost(t testing.TB, i int) {
	t.Helper()
	must2(t)(s.srq.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{s.mr.SGE(i*s.slot, s.slot)}}))
}

// qp makes a QP of type typ on the server's SRQ.
func (s *srqServer) qp(t testing.TB, typ ibv.QPType) *verbs.QP {
	t.Helper()
	qp, err := s.pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// rcClient opens a device at addr with a QP of type o.typ connected to a
// new QP of s's SRQ; it returns the client end and the server-side QP.
func rcClient(t testing.TB, f *fabric.Fabric, addr string, s *srqServer, o pairOpts) (*end, *verbs.QP) {
	t.Helper()
	o.defaults()
	c := newEnd(t, f, netip.MustParseAddr(addr), o)
	peer := &end{dev: s.dev, qp: s.qp(t, o.typ)}
	connect(t, c, peer, o, 0, 0)
	connect(t, peer, c, o, 0, 0)
	return c, peer.qp
}

// fillMsg writes message (client, seq) of n bytes into b: an 8-byte header
// and a pattern.
func fillMsg(b []byte, client, seq int) {
	binary.BigEndian.PutUint32(b, uint32(client))
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	for j := 8; j < len(b); j++ {
		b[j] = byte(client*13 + seq*7 + j)
	}
}

// checkMsg verifies a message fillMsg wrote and returns its client and seq.
func checkMsg(t testing.TB, b []byte) (client, seq int) {
	t.Helper()
	client, seq = int(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:]))
	for j := 8; j < len(b); j++ {
		if b[j] != byte(client*13+seq*7+j) {
			t.Fatalf("message %d/%d: byte %d is %#x", client, seq, j, b[j])
		}
	}
	return client, seq
}

// TestSRQManyRCQPs: six RC QPs on one SRQ of 32 WQEs take 600 messages
// of up to three packets; the server reposts each WQE once it has checked
// it, and the SRQ running dry makes the responders RNR-NAK. Every message
// arrives once, intact and, per QP, in order.
func TestSRQManyRCQPs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 21})
		defer f.Close()
		const clients, per, slot = 6, 100, 3000
		s := newSRQServer(t, f, "10.0.0.100", 32, slot)
		o := pairOpts{typ: ibv.QPTypeRC, mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7, maxWR: per, bufSize: per * slot}
		var cs []*end
		serverQP := map[uint32]int{} // server QPN → client
		for i := range clients {
			c, sq := rcClient(t, f, fmt.Sprintf("10.0.0.%d", i+1), s, o)
			cs = append(cs, c)
			serverQP[sq.QPN()] = i
		}
		for i, c := range cs {
			for k := range per {
				n := 8 + (k*397+i*101)%(slot-8)
				fillMsg(c.buf[k*slot:k*slot+n], i, k)
				must2(t)(c.qp.PostSend(ibv.SendWR{WRID: uint64(k), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
					SGList: []ibv.SGE{c.mr.SGE(k*slot, n)}}))
			}
		}
		next := make([]int, clients)
		wc := make([]ibv.WorkCompletion, 32)
		deadline := time.Now().Add(time.Minute)
		for got := 0; got < clients*per; {
			k := s.cq.Poll(wc)
			if k == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("received %d of %d messages", got, clients*per)
				}
				time.Sleep(time.Millisecond)
				continue
			}
			for _, w := range wc[:k] {
				if w.Status != ibv.WCSuccess || w.Opcode != ibv.WCRecv {
					t.Fatalf("completion %+v", w)
				}
				i := int(w.WRID)
				client, seq := checkMsg(t, s.buf[i*slot:i*slot+int(w.ByteLen)])
				if want, ok := serverQP[w.QPNum]; !ok || want != client {
					t.Fatalf("message of client %d completed on QP %#x", client, w.QPNum)
				}
				if seq != next[client] {
					t.Fatalf("client %d: message %d, want %d", client, seq, next[client])
				}
				next[client]++
				got++
				s.repost(t, i)
			}
		}
		if s.dev.Counters().SendRNRErr == 0 {
			t.Log("the SRQ never ran dry (no RNR NAK)")
		}
		for _, c := range cs {
			for _, w := range waitWC(t, c.cq, per) {
				if w.Status != ibv.WCSuccess {
					t.Fatalf("client completion %+v", w)
				}
			}
		}
	})
}

// limitEvents returns how many SRQ_LIMIT_REACHED events for srq are
// queued, and the QPNs of LAST_WQE_REACHED events.
func limitEvents(dev *verbs.Device, srq *verbs.SRQ) (limits int, lastWQE []uint32) {
	evs, _ := dev.AsyncEvents()
	for _, ev := range evs {
		switch ev.Type {
		case ibv.EventSRQLimitReached:
			if ev.Other == srq {
				limits++
			}
		case ibv.EventQPLastWQEReached:
			lastWQE = append(lastWQE, ev.QPN)
		}
	}
	return limits, lastWQE
}

// TestSRQLimitEvent: the limit event fires once per arming, when a take
// leaves fewer WQEs than the limit, and not again until Modify re-arms
// it; Query shows the armed limit and 0 once it fired; limit 0 disarms.
func TestSRQLimitEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 22})
		defer f.Close()
		const slot = 256
		s := newSRQServer(t, f, "10.0.0.100", 16, slot)
		c, _ := rcClient(t, f, "10.0.0.1", s, pairOpts{typ: ibv.QPTypeRC, timeout: 14, retry: 7, rnr: 7})
		sent := 0
		consume := func(n int) {
			t.Helper()
			for range n {
				must2(t)(c.qp.PostSend(ibv.SendWR{WRID: uint64(sent), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
					SGList: []ibv.SGE{c.mr.SGE(0, 16)}}))
				sent++
			}
			waitWC(t, c.cq, n) // every send is acknowledged, so its WQE was taken
			waitWC(t, s.cq, n)
		}
		limit := func() uint32 {
			a, err := s.srq.Query()
			must(t, err)
			return a.SRQLimit
		}
		arm := func(l uint32) { must(t, s.srq.Modify(&ibv.SRQAttr{SRQLimit: l}, ibv.SRQAttrLimit)) }

		if l := limit(); l != 0 {
			t.Fatalf("a new SRQ has limit %d, want 0 (disarmed)", l)
		}
		limitEvents(s.dev, s.srq) // drop the port event
		arm(10)                   // 16 posted
		if l := limit(); l != 10 {
			t.Fatalf("armed limit %d, want 10", l)
		}
		consume(6) // 10 left: not below the limit
		if n, _ := limitEvents(s.dev, s.srq); n != 0 {
			t.Fatalf("%d limit events with 10 of 10 left", n)
		}
		consume(1) // 9 left
		if n, _ := limitEvents(s.dev, s.srq); n != 1 {
			t.Fatalf("%d limit events after dropping below the limit, want 1", n)
		}
		if l := limit(); l != 0 {
			t.Fatalf("limit %d after the event, want 0", l)
		}
		consume(3) // 6 left: no second event without re-arming
		if n, _ := limitEvents(s.dev, s.srq); n != 0 {
			t.Fatalf("%d more limit events without re-arming", n)
		}

		arm(4) // 6 left
		consume(2)
		if n, _ := limitEvents(s.dev, s.srq); n != 0 {
			t.Fatalf("%d limit events with 4 of 4 left", n)
		}
		consume(1) // 3 left
		if n, _ := limitEvents(s.dev, s.srq); n != 1 {
			t.Fatalf("%d limit events after re-arming, want 1", n)
		}

		// Disarming with 0: no event.
		for i := range 10 {
			s.repost(t, i) // 13 posted
		}
		arm(12)
		arm(0)
		consume(5)
		if n, _ := limitEvents(s.dev, s.srq); n != 0 {
			t.Fatalf("%d limit events while disarmed", n)
		}
	})
}

// TestSRQMixedTransports: an RC, a UC and a UD QP share one SRQ; each
// takes the next WQE in posting order. A UD datagram too big for the SRQ
// WQE it takes completes that WQE with an error (rxe: class E).
func TestSRQMixedTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 23})
		defer f.Close()
		const slot = 2048
		s := newSRQServer(t, f, "10.0.0.100", 8, slot)
		rc, rcQP := rcClient(t, f, "10.0.0.1", s, pairOpts{typ: ibv.QPTypeRC, timeout: 14, retry: 7, rnr: 7})
		uc, ucQP := rcClient(t, f, "10.0.0.2", s, pairOpts{typ: ibv.QPTypeUC})
		udQP := s.qp(t, ibv.QPTypeUD)
		udToRTS(t, udQP, 0x99)
		ud := newUDEnd(t, f, "10.0.0.3", udOpts{qkey: 0x99})
		ah, err := ud.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: s.dev.Addr()}})
		if err != nil {
			t.Fatal(err)
		}

		fillMsg(rc.buf[:1500], 0, 0)
		fillMsg(uc.buf[:1200], 1, 0)
		fillMsg(ud.buf[:900], 2, 0)
		var sw []ibv.WorkCompletion
		must2(t)(rc.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{rc.mr.SGE(0, 1500)}}))
		sw = append(sw, waitWC(t, s.cq, 1)...)
		must2(t)(uc.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSendWithImm, Imm: 5, Flags: ibv.SendSignaled, SGList: []ibv.SGE{uc.mr.SGE(0, 1200)}}))
		sw = append(sw, waitWC(t, s.cq, 1)...)
		ud.send(t, ah, udQP.QPN(), 0x99, 1, 0, 900)
		sw = append(sw, waitWC(t, s.cq, 1)...)
		for _, c := range []*verbs.CQ{rc.cq, uc.cq, ud.cq} {
			if w := waitWC(t, c, 1)[0]; w.Status != ibv.WCSuccess {
				t.Fatalf("client completion %+v", w)
			}
		}
		for i, want := range []struct {
			qpn  uint32
			n    uint32
			off  int
			flag ibv.WCFlags
		}{{rcQP.QPN(), 1500, 0, 0}, {ucQP.QPN(), 1200, 0, ibv.WCWithImm}, {udQP.QPN(), 40 + 900, 40, ibv.WCGRH}} {
			w := sw[i]
			if w.Status != ibv.WCSuccess || w.WRID != uint64(i) || w.QPNum != want.qpn || w.ByteLen != want.n || w.Flags != want.flag {
				t.Fatalf("server completion %d: %+v, want WQE %d on QP %#x, %d bytes, flags %v", i, w, i, want.qpn, want.n, want.flag)
			}
			if c, q := checkMsg(t, s.buf[i*slot+want.off:i*slot+int(want.n)]); c != i || q != 0 {
				t.Fatalf("WQE %d holds %d/%d", i, c, q)
			}
		}

		// A UD datagram of 2040 bytes does not fit a 2048-byte WQE with
		// its GRH: the SRQ WQE it took completes in error.
		ud.send(t, ah, udQP.QPN(), 0x99, 2, 0, 2040)
		waitWC(t, ud.cq, 1)
		w := waitWC(t, s.cq, 1)[0]
		if w.Status != ibv.WCRemInvReqErr || w.WRID != 3 || w.QPNum != udQP.QPN() {
			t.Fatalf("too-big datagram on an SRQ: %+v, want WQE 3 with REM_INV_REQ_ERR", w)
		}
		if s := udQP.State(); s != ibv.QPStateRTS {
			t.Fatalf("UD QP state %v after a length error, want RTS", s)
		}
		if got := s.srq.Len(); got != 4 {
			t.Fatalf("%d WQEs left in the SRQ, want 4", got)
		}
	})
}

// TestSRQRules: the checks of CreateSRQ, Modify, PostRecv and Destroy,
// and of QPs on an SRQ.
func TestSRQRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 24})
		defer f.Close()
		s := newSRQServer(t, f, "10.0.0.100", 8, 64)
		max := s.dev.QueryDevice()
		for _, a := range []verbs.SRQInitAttr{{MaxWR: 0, MaxSGE: 1}, {MaxWR: uint32(max.MaxSRQWR) + 1, MaxSGE: 1},
			{MaxWR: 4, MaxSGE: uint32(max.MaxSRQSGE) + 1}} {
			if srq, err := s.pd.CreateSRQ(a); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("CreateSRQ(%+v) = %v, %v; want EINVAL", a, srq, err)
			}
		}
		a, err := s.srq.Query()
		if err != nil || a.MaxWR != 8 || a.MaxSGE != 1 || a.SRQLimit != 0 {
			t.Fatalf("Query = %+v, %v", a, err)
		}
		// Full: ENOMEM. Too many SGEs: EINVAL.
		if n, err := s.srq.PostRecv(ibv.RecvWR{WRID: 99}); n != 0 || !errors.Is(err, verbs.ENOMEM) {
			t.Fatalf("post to a full SRQ: %d, %v", n, err)
		}
		// Resize: not below the WRs posted, not above the maximum.
		for _, n := range []uint32{7, 0, uint32(max.MaxSRQWR) + 1} {
			if err := s.srq.Modify(&ibv.SRQAttr{MaxWR: n}, ibv.SRQAttrMaxWR); !errors.Is(err, verbs.EINVAL) {
				t.Errorf("resize to %d: %v, want EINVAL", n, err)
			}
		}
		must(t, s.srq.Modify(&ibv.SRQAttr{MaxWR: 12}, ibv.SRQAttrMaxWR))
		must2(t)(s.srq.PostRecv(ibv.RecvWR{WRID: 8, SGList: []ibv.SGE{s.mr.SGE(0, 8)}}))
		if n, err := s.srq.PostRecv(ibv.RecvWR{WRID: 10, SGList: []ibv.SGE{s.mr.SGE(0, 8), s.mr.SGE(8, 8)}}); n != 0 || !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post of 2 SGEs to a 1-SGE SRQ: %d, %v", n, err)
		}
		// Limits: not above max_wr; max_wr not below the armed limit.
		if err := s.srq.Modify(&ibv.SRQAttr{SRQLimit: 13}, ibv.SRQAttrLimit); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("limit above max_wr: %v", err)
		}
		must(t, s.srq.Modify(&ibv.SRQAttr{SRQLimit: 11}, ibv.SRQAttrLimit))
		if err := s.srq.Modify(&ibv.SRQAttr{MaxWR: 10}, ibv.SRQAttrMaxWR); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("max_wr below the armed limit: %v", err)
		}
		if err := s.srq.Modify(&ibv.SRQAttr{}, 1<<5); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("unknown mask bit: %v", err)
		}
		if a, _ := s.srq.Query(); a.MaxWR != 12 || a.SRQLimit != 11 {
			t.Fatalf("Query = %+v", a)
		}

		// A QP on the SRQ: no RQ of its own.
		qp := s.qp(t, ibv.QPTypeRC)
		if at, init := qp.Query(); at.Cap.MaxRecvWR != 0 || init.SRQ != s.srq {
			t.Fatalf("QP on an SRQ: cap %+v, init SRQ %v", at.Cap, init.SRQ)
		}
		must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex|ibv.QPAttrAccessFlags))
		if _, err := qp.PostRecv(ibv.RecvWR{WRID: 1}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("PostRecv on a QP with an SRQ: %v, want EINVAL", err)
		}
		// Destroy: EBUSY while the QP uses it; the PD is held.
		if err := s.srq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Fatalf("Destroy with a QP attached: %v, want EBUSY", err)
		}
		must(t, qp.Destroy())
		if err := s.pd.Dealloc(); !errors.Is(err, verbs.EBUSY) {
			t.Fatalf("Dealloc of the SRQ's PD: %v, want EBUSY", err)
		}
		must(t, s.srq.Destroy())
		if err := s.srq.Destroy(); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("second Destroy: %v, want EINVAL", err)
		}
		if _, err := s.srq.PostRecv(ibv.RecvWR{}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("post to a destroyed SRQ: %v", err)
		}
		if _, err := s.srq.Query(); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("query of a destroyed SRQ: %v", err)
		}
		if _, err := s.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("CreateQP on a destroyed SRQ: %v", err)
		}
		if _, err := s.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq, SRQ: &verbs.SRQ{}}); !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("CreateQP on a zero SRQ: %v", err)
		}
	})
}

// TestSRQLastWQEReached: a QP on an SRQ that enters ERR, by a modify or
// on its own after a fatal error, raises LAST_WQE_REACHED once; a QP
// without an SRQ does not.
func TestSRQLastWQEReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 25})
		defer f.Close()
		s := newSRQServer(t, f, "10.0.0.100", 8, 256)
		c, sq := rcClient(t, f, "10.0.0.1", s, pairOpts{typ: ibv.QPTypeRC, timeout: 14, retry: 7, rnr: 7})
		limitEvents(s.dev, s.srq)

		// On its own: a WRITE with a bad rkey makes the responder's QP go
		// to ERR (class C, remote access error).
		must2(t)(c.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{c.mr.SGE(0, 8)}, RemoteAddr: s.mr.Addr(), RKey: s.mr.RKey() ^ 0x80}))
		if w := waitWC(t, c.cq, 1)[0]; w.Status != ibv.WCRemAccessErr {
			t.Fatalf("write completion %+v", w)
		}
		if st := sq.State(); st != ibv.QPStateErr {
			t.Fatalf("server QP %v, want ERR", st)
		}
		if _, last := limitEvents(s.dev, s.srq); len(last) != 1 || last[0] != sq.QPN() {
			t.Fatalf("LAST_WQE_REACHED for %v, want [%#x]", last, sq.QPN())
		}
		// Staying in ERR: no second event. RESET and ERR again: one more.
		must(t, sq.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if _, last := limitEvents(s.dev, s.srq); len(last) != 0 {
			t.Fatalf("LAST_WQE_REACHED again in ERR: %v", last)
		}
		must(t, sq.Modify(&ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState))
		must(t, sq.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1}, ibv.QPAttrState|ibv.QPAttrPort|ibv.QPAttrPKeyIndex|ibv.QPAttrAccessFlags))
		must(t, sq.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if _, last := limitEvents(s.dev, s.srq); len(last) != 1 || last[0] != sq.QPN() {
			t.Fatalf("LAST_WQE_REACHED after a modify to ERR: %v", last)
		}
		// The SRQ's WQEs were not flushed with the QP.
		if n := s.srq.Len(); n != 8 {
			t.Fatalf("%d WQEs left in the SRQ, want 8", n)
		}
		// A QP without an SRQ: no event.
		must(t, c.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		evs, _ := c.dev.AsyncEvents()
		for _, ev := range evs {
			if ev.Type == ibv.EventQPLastWQEReached {
				t.Fatalf("LAST_WQE_REACHED for a QP without an SRQ: %+v", ev)
			}
		}
	})
}
