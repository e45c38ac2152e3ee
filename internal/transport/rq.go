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

	stage  Stage        // guarded by mu; nil: every receive comes through Post
	pull   []ibv.RecvWR // guarded by mu: Stage.Pull's buffer
	closes uint64       // guarded by mu: the Drains that closed the stage
}

// Stage is where an application posts receives without calling the
// engine: softnic's libibverbs, whose ibv_post_recv writes them into
// memory of its own (clib/libibverbs/qp.c) so that a program reposting a
// receive for each message it takes makes no C-to-Go call for it. The
// queue pulls what was staged, under its lock and so in posting order,
// before anything else it does with its WRs: when Take finds it empty,
// before Post appends (a receive posted through the engine comes after
// the staged ones), and in Drain, which also closes the stage: after it,
// the application posts through the engine (a QP in ERR flushes what is
// posted to it, one in RESET refuses it) until Reopen.
type Stage interface {
	// Pull appends the staged WRs to buf, oldest first, and empties the
	// stage; their SGLists stay valid until the next Pull. With close,
	// the stage takes nothing more until Reopen.
	Pull(buf []ibv.RecvWR, close bool) []ibv.RecvWR
	// Reopen lets the application stage again.
	Reopen()
	// Reserve counts one WR posted through Post in the stage's count of
	// the queue's WRs, staged and not, and reports false when the queue
	// is full: the application counts what it stages the same way, under
	// the same lock, so that it refuses a post to a full queue (ENOMEM)
	// without calling the engine, and never stages one the queue could
	// not hold.
	Reserve() bool
	// Removed counts one WR leaving the queue (taken, flushed or
	// discarded).
	Removed()
}

// SetStage attaches st to the queue (nil detaches it: once SetStage
// returns, the queue no longer touches the old one).
func (q *RecvQueue) SetStage(st Stage) {
	q.mu.Lock()
	q.stage = st
	q.mu.Unlock()
}

// ReopenStage reopens the stage after a modify, when ok says the QP
// takes receives. ok runs without the queue's lock (it may take the
// transport's, which a Take holds while it takes this one); a Drain
// between it and the reopening (the QP went to ERR and flushed) leaves
// the stage closed.
func (q *RecvQueue) ReopenStage(ok func() bool) {
	q.mu.Lock()
	st, closes := q.stage, q.closes
	q.mu.Unlock()
	if st == nil || !ok() {
		return
	}
	q.mu.Lock()
	if q.stage == st && q.closes == closes {
		st.Reopen()
	}
	q.mu.Unlock()
}

// pullLocked moves what the stage holds into the ring, under mu. The
// application staged no more than the ring has room for (Reserve);
// anything beyond would be a bug of the stage, and is dropped rather
// than overwriting a posted WR.
func (q *RecvQueue) pullLocked(close bool) {
	if q.stage == nil {
		return
	}
	q.pull = q.stage.Pull(q.pull[:0], close)
	if close {
		q.closes++
	}
	for i := range q.pull {
		if q.n == len(q.ring) {
			break
		}
		q.appendLocked(&q.pull[i])
	}
	clear(q.pull)
}

// appendLocked appends wr at the tail, under mu; the caller checked its
// SGEs and that the ring has room.
func (q *RecvQueue) appendLocked(wr *ibv.RecvWR) {
	e := &q.ring[(q.head+q.n)%len(q.ring)]
	e.WRID = wr.WRID
	e.SGList = append(e.SGList[:0], wr.SGList...)
	e.Length = 0
	for _, s := range wr.SGList {
		e.Length += uint64(s.Length)
	}
	q.n++
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
	q.pullLocked(false)
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > q.maxSGE {
			return i, fmt.Errorf("%w: %d SGEs, max %d", errno.Invalid, len(wr.SGList), q.maxSGE)
		}
		if q.n == len(q.ring) || q.stage != nil && !q.stage.Reserve() {
			return i, fmt.Errorf("%w: receive queue holds %d WRs", errno.Full, len(q.ring))
		}
		q.appendLocked(wr)
	}
	return len(wrs), nil
}

// Take removes the oldest WR into out and reports whether there was one.
// out's SGList is reused.
func (q *RecvQueue) Take(out *RecvWQE) bool {
	q.mu.Lock()
	if q.n == 0 {
		q.pullLocked(false)
	}
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
	if q.stage != nil {
		q.stage.Removed()
	}
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

// Drain removes every WR, calling f for each in order (flush on ERR),
// the staged ones too, and closes the stage (Stage).
func (q *RecvQueue) Drain(f func(*RecvWQE)) {
	q.mu.Lock()
	q.pullLocked(true)
	q.mu.Unlock()
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
