package verbs_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"net/netip"
	"runtime"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// host is one machine of the example: a softnic device with what
// ibv_rc_pingpong sets up before connecting (pp_init_ctx): a protection
// domain, a registered buffer, a completion queue and an RC queue pair.
type host struct {
	dev *verbs.Device
	pd  *verbs.PD
	buf []byte
	mr  *verbs.MR
	cq  *verbs.CQ
	qp  *verbs.QP
}

// peerInfo is what the two sides exchange out of band before connecting
// (ibv_rc_pingpong sends it over TCP): QP number, first PSN and GID, plus
// the rkey and address of the buffer the peer may WRITE, READ and update
// atomically.
type peerInfo struct {
	QPN  uint32
	PSN  uint32
	GID  verbs.GID
	RKey uint32
	Addr uint64
}

func openHost(f *fabric.Fabric, addr string) *host {
	link, err := f.Attach(netip.MustParseAddr(addr))
	check(err)
	h := &host{buf: make([]byte, 4096)}
	h.dev, err = verbs.Open(verbs.Config{Link: link})
	check(err)
	h.pd, err = h.dev.AllocPD()
	check(err)
	h.mr, err = h.pd.RegMR(h.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|
		ibv.AccessRemoteRead|ibv.AccessRemoteAtomic)
	check(err)
	h.cq, err = h.dev.CreateCQ(16, nil)
	check(err)
	h.qp, err = h.pd.CreateQP(verbs.QPInitAttr{
		Type: ibv.QPTypeRC, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	check(err)
	return h
}

// info is what h tells its peer, starting its send queue at psn.
func (h *host) info(psn uint32) peerInfo {
	gid, err := h.dev.QueryGID(1, 0)
	check(err)
	return peerInfo{QPN: h.qp.QPN(), PSN: psn, GID: gid, RKey: h.mr.RKey(), Addr: h.mr.Addr()}
}

// connect takes h's QP from RESET to RTS towards peer, with the
// attributes ibv_rc_pingpong's pp_connect_ctx uses.
func (h *host) connect(me, peer peerInfo) {
	check(h.qp.Modify(&ibv.QPAttr{
		State:       ibv.QPStateInit,
		PKeyIndex:   0,
		PortNum:     1,
		AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic,
	}, ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))

	check(h.qp.Modify(&ibv.QPAttr{
		State:           ibv.QPStateRTR,
		PathMTU:         ibv.MTU1024,
		DestQPN:         peer.QPN,
		RQPSN:           peer.PSN,
		MaxDestRdAtomic: 1,
		MinRNRTimer:     12,
		AHAttr: ibv.AHAttr{
			IsGlobal: true, // RoCE: the GRH carries the peer's GID
			PortNum:  1,
			GRH:      ibv.GlobalRoute{DGID: peer.GID.Addr(), HopLimit: 1, SGIDIndex: 0},
		},
	}, ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|
		ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))

	check(h.qp.Modify(&ibv.QPAttr{
		State:       ibv.QPStateRTS,
		SQPSN:       me.PSN,
		Timeout:     14, // 4.096 µs × 2^14 ≈ 67 ms before a retransmission
		RetryCnt:    7,  // seven retransmissions, then RETRY_EXC_ERR (rxe: for ever)
		RNRRetry:    7,  // 7: retry forever while the peer has no receive posted
		MaxRdAtomic: 1,
	}, ibv.QPAttrState|ibv.QPAttrSQPSN|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|
		ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic))
}

// wait polls h's completion queue until a work request completes.
func (h *host) wait() ibv.WorkCompletion {
	wc := make([]ibv.WorkCompletion, 1)
	for h.cq.Poll(wc) == 0 {
		runtime.Gosched()
	}
	if wc[0].Status != ibv.WCSuccess {
		log.Fatalf("work request %d: %v", wc[0].WRID, wc[0].Status)
	}
	return wc[0]
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// Two hosts on an in-memory fabric connect an RC queue pair the way
// ibv_rc_pingpong does, then a SENDs a message to b, WRITEs into b's
// memory, READs it back and adds to a counter in b's memory atomically.
func Example() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a := openHost(f, "192.0.2.1")
	defer a.dev.Close()
	b := openHost(f, "192.0.2.2")
	defer b.dev.Close()

	aInfo, bInfo := a.info(0x1234), b.info(0x5678)
	a.connect(aInfo, bInfo)
	b.connect(bInfo, aInfo)
	fmt.Printf("QP %#x on %v connected to QP %#x on %v\n", aInfo.QPN, aInfo.GID.Addr(), bInfo.QPN, bInfo.GID.Addr())

	// SEND: b posts a receive buffer, a sends into it.
	_, err := b.qp.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, 64)}})
	check(err)
	n := copy(a.buf, "hello from a")
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{a.mr.SGE(0, n)}})
	check(err)
	a.wait()
	wc := b.wait()
	fmt.Printf("SEND: b received %d bytes: %q\n", wc.ByteLen, b.buf[:wc.ByteLen])

	// WRITE: a puts bytes at offset 256 of b's buffer; b's CPU is not involved.
	n = copy(a.buf[128:], "written by a")
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{a.mr.SGE(128, n)},
		RemoteAddr: bInfo.Addr + 256, RKey: bInfo.RKey})
	check(err)
	a.wait()
	fmt.Printf("WRITE: b's buffer at 256 holds %q\n", b.buf[256:256+n])

	// READ: a fetches the same bytes back into its own buffer.
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{a.mr.SGE(512, n)},
		RemoteAddr: bInfo.Addr + 256, RKey: bInfo.RKey})
	check(err)
	wc = a.wait()
	fmt.Printf("READ: a read %d bytes: %q\n", wc.ByteLen, a.buf[512:512+n])

	// FETCH_AND_ADD: a adds 2 to the 8-byte counter at offset 1024 of b's
	// buffer; the counter's previous value lands in a's buffer.
	binary.NativeEndian.PutUint64(b.buf[1024:], 40)
	_, err = a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{a.mr.SGE(1024, 8)},
		RemoteAddr: bInfo.Addr + 1024, RKey: bInfo.RKey, CompareAdd: 2})
	check(err)
	a.wait()
	fmt.Printf("FETCH_AND_ADD: the counter was %d and is now %d\n",
		binary.NativeEndian.Uint64(a.buf[1024:]), binary.NativeEndian.Uint64(b.buf[1024:]))

	// Output:
	// QP 0x11 on 192.0.2.1 connected to QP 0x11 on 192.0.2.2
	// SEND: b received 12 bytes: "hello from a"
	// WRITE: b's buffer at 256 holds "written by a"
	// READ: a read 12 bytes: "written by a"
	// FETCH_AND_ADD: the counter was 40 and is now 42
}
