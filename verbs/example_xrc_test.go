package verbs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// XRC: b opens an XRC domain with two XRC SRQs, each with its own CQ,
// and one XRC_RECV QP; a's single XRC_SEND QP reaches either SRQ, each
// SEND naming the SRQ's number (SendWR.RemoteSRQN, ibv_wr_set_xrc_srqn).
func ExampleXRCD() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)

	xrcd, err := b.dev.OpenXRCD("")
	check(err)
	type target struct {
		srq *verbs.SRQ
		cq  *verbs.CQ
		num uint32
	}
	var srqs []target
	for i := range 2 {
		cq, err := b.dev.CreateCQ(8, nil)
		check(err)
		srq, err := b.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1},
			Type: ibv.SRQTypeXRC, XRCD: xrcd, CQ: cq})
		check(err)
		num, err := srq.Num()
		check(err)
		_, err = srq.PostRecv(ibv.RecvWR{WRID: uint64(100 + i), SGList: []ibv.SGE{b.mr.SGE(64*i, 64)}})
		check(err)
		srqs = append(srqs, target{srq, cq, num})
	}
	tgt, err := xrcd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCRecv})
	check(err)
	ini, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeXRCSend, SendCQ: a.cq,
		Cap: ibv.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	check(err)
	check(ini.Connect(ini.Endpoint(0), tgt.Endpoint(0), nil))
	check(tgt.Connect(tgt.Endpoint(0), ini.Endpoint(0), nil))

	for i, s := range []int{1, 0} {
		n := copy(a.buf[64*i:], fmt.Sprintf("to SRQ %d", s))
		_, err := ini.PostSend(ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(64*i, n)}, RemoteSRQN: srqs[s].num})
		check(err)
		wc := make([]ibv.WorkCompletion, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = srqs[s].cq.Wait(ctx, wc) // the receive completes on the SRQ's CQ
		cancel()
		check(err)
		off := 64 * (wc[0].WRID - 100)
		fmt.Printf("SRQ %d's CQ: WR %d on QP %#x: %q\n", s, wc[0].WRID, wc[0].QPNum, b.buf[off:off+uint64(wc[0].ByteLen)])
	}
	// Output:
	// SRQ 1's CQ: WR 101 on QP 0x11: "to SRQ 1"
	// SRQ 0's CQ: WR 100 on QP 0x11: "to SRQ 0"
}
