package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// A shared receive queue: b's two QPs take their receive buffers from
// one SRQ, each in posting order, whichever QP a message arrives on.
func ExamplePD_CreateSRQ() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	srq, err := b.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 8, MaxSGE: 1})
	check(err)
	var senders []*verbs.QP
	for range 2 {
		qa, qb := a.newQP(ibv.QPTypeRC, nil, 0), b.newQP(ibv.QPTypeRC, srq, 0)
		check(qa.Connect(qa.Endpoint(0), qb.Endpoint(0), nil))
		check(qb.Connect(qb.Endpoint(0), qa.Endpoint(0), nil))
		senders = append(senders, qa)
	}
	for i := range 2 {
		_, err := srq.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(64*i, 64)}})
		check(err)
	}
	fmt.Println("receive WRs posted to the SRQ:", srq.Len())

	for i, qa := range senders {
		n := copy(a.buf[64*i:], fmt.Sprintf("via QP %d", i))
		_, err := qa.PostSend(ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(64*i, n)}})
		check(err)
		wc := b.next() // one message at a time: the SRQ's buffers are taken in order
		off := 64 * (wc.WRID - 100)
		fmt.Printf("WR %d on QP %#x: %q\n", wc.WRID, wc.QPNum, b.buf[off:off+uint64(wc.ByteLen)])
	}
	fmt.Println("left in the SRQ:", srq.Len())
	// Output:
	// receive WRs posted to the SRQ: 2
	// WR 100 on QP 0x11: "via QP 0"
	// WR 101 on QP 0x12: "via QP 1"
	// left in the SRQ: 0
}
