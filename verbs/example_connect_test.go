package verbs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
)

// ibv_rc_pingpong's connection in three lines: each side tells the other
// its endpoint (QP number, first PSN, GID), then takes its QP through
// INIT, RTR and RTS with rc_pingpong's attributes.
func ExampleQP_Connect() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := a.newQP(ibv.QPTypeRC, nil, 0), b.newQP(ibv.QPTypeRC, nil, 0)

	aMe, bMe := qa.Endpoint(0x1234), qb.Endpoint(0x5678) // sent over TCP by rc_pingpong
	check(qa.Connect(aMe, bMe, nil))
	check(qb.Connect(bMe, aMe, nil))

	attr, init := qa.Query()
	fmt.Printf("%v QP %#x: %v to QP %#x at %v, path MTU %v, sending from PSN %#x, receiving from %#x\n",
		init.Type, qa.QPN(), attr.State, attr.DestQPN, attr.AHAttr.GRH.DGID, attr.PathMTU, attr.SQPSN, attr.RQPSN)
	fmt.Println("remote access:", attr.AccessFlags)
	// Output:
	// RC QP 0x11: RTS to QP 0x11 at 192.0.2.2, path MTU 1024, sending from PSN 0x1234, receiving from 0x5678
	// remote access: REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC
}

// Wait blocks until a completion arrives or the context ends.
func ExampleCQ_Wait() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := connectRC(a, b)

	_, err := qb.PostRecv(ibv.RecvWR{WRID: 7, SGList: []ibv.SGE{b.mr.SGE(0, 64)}})
	check(err)
	n := copy(a.buf, "ping")
	_, err = qa.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, n)}})
	check(err)

	wc := make([]ibv.WorkCompletion, 4)
	k, err := b.cq.Wait(context.Background(), wc)
	check(err)
	fmt.Printf("%d completion: WR %d %v %v, %q\n", k, wc[0].WRID, wc[0].Opcode, wc[0].Status, b.buf[:wc[0].ByteLen])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = b.cq.Wait(ctx, wc)
	fmt.Println(err)
	// Output:
	// 1 completion: WR 7 RECV success, "ping"
	// wait for completions on CQ: context deadline exceeded
}

// All ranges over completions as they arrive.
func ExampleCQ_All() {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := newNode(f, "192.0.2.1"), newNode(f, "192.0.2.2")
	defer closeAll(a, b)
	qa, qb := connectRC(a, b)

	for i := range 3 {
		_, err := qb.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(64*i, 64)}})
		check(err)
	}
	for i, msg := range []string{"one", "two", "three"} {
		n := copy(a.buf[64*i:], msg)
		_, err := qa.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(64*i, n)}})
		check(err)
	}

	seen := 0
	for wc, err := range b.cq.All(context.Background()) {
		check(err)
		fmt.Printf("WR %d: %q\n", wc.WRID, b.buf[64*wc.WRID:64*wc.WRID+uint64(wc.ByteLen)])
		if seen++; seen == 3 {
			break
		}
	}
	// Output:
	// WR 0: "one"
	// WR 1: "two"
	// WR 2: "three"
}
