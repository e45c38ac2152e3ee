package verbs_test

import (
	"context"
	"log"
	"net/netip"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// node is one machine of the examples of the example_*_test.go files: a
// device on the fabric with a protection domain, a 64 KiB buffer
// registered for every kind of access, and a completion queue.
type node struct {
	dev *verbs.Device
	pd  *verbs.PD
	buf []byte
	mr  *verbs.MR
	cq  *verbs.CQ
}

func newNode(f *fabric.Fabric, addr string) *node {
	link, err := f.Attach(netip.MustParseAddr(addr))
	check(err)
	n := &node{buf: make([]byte, 64<<10)}
	n.dev, err = verbs.Open(verbs.Config{Link: link})
	check(err)
	n.pd, err = n.dev.AllocPD()
	check(err)
	n.mr, err = n.pd.RegMR(n.buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|
		ibv.AccessRemoteRead|ibv.AccessRemoteAtomic|ibv.AccessMWBind)
	check(err)
	n.cq, err = n.dev.CreateCQ(64, nil)
	check(err)
	return n
}

// newQP creates a QP of type typ on n's CQ, taking its receives from srq
// when it is not nil, with the send operations ops for the ibv_wr_*
// builders.
func (n *node) newQP(typ ibv.QPType, srq *verbs.SRQ, ops verbs.SendOpsFlags) *verbs.QP {
	qp, err := n.pd.CreateQP(verbs.QPInitAttr{
		Type: typ, SendCQ: n.cq, RecvCQ: n.cq, SRQ: srq, SendOpsFlags: ops,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64},
	})
	check(err)
	return qp
}

// next waits (ten seconds at most) for n's next completion.
func (n *node) next() ibv.WorkCompletion {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]ibv.WorkCompletion, 1)
	_, err := n.cq.Wait(ctx, wc)
	check(err)
	return wc[0]
}

// connectRC makes an RC QP on a and one on b and connects them.
func connectRC(a, b *node) (qa, qb *verbs.QP) {
	qa, qb = a.newQP(ibv.QPTypeRC, nil, 0), b.newQP(ibv.QPTypeRC, nil, 0)
	check(qa.Connect(qa.Endpoint(0), qb.Endpoint(0), nil))
	check(qb.Connect(qb.Endpoint(0), qa.Endpoint(0), nil))
	return qa, qb
}

func closeAll(nodes ...*node) {
	for _, n := range nodes {
		if err := n.dev.Close(); err != nil {
			log.Fatal(err)
		}
	}
}
