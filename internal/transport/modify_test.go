package transport

import (
	"testing"

	"github.com/softnic/softnic/ibv"
)

func TestStoreAttrs(t *testing.T) {
	var a ibv.QPAttr
	attr := ibv.QPAttr{QKey: 7, DestQPN: 0xAB123456, MaxRdAtomic: 3, MaxDestRdAtomic: 200,
		PKeyIndex: 1, RetryCnt: 5, SQPSN: 0x1FFFFFF}
	StoreAttrs(&a, &attr, ibv.QPAttrQKey|ibv.QPAttrDestQPN|ibv.QPAttrMaxQPRdAtomic|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrSQPSN)
	if a.QKey != 7 || a.DestQPN != 0x123456 || a.MaxRdAtomic != 4 || a.MaxDestRdAtomic != 255 || a.SQPSN != 0x1FFFFFF {
		t.Errorf("stored %+v; want QKey 7, DestQPN 0x123456, max_rd_atomic 4, max_dest_rd_atomic 255, SQPSN as given", a)
	}
	if a.PKeyIndex != 0 || a.RetryCnt != 0 {
		t.Errorf("attributes outside the mask stored: pkey_index %d, retry_cnt %d", a.PKeyIndex, a.RetryCnt)
	}
	for n, want := range map[uint8]uint8{0: 0, 1: 1, 2: 2, 5: 8, 16: 16, 129: 255} {
		if got := roundUpPow2(n); got != want {
			t.Errorf("roundUpPow2(%d) = %d, want %d", n, got, want)
		}
	}
}

// cqLog is a CQ that records what is pushed on it.
type cqLog []ibv.WorkCompletion

func (c *cqLog) Push(wc *ibv.WorkCompletion, _ bool) bool { *c = append(*c, *wc); return true }

func TestFlushRecvs(t *testing.T) {
	rq := NewRecvQueue(4, 1)
	if _, err := rq.Post([]ibv.RecvWR{{WRID: 2}, {WRID: 3}}); err != nil {
		t.Fatal(err)
	}
	var cq cqLog
	held, have := RecvWQE{WRID: 1}, true
	FlushRecvs(&cq, 9, &held, &have, rq, false)
	if have || len(cq) != 3 {
		t.Fatalf("flushed %d receives, held still held %v; want 3 and released", len(cq), have)
	}
	for i, wc := range cq {
		if wc.WRID != uint64(i+1) || wc.Status != ibv.WCWRFlushErr || wc.Opcode != ibv.WCRecv || wc.QPNum != 9 {
			t.Errorf("completion %d: %+v; want WRID %d, WR_FLUSH_ERR, RECV, QP 9 (posting order)", i, wc, i+1)
		}
	}

	// A shared queue keeps its receives, for flush and for reset.
	if _, err := rq.Post([]ibv.RecvWR{{WRID: 4}}); err != nil {
		t.Fatal(err)
	}
	cq = nil
	FlushRecvs(&cq, 9, &held, &have, rq, true)
	DiscardRecvs(rq, true)
	if len(cq) != 0 || rq.Len() != 1 {
		t.Errorf("shared queue: %d completions, %d receives left; want 0 and 1", len(cq), rq.Len())
	}
	DiscardRecvs(rq, false)
	if len(cq) != 0 || rq.Len() != 0 {
		t.Errorf("discard: %d completions, %d receives left; want none of either", len(cq), rq.Len())
	}
}
