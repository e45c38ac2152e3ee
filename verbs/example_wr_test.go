package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The ibv_wr_* builders: a WRITE and a SEND with inline data, built
// between WrStart and WrComplete and posted together.
func ExampleQPEx() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa := a.newQP(ibv.QPTypeRC, nil, verbs.SendOpsRDMAWrite|verbs.SendOpsSend)
	qb := b.newQP(ibv.QPTypeRC, nil, 0)
	check(qa.Connect(qa.Endpoint(0), qb.Endpoint(0), nil))
	check(qb.Connect(qb.Endpoint(0), qa.Endpoint(0), nil))
	_, err := qb.PostRecv(ibv.RecvWR{WRID: 9, SGList: []ibv.SGE{b.mr.SGE(0, 64)}})
	check(err)

	x, err := qa.Ex() // ibv_qp_to_qp_ex
	check(err)
	n := copy(a.buf, "payload")
	x.WrStart()
	x.WRID, x.WRFlags = 1, 0
	x.WrRDMAWrite(b.mr.RKey(), b.mr.Addr()+1024)
	x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), uint32(n))
	x.WRID, x.WRFlags = 2, ibv.SendSignaled
	x.WrSend()
	x.WrSetInlineData([]byte("done"))
	check(x.WrComplete())

	wc := a.next()
	fmt.Printf("a: WR %d %v %v\n", wc.WRID, wc.Opcode, wc.Status)
	wc = b.next()
	fmt.Printf("b: %q, and the WRITE left %q\n", b.buf[:wc.ByteLen], b.buf[1024:1024+n])
	// Output:
	// a: WR 2 SEND success
	// b: "done", and the WRITE left "payload"
}
