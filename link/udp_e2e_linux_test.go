package link_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/tools/decode"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// udpEnd is one side of a connected pair over real UDP.
type udpEnd struct {
	link *link.UDPLink
	dev  *verbs.Device
	pd   *verbs.PD
	cq   *verbs.CQ
	qp   *verbs.QP
	buf  []byte
	mr   *verbs.MR
}

// listenUDPPair binds links on a and b: on port 4791 when it is free (so
// "softnic decode" recognises the capture), else on another free port;
// when a == b (IPv6 has one loopback address) b takes the next port.
func listenUDPPair(t testing.TB, cfg link.UDPConfig, a, b netip.Addr) (la, lb *link.UDPLink) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for try := 0; try < 100; try++ {
		port := uint16(wire.UDPPort)
		if try > 0 || a == b {
			port = uint16(20000 + r.IntN(30000))
		}
		ca, cb := cfg, cfg
		ca.Addr, ca.Port = a, port
		cb.Addr, cb.Port = b, port
		if a == b {
			cb.Port++
		}
		la, err := link.ListenUDP(ca)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Skipf("cannot bind %v: %v", a, err)
		}
		lb, err := link.ListenUDP(cb)
		if errors.Is(err, syscall.EADDRINUSE) {
			la.Close()
			continue
		}
		if err != nil {
			la.Close()
			t.Fatal(err)
		}
		return la, lb
	}
	t.Fatalf("no free UDP port on %v and %v", a, b)
	return nil, nil
}

// openUDPEnd opens a device on link (l or a wrapper of it) that sends to
// peerPort.
func openUDPEnd(t testing.TB, l *link.UDPLink, link link.Link, peerPort uint16) *udpEnd {
	t.Helper()
	dev, err := verbs.Open(verbs.Config{Link: link, PeerPort: peerPort, Name: fmt.Sprintf("softnic-%v-%d", l.LocalAddr(), l.Port())})
	if err != nil {
		t.Fatal(err)
	}
	e := &udpEnd{link: l, dev: dev, buf: make([]byte, 1<<20)}
	check(t, err)
	e.pd, err = dev.AllocPD()
	check(t, err)
	e.cq, err = dev.CreateCQ(1024, nil)
	check(t, err)
	e.mr, err = e.pd.RegMR(e.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic)
	check(t, err)
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: ibv.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	check(t, err)
	return e
}

// connectUDP moves e's QP to RTS towards peer, as ibv_rc_pingpong does.
func connectUDP(t testing.TB, e, peer *udpEnd) {
	t.Helper()
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1,
		AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU4096, DestQPN: peer.qp.QPN(), RQPSN: 0,
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer.dev.Addr(), HopLimit: 64}}},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
			ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))
	check(t, e.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: 0, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
		ibv.QPAttrState|ibv.QPAttrSQPSN|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic))
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pollWC waits, in real time, for one completion on cq.
func pollWC(t *testing.T, cq *verbs.CQ) ibv.WorkCompletion {
	t.Helper()
	wc := make([]ibv.WorkCompletion, 1)
	deadline := time.Now().Add(10 * time.Second)
	for cq.Poll(wc) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no completion within 10s")
		}
		time.Sleep(50 * time.Microsecond)
	}
	if wc[0].Status != ibv.WCSuccess {
		t.Fatalf("completion %+v", wc[0])
	}
	return wc[0]
}

// waitCounter waits until get() reaches want.
func waitCounter(t *testing.T, what string, get func() uint64, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for get() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", what, get(), want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestUDPVerbsEndToEnd runs RC SEND, WRITE, READ and both atomics between
// two devices over real UDP, on 127.0.0.1 and 127.0.0.2 and on ::1 (two
// ports), at a 4096-byte MTU (GSO and GRO in play where the kernel has
// them), records both links in one pcap file, and checks every recorded
// packet's ICRC with the logic of "softnic decode". A corrupted datagram
// from a third sender is counted and dropped.
func TestUDPVerbsEndToEnd(t *testing.T) {
	for _, fam := range []struct {
		name    string
		a, b, c netip.Addr
	}{
		{"ipv4", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")},
		{"ipv6", netip.IPv6Loopback(), netip.IPv6Loopback(), netip.IPv6Loopback()},
	} {
		t.Run(fam.name, func(t *testing.T) { testUDPVerbsEndToEnd(t, fam.a, fam.b, fam.c) })
	}
}

func testUDPVerbsEndToEnd(t *testing.T, addrA, addrB, addrC netip.Addr) {
	la, lb := listenUDPPair(t, link.UDPConfig{}, addrA, addrB)
	pcapPath := filepath.Join(t.TempDir(), "udp-e2e.pcap")
	f, err := os.Create(pcapPath)
	check(t, err)
	fbuf := bufio.NewWriter(f)
	w, err := capture.NewWriter(fbuf, capture.DefaultLinkType)
	check(t, err)
	pa, pb := link.NewPcapLink(la, w), link.NewPcapLink(lb, w)
	a := openUDPEnd(t, la, pa, lb.Port())
	b := openUDPEnd(t, lb, pb, la.Port())
	closed := false
	closeAll := func() {
		if !closed {
			closed = true
			a.dev.Close()
			b.dev.Close()
		}
	}
	defer closeAll()
	const at = 1000000 // the atomics' word
	binary.NativeEndian.PutUint64(b.buf[at:], 100)
	connectUDP(t, a, b)
	connectUDP(t, b, a)

	// SEND 100 KB: 25 packets of 4 KiB, GSO material.
	const sendLen = 100000
	for i := range a.buf[:sendLen] {
		a.buf[i] = byte(i * 7)
	}
	_, err = b.qp.PostRecv(ibv.RecvWR{WRID: 100, SGList: []ibv.SGE{b.mr.SGE(0, sendLen)}})
	check(t, err)
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, sendLen)}})
	check(t, err)
	if wc := pollWC(t, a.cq); wc.WRID != 1 || wc.Opcode != ibv.WCSend {
		t.Fatalf("send completion %+v", wc)
	}
	if wc := pollWC(t, b.cq); wc.WRID != 100 || wc.ByteLen != sendLen {
		t.Fatalf("receive completion %+v", wc)
	}
	if !bytes.Equal(b.buf[:sendLen], a.buf[:sendLen]) {
		t.Fatal("sent bytes differ")
	}

	// WRITE 256 KiB into b, READ it back into a.
	const wlen = 256 << 10
	src, dst, back := 200000, 300000, 600000
	for i := range a.buf[src : src+wlen] {
		a.buf[src+i] = byte(i ^ 0x5A)
	}
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(src, wlen)}, RemoteAddr: b.mr.Addr() + uint64(dst), RKey: b.mr.RKey()})
	check(t, err)
	pollWC(t, a.cq)
	// B's memory is checked by reading it back: the race detector cannot
	// see the order the UDP round trip gives between B's engine writing
	// it and A's completion.
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(back, wlen)}, RemoteAddr: b.mr.Addr() + uint64(dst), RKey: b.mr.RKey()})
	check(t, err)
	if wc := pollWC(t, a.cq); wc.Opcode != ibv.WCRDMARead || wc.ByteLen != wlen {
		t.Fatalf("read completion %+v", wc)
	}
	if !bytes.Equal(a.buf[back:back+wlen], a.buf[src:src+wlen]) {
		t.Fatal("read bytes differ")
	}

	// Fetch-and-add, then compare-and-swap, on the word set before the
	// QPs were connected; the result is read back.
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(at, 8)}, RemoteAddr: b.mr.Addr() + uint64(at), RKey: b.mr.RKey(), CompareAdd: 5})
	check(t, err)
	pollWC(t, a.cq)
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRAtomicCmpAndSwp, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(at+8, 8)}, RemoteAddr: b.mr.Addr() + uint64(at), RKey: b.mr.RKey(), CompareAdd: 105, Swap: 7})
	check(t, err)
	pollWC(t, a.cq)
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 6, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(at+16, 8)}, RemoteAddr: b.mr.Addr() + uint64(at), RKey: b.mr.RKey()})
	check(t, err)
	pollWC(t, a.cq)
	if got, old, rem := binary.NativeEndian.Uint64(a.buf[at:]), binary.NativeEndian.Uint64(a.buf[at+8:]),
		binary.NativeEndian.Uint64(a.buf[at+16:]); got != 100 || old != 105 || rem != 7 {
		t.Fatalf("atomics returned %d and %d and left %d, want 100, 105, 7", got, old, rem)
	}

	// A datagram with a bad ICRC from a third sender is counted and dropped.
	cport := la.Port()
	if addrC == addrA {
		cport = lb.Port() + 1
	}
	lc, err := link.ListenUDP(link.UDPConfig{Addr: addrC, Port: cport})
	if err == nil {
		defer lc.Close()
		e := wire.Encap{Src: lc.LocalAddr(), Dst: lb.LocalAddr(), SrcPort: 0xC001, DstPort: lb.Port(), HopLimit: 64}
		if e.IsIPv4() {
			e.FragOff = wire.IPv4DF
		}
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: b.qp.QPN(), PSN: 12345}}
		pkt := make([]byte, link.MaxDatagram)
		n, err := wire.Build(pkt, &e, &h, []byte("corrupted on the way"))
		check(t, err)
		pkt[wire.BTHLen+3] ^= 0x10
		before := b.dev.Counters().ICRCErr
		_, err = lc.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt[:n]}})
		check(t, err)
		waitCounter(t, "ICRCErr", func() uint64 { return b.dev.Counters().ICRCErr }, before+1)
		// Four datagrams of one GSO send (one GRO buffer at B, lent) to
		// a QP B does not have: dropped, and their loans given back
		// (checked after Close).
		lent, noQP := lb.Stats().RxLent, b.dev.Counters().DropNoQP
		h.BTH.DestQP = 0xABCDE
		dgs := make([]link.Datagram, 4)
		for i := range dgs {
			buf := make([]byte, link.MaxDatagram)
			n, err := wire.Build(buf, &e, &h, make([]byte, 1024))
			check(t, err)
			dgs[i] = link.Datagram{Encap: e, Buf: buf[:n]}
		}
		_, err = lc.WriteBatch(dgs)
		check(t, err)
		waitCounter(t, "DropNoQP", func() uint64 { return b.dev.Counters().DropNoQP }, noQP+4)
		if lb.GRO() && lc.GSO() && lb.Stats().RxLent != lent+4 {
			t.Errorf("B lent %d of the four datagrams to no QP, want 4", lb.Stats().RxLent-lent)
		}
		// Idle now: every loan given back, the dropped ones' included.
		waitCounter(t, "B's RxLentReleased", func() uint64 { return lb.Stats().RxLentReleased }, lb.Stats().RxLent)
	} else {
		lc = nil
		t.Logf("no third sender on %v: %v", addrC, err)
	}

	ca, cb := a.dev.Counters(), b.dev.Counters()
	sa, sb := la.Stats(), lb.Stats()
	t.Logf("A %v:%d, GSO %v GRO %v: %+v", la.LocalAddr(), la.Port(), la.GSO(), la.GRO(), sa)
	t.Logf("B %v:%d: %+v", lb.LocalAddr(), lb.Port(), sb)
	if ca.ICRCErr != 0 || ca.ICRCUnverified != 0 {
		t.Errorf("A counted %d ICRC errors, %d unverified", ca.ICRCErr, ca.ICRCUnverified)
	}
	if la.GSO() && sa.TxGSOSends == 0 {
		t.Errorf("GSO available but not used: %+v", sa)
	}
	if sa.RxKernelDrops != 0 || sb.RxKernelDrops != 0 {
		t.Logf("kernel receive drops: A %d, B %d (retransmitted)", sa.RxKernelDrops, sb.RxKernelDrops)
	}
	if cb.ICRCUnverified != 0 {
		t.Errorf("B counted %d unverified", cb.ICRCUnverified)
	}

	// Close the devices, then check the capture.
	closeAll()
	// The engines asked for loans (link.Lend) and gave back every one,
	// those of the packets their QPs still held included.
	for _, l := range []*link.UDPLink{la, lb} {
		st := l.Stats()
		if l.GRO() && st.RxGRO > 0 && st.RxLent == 0 {
			t.Errorf("%v:%d received %d GRO buffers but lent no datagram", l.LocalAddr(), l.Port(), st.RxGRO)
		}
		if st.RxLentReleased != st.RxLent {
			t.Errorf("%v:%d lent %d datagrams, %d released after Close", l.LocalAddr(), l.Port(), st.RxLent, st.RxLentReleased)
		}
	}
	check(t, fbuf.Flush())
	check(t, f.Close())
	check(t, pa.Err())
	check(t, pb.Err())
	// The corrupted datagram is recorded once, as B received it.
	wantBad := 0
	if lc != nil {
		wantBad = 1
	}
	if la.Port() == wire.UDPPort && lb.Port() == wire.UDPPort {
		sum, err := decode.Run(io.Discard, []string{pcapPath}, decode.Options{})
		check(t, err)
		if sum.ICRCBad != wantBad || sum.Malformed != 0 || sum.Packets < 60 {
			t.Fatalf("softnic decode: %s, %d malformed; want %d bad", sum.Line(), sum.Malformed, wantBad)
		}
		t.Logf("softnic decode: %s", sum.Line())
		return
	}
	dgs, err := capture.ReadFile(pcapPath)
	check(t, err)
	bad := 0
	for _, d := range dgs {
		if wire.CheckICRC(&d.Encap, d.Payload) != nil {
			bad++
		}
	}
	if bad != wantBad || len(dgs) < 60 {
		t.Fatalf("%d of %d captured datagrams have a bad ICRC, want %d", bad, len(dgs), wantBad)
	}
	t.Logf("capture: %d datagrams, %d bad ICRC (the corrupted one)", len(dgs), bad)
}

// BenchmarkUDPVerbsWrite measures RC WRITE throughput between two devices
// over real UDP on loopback (4096-byte MTU, 64 KiB WRITEs, 32 in flight),
// for comparison with cmd/udpbench's raw numbers.
func BenchmarkUDPVerbsWrite(b *testing.B) {
	for _, m := range []struct {
		name     string
		gso, gro bool
	}{{"plain", false, false}, {"gso+gro", true, true}} {
		b.Run(m.name, func(b *testing.B) {
			la, lb := listenUDPPair(b, link.UDPConfig{DisableGSO: !m.gso, DisableGRO: !m.gro},
				netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
			a := openUDPEnd(b, la, la, lb.Port())
			c := openUDPEnd(b, lb, lb, la.Port())
			defer a.dev.Close()
			defer c.dev.Close()
			connectUDP(b, a, c)
			connectUDP(b, c, a)
			const size, depth = 64 << 10, 32
			wr := ibv.SendWR{Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, size)}, RemoteAddr: c.mr.Addr(), RKey: c.mr.RKey()}
			wc := make([]ibv.WorkCompletion, depth)
			inflight, done := 0, 0
			b.SetBytes(size)
			b.ResetTimer()
			deadline := time.Now().Add(time.Minute)
			for done < b.N {
				for inflight < depth && done+inflight < b.N {
					if _, err := a.qp.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					inflight++
				}
				n := a.cq.Poll(wc)
				for _, w := range wc[:n] {
					if w.Status != ibv.WCSuccess {
						b.Fatalf("completion %+v", w)
					}
				}
				inflight -= n
				done += n
				if n == 0 {
					if time.Now().After(deadline) {
						b.Fatal("stalled")
					}
					// Sleep rather than spin: on a small machine a spinning
					// poller takes the CPU the engine needs.
					time.Sleep(50 * time.Microsecond)
				}
			}
			b.StopTimer()
			ctr := a.dev.Counters()
			b.ReportMetric(float64(ctr.Retransmits)/float64(b.N), "retransmits/op")
		})
	}
}
