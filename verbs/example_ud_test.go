package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// UD: a sends a datagram to b through an address handle; b's receive
// buffer starts with the GRH (the datagram's IP header), from which b
// makes the address handle of its answer (ibv_create_ah_from_wc).
func ExamplePD_CreateAH() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := a.newQP(ibv.QPTypeUD, nil, 0), b.newQP(ibv.QPTypeUD, nil, 0)
	check(qa.Connect(qa.Endpoint(0), verbs.Endpoint{}, nil)) // UD: no peer, Q_Key verbs.DefaultQKey
	check(qb.Connect(qb.Endpoint(0), verbs.Endpoint{}, nil))

	// b's receive buffer: GRHLen bytes of GRH, then the payload.
	_, err := qb.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, verbs.GRHLen+64)}})
	check(err)
	ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), TrafficClass: 0x20}})
	check(err)
	n := copy(a.buf, "datagram")
	_, err = qa.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, n)},
		AH: ah, RemoteQPN: qb.QPN(), RemoteQKey: verbs.DefaultQKey})
	check(err)

	wc := b.next()
	grh, err := verbs.ParseGRH(b.buf[:verbs.GRHLen])
	check(err)
	fmt.Printf("b: %q from QP %#x at %v (traffic class %#x), flags %v\n",
		b.buf[verbs.GRHLen:wc.ByteLen], wc.SrcQP, grh.Src, grh.TrafficClass, wc.Flags)

	reply, err := b.pd.CreateAHFromWC(&wc, b.buf[:verbs.GRHLen], 1)
	check(err)
	fmt.Println("b answers via", reply.Attr().GRH.DGID)
	// Output:
	// b: "datagram" from QP 0x11 at 192.0.2.1 (traffic class 0x20), flags GRH
	// b answers via 192.0.2.1
}

// UD TSO: one work request whose 10 payload bytes go out in pieces of 4,
// each an ordinary UD datagram starting with a copy of the 3-byte header
// (ibv_wr_send_tso). b needs a receive for each piece; a gets one
// completion for the whole WR.
func ExampleQPEx_WrSendTSO() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq,
		SendOpsFlags: verbs.SendOpsTSO, MaxTSOHeader: 16,
		Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	check(err)
	qb := b.newQP(ibv.QPTypeUD, nil, 0)
	check(qa.Connect(qa.Endpoint(0), verbs.Endpoint{}, nil))
	check(qb.Connect(qb.Endpoint(0), verbs.Endpoint{}, nil))
	const slot = 64
	for i := range 3 {
		_, err := qb.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(i*slot, slot)}})
		check(err)
	}
	ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
	check(err)
	n := copy(a.buf, "0123456789")

	x, err := qa.Ex()
	check(err)
	x.WrStart()
	x.WRID, x.WRFlags = 7, ibv.SendSignaled
	x.WrSendTSO([]byte("HDR"), 4)
	x.WrSetUDAddr(ah, qb.QPN(), verbs.DefaultQKey)
	x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), uint32(n))
	check(x.WrComplete())

	wc := a.next()
	fmt.Printf("a: %v of %d bytes\n", wc.Opcode, wc.ByteLen)
	for range 3 {
		wc := b.next()
		at := int(wc.WRID) * slot
		fmt.Printf("b: %q\n", b.buf[at+verbs.GRHLen:at+int(wc.ByteLen)])
	}
	// Output:
	// a: TSO of 10 bytes
	// b: "HDR0123"
	// b: "HDR4567"
	// b: "HDR89"
}
