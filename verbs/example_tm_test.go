package verbs_test

import (
	"fmt"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// Tag matching: b's tag-matching SRQ holds a tagged buffer for tag 0x42,
// so a's message with that tag lands there, its header stripped; a
// message with a tag nobody posted arrives whole in an ordinary buffer,
// unexpected, and software reports it with a sync before matching
// resumes.
func ExampleSRQ_PostOps() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	srq, err := b.pd.CreateSRQEx(verbs.SRQInitAttrEx{
		SRQInitAttr: verbs.SRQInitAttr{MaxWR: 8, MaxSGE: 1},
		Type:        ibv.SRQTypeTM, CQ: b.cq, TM: ibv.TMCap{MaxNumTags: 4, MaxOps: 4},
	})
	check(err)
	qa, qb := a.newQP(ibv.QPTypeRC, nil, 0), b.newQP(ibv.QPTypeRC, srq, 0)
	check(qa.Connect(qa.Endpoint(0), qb.Endpoint(0), nil))
	check(qb.Connect(qb.Endpoint(0), qa.Endpoint(0), nil))

	// A tagged buffer at b.buf[0:64], and an ordinary one at b.buf[64:128].
	ops := []ibv.OpsWR{{WRID: 1, Opcode: ibv.WRTagAdd, Flags: ibv.OpsSignaled,
		RecvWRID: 10, SGList: []ibv.SGE{b.mr.SGE(0, 64)}, Tag: 0x42, Mask: ^uint64(0)}}
	_, err = srq.PostOps(ops)
	check(err)
	wc := b.next()
	fmt.Printf("%v wr_id %d: handle %d\n", wc.Opcode, wc.WRID, ops[0].Handle)
	_, err = srq.PostRecv(ibv.RecvWR{WRID: 20, SGList: []ibv.SGE{b.mr.SGE(64, 64)}})
	check(err)

	send := func(tag uint64, text string) {
		wire.PutTMH(a.buf, wire.TMEager, 0, tag)
		n := wire.TMHLen + copy(a.buf[wire.TMHLen:], text)
		_, err := qa.PostSend(ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, n)}})
		check(err)
	}
	send(0x42, "expected")
	wc = b.next()
	fmt.Printf("%v %v wr_id %d tag %#x: %q\n", wc.Opcode, wc.Flags, wc.WRID, wc.TMTag, b.buf[:wc.ByteLen])

	send(0x99, "unexpected")
	wc = b.next()
	tmh, _ := wire.AsTMH(b.buf[64:])
	fmt.Printf("%v %v wr_id %d tag %#x: %q\n", wc.Opcode, wc.Flags, wc.WRID, tmh.Tag(), b.buf[64+wire.TMHLen:64+wc.ByteLen])

	// Software has handled one unexpected message: matching resumes.
	_, err = srq.PostOps([]ibv.OpsWR{{WRID: 2, Opcode: ibv.WRTagSync, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 1}})
	check(err)
	wc = b.next()
	fmt.Printf("%v wr_id %d flags %v\n", wc.Opcode, wc.WRID, wc.Flags)
	// Output:
	// TM_ADD wr_id 1: handle 0
	// TM_RECV TM_MATCH|TM_DATA_VALID wr_id 10 tag 0x42: "expected"
	// RECV TM_SYNC_REQ wr_id 20 tag 0x99: "unexpected"
	// TM_SYNC wr_id 2 flags 0
}
