package transport_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
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

// fakeStage is a Stage an application fills directly: staged holds what
// it staged, count what the queue holds by its reckoning.
type fakeStage struct {
	staged  []ibv.RecvWR
	open    bool
	count   int
	cap     int
	removed int
}

func (s *fakeStage) stage(id uint64) bool {
	if !s.open || s.count >= s.cap {
		return false
	}
	s.staged = append(s.staged, ibv.RecvWR{WRID: id})
	s.count++
	return true
}

func (s *fakeStage) Pull(buf []ibv.RecvWR, close bool) []ibv.RecvWR {
	buf = append(buf, s.staged...)
	s.staged = s.staged[:0]
	if close {
		s.open = false
	}
	return buf
}

func (s *fakeStage) Reopen() { s.open = true }

func (s *fakeStage) Reserve() bool {
	if s.count >= s.cap {
		return false
	}
	s.count++
	return true
}

func (s *fakeStage) Removed() { s.count--; s.removed++ }

// A staged receive is taken before one posted after it through Post, Take
// pulls when the ring is empty, the count the stage keeps makes a full
// queue refuse both ways, and Drain takes the staged ones too and closes
// the stage until ReopenStage (which a Drain in between prevents).
func TestRecvQueueStage(t *testing.T) {
	q := transport.NewRecvQueue(4, 1)
	st := &fakeStage{cap: 4}
	q.SetStage(st)
	if st.stage(0) {
		t.Fatal("staged into a closed stage")
	}
	q.ReopenStage(func() bool { return true })
	if !st.stage(0) || !st.stage(1) {
		t.Fatal("the open stage refused")
	}
	if _, err := q.Post([]ibv.RecvWR{{WRID: 2}}); err != nil {
		t.Fatal(err)
	}
	if !st.stage(3) {
		t.Fatal("the fourth receive refused")
	}
	if st.stage(4) {
		t.Fatal("staged into a full queue")
	}
	if n, err := q.Post([]ibv.RecvWR{{WRID: 4}}); n != 0 || !errors.Is(err, errno.Full) {
		t.Fatalf("Post to a full queue: %d, %v", n, err)
	}
	var w transport.RecvWQE
	for want := uint64(0); want < 4; want++ {
		if !q.Take(&w) || w.WRID != want {
			t.Fatalf("Take: got %d, %v; want %d", w.WRID, w, want)
		}
	}
	if q.Take(&w) {
		t.Fatal("Take from an empty queue")
	}
	if st.removed != 4 || st.count != 0 {
		t.Fatalf("removed %d, count %d", st.removed, st.count)
	}
	st.stage(5)
	if _, err := q.Post([]ibv.RecvWR{{WRID: 6}}); err != nil {
		t.Fatal(err)
	}
	st.stage(7)
	var drained []uint64
	q.Drain(func(r *transport.RecvWQE) { drained = append(drained, r.WRID) })
	if !slices.Equal(drained, []uint64{5, 6, 7}) || st.open || st.count != 0 {
		t.Fatalf("Drain: %v, open %v, count %d", drained, st.open, st.count)
	}
	// A Drain while ok runs (the QP went to ERR) keeps the stage closed.
	q.ReopenStage(func() bool { q.Drain(func(*transport.RecvWQE) {}); return true })
	if st.open {
		t.Fatal("reopened across a Drain")
	}
	q.ReopenStage(func() bool { return false })
	if st.open {
		t.Fatal("reopened though ok said no")
	}
	q.ReopenStage(func() bool { return true })
	if !st.open {
		t.Fatal("not reopened")
	}
	q.SetStage(nil)
	st.stage(8)
	if q.Take(&w) {
		t.Fatal("Take pulled from a detached stage")
	}
}
