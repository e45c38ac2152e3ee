package verbs_test

import (
	"fmt"
	"net/netip"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The General Services QP: QP1 of each device, a UD QP whose Q_Key is
// GSIQKey, through which a connection manager exchanges 256-byte MADs
// (here a blank one) with the peer's QP1.
func ExamplePD_CreateGSIQP() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	gsi := func(n *node) *verbs.QP {
		qp, err := n.pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
			Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		check(err)
		attr := verbs.DefaultConnectAttr(ibv.QPTypeUD)
		attr.QKey = verbs.GSIQKey
		check(qp.Connect(qp.Endpoint(0), verbs.Endpoint{}, &attr))
		return qp
	}
	qa, qb := gsi(a), gsi(b)
	_, err := a.pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq})
	fmt.Println("QPNs", qa.QPN(), qb.QPN(), "; a second one:", err)

	_, err = qb.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.mr.SGE(0, verbs.GRHLen+256)}})
	check(err)
	ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
	check(err)
	_, err = qa.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 256)},
		AH: ah, RemoteQPN: 1, RemoteQKey: verbs.GSIQKey})
	check(err)
	wc := b.next()
	fmt.Printf("b's QP1: %d bytes (GRH and MAD) from QP %d\n", wc.ByteLen, wc.SrcQP)
	// Output:
	// QPNs 1 1 ; a second one: device or resource busy: QP 0x1 exists
	// b's QP1: 296 bytes (GRH and MAD) from QP 1
}

// UD multicast: b and c attach a UD QP each to the group 239.1.2.3; a
// sends one datagram to the group (DestQP MulticastQPN) and both get it.
func ExampleQP_AttachMcast() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b, c := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2"), newNode(f, "192.0.2.3")
	defer closeAll(a, b, c)
	group := verbs.GIDFromAddr(netip.MustParseAddr("239.1.2.3"))
	var qps []*verbs.QP
	for _, n := range []*node{a, b, c} {
		qp := n.newQP(ibv.QPTypeUD, nil, 0)
		check(qp.Connect(qp.Endpoint(0), verbs.Endpoint{}, nil)) // Q_Key verbs.DefaultQKey
		qps = append(qps, qp)
	}
	for i, n := range []*node{b, c} {
		check(qps[i+1].AttachMcast(group, 0))
		_, err := qps[i+1].PostRecv(ibv.RecvWR{SGList: []ibv.SGE{n.mr.SGE(0, verbs.GRHLen+64)}})
		check(err)
	}
	ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
		GRH: ibv.GlobalRoute{DGID: group.Addr(), HopLimit: 8}})
	check(err)
	n := copy(a.buf, "to all")
	_, err = qps[0].PostSend(ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, n)},
		AH: ah, RemoteQPN: verbs.MulticastQPN, RemoteQKey: verbs.DefaultQKey})
	check(err)
	for _, r := range []*node{b, c} {
		wc := r.next()
		grh, err := verbs.ParseGRH(r.buf[:verbs.GRHLen])
		check(err)
		fmt.Printf("%v: %q to %v\n", r.dev.Addr(), r.buf[verbs.GRHLen:wc.ByteLen], grh.Dst)
	}
	// Output:
	// 192.0.2.2: "to all" to 239.1.2.3
	// 192.0.2.3: "to all" to 239.1.2.3
}
