package transport

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// ErrState refuses an operation the QP's current state does not allow
// (a post before RTS, a receive in RESET): EINVAL. The other errors of
// posting are errno's Invalid and Full.
var ErrState = errno.New("invalid QP state", syscall.EINVAL)

// RecvWQE is a posted receive work request with its own copy of the SGE
// list (ibv_post_recv copies it; the caller may reuse its slice).
type RecvWQE struct {
	WRID   uint64
	SGList []ibv.SGE
	Length uint64 // sum of the SGE lengths
}

// RecvQueue is a receive queue: a QP's own RQ or a shared receive queue.
// It is safe for concurrent use: the application posts, the engine takes.
type RecvQueue struct {
	mu     sync.Mutex
	ring   []RecvWQE // guarded by mu; capacity = max WR
	head   int       // guarded by mu
	n      int       // guarded by mu
	maxSGE int

	// Limit is called (outside the lock) when Take leaves fewer than the
	// armed limit of WQEs (SRQ limit event, ibv_modify_srq(3)); one shot.
	limit   int    // guarded by mu; 0 = disarmed
	onLimit func() // set before use
}

// NewRecvQueue makes a receive queue of maxWR entries with up to maxSGE
// SGEs each.
func NewRecvQueue(maxWR, maxSGE int) *RecvQueue {
	q := &RecvQueue{ring: make([]RecvWQE, maxWR), maxSGE: maxSGE}
	for i := range q.ring {
		q.ring[i].SGList = make([]ibv.SGE, 0, maxSGE)
	}
	return q
}

// Cap returns the queue's capacity in WRs.
func (q *RecvQueue) Cap() int { return len(q.ring) }

// MaxSGE returns the maximum SGEs per WR.
func (q *RecvQueue) MaxSGE() int { return q.maxSGE }

// Len returns the number of posted WRs.
func (q *RecvQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Post appends wrs in order. It stops at the first WR it cannot take and
// returns its index with an error (ibv_post_recv's bad_wr); the WRs
// before it are posted.
func (q *RecvQueue) Post(wrs []ibv.RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > q.maxSGE {
			return i, fmt.Errorf("%w: %d SGEs, max %d", errno.Invalid, len(wr.SGList), q.maxSGE)
		}
		if q.n == len(q.ring) {
			return i, fmt.Errorf("%w: receive queue holds %d WRs", errno.Full, len(q.ring))
		}
		e := &q.ring[(q.head+q.n)%len(q.ring)]
		e.WRID = wr.WRID
		e.SGList = append(e.SGList[:0], wr.SGList...)
		e.Length = 0
		for _, s := range wr.SGList {
			e.Length += uint64(s.Length)
		}
		q.n++
	}
	return len(wrs), nil
}

// Take removes the oldest WR into out and reports whether there was one.
// out's SGList is reused.
func (q *RecvQueue) Take(out *RecvWQE) bool {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return false
	}
	e := &q.ring[q.head]
	out.WRID = e.WRID
	out.Length = e.Length
	out.SGList = append(out.SGList[:0], e.SGList...)
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	fire := q.limit > 0 && q.n < q.limit
	if fire {
		q.limit = 0
	}
	f := q.onLimit
	q.mu.Unlock()
	if fire && f != nil {
		f()
	}
	return true
}

// Drain removes every WR, calling f for each in order (flush on ERR).
func (q *RecvQueue) Drain(f func(*RecvWQE)) {
	var tmp RecvWQE
	for q.Take(&tmp) {
		f(&tmp)
	}
}

// Flush completes every WR with WR_FLUSH_ERR on cq, in order, as qpn's:
// receive WRs are flushed when their queue enters ERR and when posted to
// it in ERR (IBTA 10.8.3.3; rxe_resp.c flush_recv_queue).
func (q *RecvQueue) Flush(cq CQ, qpn uint32) {
	q.Drain(func(r *RecvWQE) {
		wc := FlushedRecv(r, qpn)
		cq.Push(&wc, false)
	})
}

// FlushedRecv returns the WR_FLUSH_ERR completion of receive WQE r of QP
// qpn (or of the WQ numbered qpn): its wr_id, opcode RECV and the number,
// nothing else. A caller pushing it to a concrete CQ rather than through
// the CQ interface keeps it off the heap.
func FlushedRecv(r *RecvWQE, qpn uint32) ibv.WorkCompletion {
	return ibv.WorkCompletion{WRID: r.WRID, Status: ibv.WCWRFlushErr, Opcode: ibv.WCRecv, QPNum: qpn}
}

// ArmLimit arms the one-shot limit event: when a Take leaves fewer than
// limit WRs, onLimit runs once. limit 0 disarms.
func (q *RecvQueue) ArmLimit(limit int, onLimit func()) {
	q.mu.Lock()
	q.limit = limit
	q.onLimit = onLimit
	q.mu.Unlock()
}

// Resize changes the capacity (SRQ resize); it refuses to drop posted WRs.
func (q *RecvQueue) Resize(maxWR int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if maxWR < q.n {
		return fmt.Errorf("%w: %d WRs posted, new size %d", errno.Invalid, q.n, maxWR)
	}
	ring := make([]RecvWQE, maxWR)
	for i := range ring {
		if i < q.n {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		} else {
			ring[i].SGList = make([]ibv.SGE, 0, q.maxSGE)
		}
	}
	q.ring, q.head = ring, 0
	return nil
}
