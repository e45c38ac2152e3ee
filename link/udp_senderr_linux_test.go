package link_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
)

var (
	lo4a = netip.MustParseAddr("127.0.0.1")
	lo4b = netip.MustParseAddr("127.0.0.2")
)

// failFirst returns a send fault hook that makes the first n sendmmsg
// calls fail exactly as the kernel fails them, -1 with errno e, and
// counts the calls it failed.
func failFirst(n int32, e syscall.Errno, failed *atomic.Int32) func(int) (uintptr, syscall.Errno, bool) {
	var calls atomic.Int32
	return func(int) (uintptr, syscall.Errno, bool) {
		if calls.Add(1) <= n {
			failed.Add(1)
			return ^uintptr(0), e, true
		}
		return 0, 0, false
	}
}

// TestUDPRCSendErrorsRecover: the first sends of an RC WRITE fail with
// ENOBUFS (injected at the syscall: the kernel never returns ENOBUFS to
// softnic's socket, whose udp_send_skb swallows it without IP_RECVERR;
// TestKernelENOBUFSSwallowed shows it). RC treats the packets as lost:
// the retransmit timer sends them again and the WRITE completes with
// its data right, every dropped datagram counted by the link (ENOBUFS)
// and by the device (send_err, as rxe_xmit_packet counts it).
func TestUDPRCSendErrorsRecover(t *testing.T) {
	la, lb := listenUDPPair(t, link.UDPConfig{}, lo4a, lo4b)
	var failed atomic.Int32
	link.SetSendFault(la, failFirst(3, syscall.ENOBUFS, &failed))
	a := openUDPEnd(t, la, la, lb.Port())
	b := openUDPEnd(t, lb, lb, la.Port())
	defer a.dev.Close()
	defer b.dev.Close()
	connectUDP(t, a, b)
	connectUDP(t, b, a)

	const n = 64 << 10
	for i := range a.buf[:n] {
		a.buf[i] = byte(i*13 + 1)
	}
	_, err := a.qp.PostSend(ibv.SendWR{WRID: 7, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	check(t, err)
	if wc := pollWC(t, a.cq); wc.WRID != 7 {
		t.Fatalf("completion %+v", wc)
	}
	// The responder's write reached b.buf through the kernel, which the
	// race detector cannot see: stop b's processors before reading it.
	b.dev.Close()
	if !bytes.Equal(b.buf[:n], a.buf[:n]) {
		t.Fatal("written bytes differ")
	}
	st, ctr := la.Stats(), a.dev.Counters()
	if failed.Load() != 3 || st.TxErrnos[link.ErrnoENOBUFS] == 0 || st.TxErrors != st.TxErrnos[link.ErrnoENOBUFS] {
		t.Fatalf("%d calls failed; link errors %d, by errno %v", failed.Load(), st.TxErrors, st.TxErrnos)
	}
	if got := ctr.SendErr; got != st.TxErrors {
		t.Fatalf("send_err %d, want the %d datagrams the link dropped", got, st.TxErrors)
	}
	if ctr.Timeouts == 0 {
		t.Fatal("recovered without a retransmit timeout")
	}
	t.Logf("link %+v; send_err %d, timeouts %d, retransmits %d", st, ctr.SendErr, ctr.Timeouts, ctr.Retransmits)
}

// udpUDEnd is a UD QP on a device over a UDP link.
type udpUDEnd struct {
	link *link.UDPLink
	dev  *verbs.Device
	pd   *verbs.PD
	cq   *verbs.CQ
	qp   *verbs.QP
	buf  []byte
	mr   *verbs.MR
}

func openUDPUDEnd(t *testing.T, l *link.UDPLink, peerPort uint16) *udpUDEnd {
	t.Helper()
	dev, err := verbs.Open(verbs.Config{Link: l, PeerPort: peerPort})
	check(t, err)
	t.Cleanup(func() { dev.Close() })
	e := &udpUDEnd{link: l, dev: dev, buf: make([]byte, 1<<16)}
	e.pd, err = dev.AllocPD()
	check(t, err)
	e.cq, err = dev.CreateCQ(256, nil)
	check(t, err)
	e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite)
	check(t, err)
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	check(t, err)
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, QKey: 0x11},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey))
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState))
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState|ibv.QPAttrSQPSN))
	return e
}

// sendUD posts a signaled UD SEND of buf[:n] from a to b's QP.
func (a *udpUDEnd) sendUD(t *testing.T, b *udpUDEnd, wrid uint64, n int) {
	t.Helper()
	ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), HopLimit: 64}})
	check(t, err)
	_, err = a.qp.PostSend(ibv.SendWR{WRID: wrid, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, n)}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11})
	check(t, err)
}

// waitWC waits, in real time, for one completion on cq, whatever its
// status.
func waitWC(t *testing.T, cq *verbs.CQ) ibv.WorkCompletion {
	t.Helper()
	wc := make([]ibv.WorkCompletion, 1)
	deadline := time.Now().Add(10 * time.Second)
	for cq.Poll(wc) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no completion within 10s")
		}
		time.Sleep(50 * time.Microsecond)
	}
	return wc[0]
}

// TestUDPUDSendErrors: what a UD QP does when its datagram fails to
// send, as rxe_requester does (transport/ud sendLocked): an error from
// the output path (ENOBUFS, injected: see TestUDPRCSendErrorsRecover)
// sends the same datagram again until it goes, and the WQE completes
// successfully once, the receiver getting it once; no route
// (EHOSTUNREACH, injected here, from the kernel in TestKernelSendErrnos)
// fails the WQE with a local QP operation error.
func TestUDPUDSendErrors(t *testing.T) {
	t.Run("ENOBUFS", func(t *testing.T) {
		la, lb := listenUDPPair(t, link.UDPConfig{}, lo4a, lo4b)
		var failed atomic.Int32
		link.SetSendFault(la, failFirst(5, syscall.ENOBUFS, &failed))
		a, b := openUDPUDEnd(t, la, lb.Port()), openUDPUDEnd(t, lb, la.Port())
		_, err := b.qp.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}})
		check(t, err)
		copy(a.buf, "datagram after five failed sends")
		a.sendUD(t, b, 1, 32)
		if wc := waitWC(t, a.cq); wc.Status != ibv.WCSuccess || wc.WRID != 1 {
			t.Fatalf("send completion %+v", wc)
		}
		wc := waitWC(t, b.cq)
		if wc.Status != ibv.WCSuccess || wc.ByteLen != 40+32 || !bytes.Equal(b.buf[40:72], a.buf[:32]) {
			t.Fatalf("receive completion %+v, data %q", wc, b.buf[40:72])
		}
		st := la.Stats()
		if failed.Load() != 5 || st.TxErrnos[link.ErrnoENOBUFS] != 5 || st.TxPackets != 1 {
			t.Fatalf("%d calls failed; link %+v", failed.Load(), st)
		}
		if ctr := a.dev.Counters(); ctr.SendErr != 5 || ctr.SentPkts != 1 {
			t.Fatalf("send_err %d, sent_pkts %d; want 5 and 1", ctr.SendErr, ctr.SentPkts)
		}
		// Nothing more arrives: the datagram went once.
		check(t, a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if lb.Stats().RxPackets != 1 {
			t.Fatalf("receiver got %d datagrams", lb.Stats().RxPackets)
		}
	})
	t.Run("head fails, later ones go", func(t *testing.T) {
		// Three WRs of three sizes (no GSO send groups them) leave in
		// one sendmmsg; it fails on the first with ENOBUFS and the link
		// sends the other two. The QP sends the first again and
		// completes all three in order; each arrives once.
		la, lb := listenUDPPair(t, link.UDPConfig{}, lo4a, lo4b)
		var failed atomic.Int32
		link.SetSendFault(la, failFirst(1, syscall.ENOBUFS, &failed))
		a, b := openUDPUDEnd(t, la, lb.Port()), openUDPUDEnd(t, lb, la.Port())
		for i := range 3 {
			_, err := b.qp.PostRecv(ibv.RecvWR{WRID: uint64(10 + i), SGList: []ibv.SGE{b.mr.SGE(i*4096, 4096)}})
			check(t, err)
		}
		ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), HopLimit: 64}})
		check(t, err)
		var wrs []ibv.SendWR
		for i := range 3 {
			wrs = append(wrs, ibv.SendWR{WRID: uint64(i + 1), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 100*(i+1))}, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: 0x11})
		}
		_, err = a.qp.PostSend(wrs...)
		check(t, err)
		for i := range 3 {
			if wc := waitWC(t, a.cq); wc.Status != ibv.WCSuccess || wc.WRID != uint64(i+1) {
				t.Fatalf("send completion %d: %+v", i, wc)
			}
		}
		// The three WRs were posted under one lock, so one pass built
		// all three: the resent first arrives last (loopback keeps order).
		var lens []uint32
		for range 3 {
			wc := waitWC(t, b.cq)
			if wc.Status != ibv.WCSuccess {
				t.Fatalf("receive completion %+v", wc)
			}
			lens = append(lens, wc.ByteLen-40)
		}
		if fmt.Sprint(lens) != "[200 300 100]" {
			t.Fatalf("received lengths %v, want [200 300 100]", lens)
		}
		if st := la.Stats(); failed.Load() != 1 || st.TxPackets != 3 || st.TxErrnos[link.ErrnoENOBUFS] < 1 {
			t.Fatalf("%d calls failed; link %+v", failed.Load(), st)
		}
	})
	t.Run("EHOSTUNREACH", func(t *testing.T) {
		la, lb := listenUDPPair(t, link.UDPConfig{}, lo4a, lo4b)
		var failed atomic.Int32
		link.SetSendFault(la, failFirst(1, syscall.EHOSTUNREACH, &failed))
		a, b := openUDPUDEnd(t, la, lb.Port()), openUDPUDEnd(t, lb, la.Port())
		a.sendUD(t, b, 1, 32)
		if wc := waitWC(t, a.cq); wc.Status != ibv.WCLocQPOpErr || wc.WRID != 1 {
			t.Fatalf("send completion %+v, want a local QP operation error", wc)
		}
		if attr, _ := a.qp.Query(); attr.State != ibv.QPStateSQE {
			t.Fatalf("QP in %v after the error, want SQE", attr.State)
		}
		if st := la.Stats(); st.TxErrnos[link.ErrnoEHOSTUNREACH] != 1 || a.dev.Counters().SendErr < 1 {
			t.Fatalf("link %+v, send_err %d", st, a.dev.Counters().SendErr)
		}
	})
}
