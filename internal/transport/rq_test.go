package transport_test

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
)

// recordCQ keeps what is pushed to it.
type recordCQ struct{ wcs []ibv.WorkCompletion }

func (c *recordCQ) Push(wc *ibv.WorkCompletion, _ bool) bool {
	c.wcs = append(c.wcs, *wc)
	return true
}

// TestRecvQueueFlush flushes a receive queue: every WR posted completes
// with WR_FLUSH_ERR, opcode RECV and the given number, in posting order,
// and the queue is left empty; a second flush completes nothing.
func TestRecvQueueFlush(t *testing.T) {
	q := transport.NewRecvQueue(4, 2)
	wrs := []ibv.RecvWR{
		{WRID: 7, SGList: []ibv.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}},
		{WRID: 8},
		{WRID: 9, SGList: []ibv.SGE{{Length: 1}, {Length: 2}}},
	}
	if n, err := q.Post(wrs); n != 3 || err != nil {
		t.Fatalf("post: %d, %v", n, err)
	}
	var cq recordCQ
	q.Flush(&cq, 0x42)
	if q.Len() != 0 {
		t.Errorf("%d WRs left after the flush", q.Len())
	}
	if len(cq.wcs) != 3 {
		t.Fatalf("%d completions, want 3: %+v", len(cq.wcs), cq.wcs)
	}
	for i, wc := range cq.wcs {
		want := ibv.WorkCompletion{WRID: wrs[i].WRID, Status: ibv.WCWRFlushErr,
			Opcode: ibv.WCRecv, QPNum: 0x42}
		if wc != want {
			t.Errorf("completion %d: %+v, want %+v", i, wc, want)
		}
	}
	q.Flush(&cq, 0x42)
	if len(cq.wcs) != 3 {
		t.Errorf("a flush of an empty queue completed %d more", len(cq.wcs)-3)
	}
}
