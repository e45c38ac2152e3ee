package rc

// The send ring: posted send WQEs, their checks at post time and the
// queue that holds them (rxe_verbs.h struct rxe_send_wqe, rxe provider
// post_send).

import (
	"fmt"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// wqeState is a send WQE's progress (rxe_verbs.h enum wqe_state).
type wqeState uint8

const (
	wqePosted   wqeState = iota // not started (or rewound by a retry)
	wqeInFlight                 // some packets sent
	wqePending                  // every packet sent, awaiting acknowledgement
	wqeDone                     // completed
)

// wrKind groups work-request opcodes by how the transport treats them.
type wrKind uint8

const (
	kindSend wrKind = iota
	kindWrite
	kindRead
	kindAtomic
	// kindFlush is FLUSH (IBA A19): one request packet with FETH and RETH,
	// answered by a zero-length RDMA READ response.
	kindFlush
	// kindAtomicWrite is ATOMIC WRITE (IBA A19): one request packet with
	// RETH and 8 bytes, answered like FLUSH.
	kindAtomicWrite
	// kindLocal is LOCAL_INV, BIND_MW or REG_MR: memory operations the
	// requester executes itself when they reach it, without a packet
	// (rxe_req.c rxe_do_local_ops).
	kindLocal
)

// sendWQE is a posted send work request with its transport progress.
type sendWQE struct {
	wr       ibv.SendWR // SGList aliases sgl, InlineData aliases inline
	sgl      []ibv.SGE
	inline   []byte
	kind     wrKind
	length   uint32 // message length in bytes
	signaled bool
	state    wqeState
	status   ibv.WCStatus
	firstPSN wire.PSN
	lastPSN  wire.PSN
	sendOff  uint32 // next byte the requester sends (SEND/WRITE)
	// aheadSafe: the WQE's responses may be placed before those of the
	// WQEs ahead of it (completer.aheadSafeLocked).
	aheadSafe bool
	// askedAt is when a request for the WQE's responses last went out
	// again (a READ or atomic sent again by a go-back-N, or re-asked); a
	// re-ask waits until its answer is overdue (completer.askedLongAgo).
	askedAt time.Time
	// sentAt is when a READ's request first went out, until the first
	// of its responses came and timed it (completer.timeReadLocked).
	sentAt time.Time
	orig   uint64       // atomic: original remote value
	bind   ibv.MWBindWR // BIND_MW: a copy of wr.Bind
	reg    ibv.RegMRWR  // REG_MR: a copy of wr.Reg
	rndv   rndvWQE      // a rendezvous's READ or FIN (tm.go), not the application's
	// sendErr is the errno of a UC packet of the WQE the link refused
	// as unroutable (ucFlushLocked).
	sendErr syscall.Errno
}

// needsResponse reports whether the WQE completes only on an explicit
// response (READ data, atomic ACK, the empty READ response to FLUSH and
// ATOMIC WRITE) rather than a coalescable ACK. These are also the WQEs
// the initiator depth counts: rxe's check_init_depth counts READ, atomics
// and ATOMIC WRITE; softnic counts FLUSH too, because the responder spends
// a responder resource on it (rxe_prepare_res) and a requester that sent
// more than max_dest_rd_atomic of them could push an unanswered READ's
// resource out of the ring.
func (w *sendWQE) needsResponse() bool {
	switch w.kind {
	case kindRead, kindAtomic, kindFlush, kindAtomicWrite:
		return true
	}
	return false
}

// sendQueue is a ring of send WQEs indexed by ever-increasing positions.
type sendQueue struct {
	ring    []sendWQE
	headIdx uint64 // oldest not yet retired
	tailIdx uint64 // next free
	// idleTail is tailIdx when a post last found the queue empty: the
	// WQEs posted since are the queue's last busy spell (QP.post).
	idleTail uint64
}

func (q *sendQueue) init(n, maxSGE, maxInline int) {
	if n < 1 {
		n = 1
	}
	q.ring = make([]sendWQE, n)
	for i := range q.ring {
		q.ring[i].sgl = make([]ibv.SGE, 0, maxSGE)
		q.ring[i].inline = make([]byte, 0, maxInline)
	}
}

func (q *sendQueue) reset()               { q.headIdx, q.tailIdx, q.idleTail = 0, 0, 0 }
func (q *sendQueue) empty() bool          { return q.headIdx == q.tailIdx }
func (q *sendQueue) at(i uint64) *sendWQE { return &q.ring[i%uint64(len(q.ring))] }
func (q *sendQueue) head() *sendWQE       { return q.at(q.headIdx) }
func (q *sendQueue) pop()                 { q.headIdx++ }
func (q *sendQueue) count() int           { return int(q.tailIdx - q.headIdx) }
func (q *sendQueue) valid(i uint64) bool  { return i >= q.headIdx && i < q.tailIdx }

// kindOf classifies op for qp's type; ok is false for opcodes the QP type
// does not support. RC and XRC_SEND take every opcode of ibv_post_send(3) and
// ibv_wr_post(3) but TSO; UC takes SEND, WRITE (with immediate) and the
// local operations LOCAL_INV, BIND_MW and REG_MR, which need no transport
// (the ibv_post_send(3) table; rdmavt and mlx5 allow all three on UC, rxe
// BIND_MW only). UC refuses SEND_WITH_INV although that table marks it:
// IBTA defines no UC SEND with Invalidate opcode (Table 38 has only the
// RC and XRC ones, and package wire has none for UC), and rxe's
// next_opcode_uc fails it too.
func kindOf(t ibv.QPType, op ibv.WROpcode) (wrKind, bool) {
	rc := t != ibv.QPTypeUC // RC and XRC_SEND
	switch op {
	case ibv.WRSend, ibv.WRSendWithImm:
		return kindSend, true
	case ibv.WRSendWithInv:
		return kindSend, rc
	case ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm:
		return kindWrite, true
	case ibv.WRRDMARead:
		return kindRead, rc
	case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		return kindAtomic, rc
	case ibv.WRFlush:
		return kindFlush, rc
	case ibv.WRAtomicWrite:
		return kindAtomicWrite, rc
	case ibv.WRLocalInv, ibv.WRBindMW, ibv.WRRegMR:
		return kindLocal, true
	}
	return 0, false
}

// PostSend queues wrs in order (ibv_post_send). It stops at the first WR
// it refuses and returns its index with an error wrapping errno.Invalid,
// errno.Full or transport.ErrState; the WRs before it are posted. The
// Run is what the engine should run for the WRs posted (post).
func (qp *QP) PostSend(wrs []ibv.SendWR) (int, transport.Run, error) {
	return qp.post(wrs, false)
}

// PostSendAll posts every WR of wrs, or none if any is refused or the
// send queue has no room for all of them (ibv_wr_complete).
func (qp *QP) PostSendAll(wrs []ibv.SendWR) (transport.Run, error) {
	_, run, err := qp.post(wrs, true)
	return run, err
}

// post runs the shared post path (transport.SendPost) with the RC/UC
// rules for wrs: all of them or none when all is set. It asks the engine
// to run the requester at once, on the posting goroutine, for one
// request of one packet to an idle send queue (onePacketLocked): the
// WRs then leave before the post returns. A post to a queue with work
// outstanding joins it and leaves the sending to the processor, which
// sends the backlog in batches; so does the first post after a stream
// (streamPosts), which the posts behind it join.
func (qp *QP) post(wrs []ibv.SendWR, all bool) (int, transport.Run, error) {
	qp.mu.Lock()
	now := false
	if q := &qp.sq; q.count() == 0 {
		now = len(wrs) == 1 && qp.onePacketLocked(&wrs[0]) && q.tailIdx-q.idleTail < streamPosts
		q.idleTail = q.tailIdx
	}
	p := transport.SendPost{SQ: postSQ{qp}, N: len(wrs), All: all}
	for p.Next() {
		switch p.Step {
		case transport.CheckWR:
			p.Err = qp.checkSendWR(&wrs[p.WR])
		case transport.QueueWR:
			p.Err = qp.enqueueLocked(&wrs[p.WR])
		}
	}
	qp.mu.Unlock()
	qp.flushEvents() // a flush in ERR may have raised some
	return p.Posted, transport.PostRun(p.Posted, now), p.Err
}

// streamPosts is the fewest WQEs a send queue's last busy spell (from a
// post that found it empty to the next) took for a post to the empty
// queue not to send at once (post): the application streams, and posts
// more right behind this one. A ping-pong or an RPC posts one request,
// or a few, a turn and waits for them, and its next post leaves at once
// as before. A stream that refills its window (perftest's send_bw posts
// a hundred SENDs at each completion, and the ACK that brings it retires
// every request) sent its first post alone: a system call, and on the
// peer a read and an ACK of its own, for one packet, where the posts
// behind it leave together moments later.
const streamPosts = 16

// postSQ is the QP's send queue as transport.SendPost reads it, with
// qp.mu held.
type postSQ struct{ qp *QP }

func (s postSQ) PostState() ibv.QPState { return s.qp.state }
func (s postSQ) Free() int              { return len(s.qp.sq.ring) - s.qp.sq.count() }
func (s postSQ) Size() int              { return len(s.qp.sq.ring) }
func (s postSQ) FlushPosted()           { s.qp.flushLocked() }

// onePacketLocked reports whether wr's request is one packet: a READ or
// an atomic, or a message of at most one path MTU. Only such a post to an
// idle queue runs the requester on the posting goroutine (post): latency
// is a small message's figure, while a long message's packets leave in
// bigger batches, and on a processor that works beside the application,
// when the engine sends them.
func (qp *QP) onePacketLocked(wr *ibv.SendWR) bool {
	switch wr.Opcode {
	case ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		return true
	}
	n := len(wr.InlineData)
	for _, sge := range wr.SGList {
		n += int(sge.Length)
	}
	return n <= qp.pmtu
}

// checkSendWR validates a WR against the QP (ibv_post_send(3); rxe
// provider validate_send_wr).
func (qp *QP) checkSendWR(wr *ibv.SendWR) error {
	kind, ok := kindOf(qp.cfg.Type, wr.Opcode)
	if !ok {
		if wr.Opcode == ibv.WRSendWithInv {
			return fmt.Errorf("%w: opcode %v not supported on %v QPs (IBTA defines no UC SEND with Invalidate)",
				errno.Invalid, wr.Opcode, qp.cfg.Type)
		}
		return fmt.Errorf("%w: opcode %v not supported on %v QPs", errno.Invalid, wr.Opcode, qp.cfg.Type)
	}
	if wr.Flags&ibv.SendInline != 0 {
		switch kind {
		case kindRead, kindAtomic, kindFlush, kindLocal:
			return fmt.Errorf("%w: IBV_SEND_INLINE on %v", errno.Invalid, wr.Opcode)
		}
	}
	// ATOMIC WRITE's 8 bytes travel in the WQE and do not count against
	// max_inline_data (rxe provider wr_atomic_write).
	length, err := transport.CheckSendCaps(wr, &qp.cfg.Cap, kind == kindAtomicWrite)
	if err != nil {
		return err
	}
	if wr.Flags&ibv.SendInline != 0 && wr.InlineData == nil {
		if err := qp.cfg.Mem.CheckGather(qp.cfg.PD, wr.SGList); err != nil {
			return transport.InlineError(err)
		}
	}
	if length > MaxMsgSize {
		return fmt.Errorf("%w: message of %d bytes exceeds max_msg_sz %d", errno.Invalid, length, MaxMsgSize)
	}
	switch kind {
	case kindAtomic:
		if length < 8 {
			return fmt.Errorf("%w: atomic needs an 8-byte local buffer, got %d", errno.Invalid, length)
		}
		if wr.RemoteAddr&7 != 0 {
			return fmt.Errorf("%w: atomic remote address %#x not 8-byte aligned", errno.Invalid, wr.RemoteAddr)
		}
	case kindAtomicWrite:
		// IBA A19.4.2: exactly 8 bytes to an 8-byte aligned address.
		if length != 8 {
			return fmt.Errorf("%w: ATOMIC_WRITE carries exactly 8 bytes, got %d", errno.Invalid, length)
		}
		if wr.RemoteAddr&7 != 0 {
			return fmt.Errorf("%w: ATOMIC_WRITE remote address %#x not 8-byte aligned", errno.Invalid, wr.RemoteAddr)
		}
	case kindFlush:
		// IBA A19.4.4: placement type global (1), persistent (2) or both;
		// selectivity range (0) or whole MR (1).
		if wr.FlushType == 0 || wr.FlushType&^(wire.FlushGlobal|wire.FlushPersistent) != 0 {
			return fmt.Errorf("%w: FLUSH placement type %d (want IBV_FLUSH_GLOBAL and/or IBV_FLUSH_PERSISTENT)", errno.Invalid, wr.FlushType)
		}
		if wr.FlushLevel > wire.FlushMR {
			return fmt.Errorf("%w: FLUSH selectivity level %d (want IBV_FLUSH_RANGE or IBV_FLUSH_MR)", errno.Invalid, wr.FlushLevel)
		}
		if wr.FlushLen > MaxMsgSize-1 {
			return fmt.Errorf("%w: FLUSH length %d above 2^31-1", errno.Invalid, wr.FlushLen)
		}
	case kindLocal:
		switch {
		case wr.Opcode == ibv.WRBindMW && wr.Bind == nil:
			return fmt.Errorf("%w: BIND_MW without bind information", errno.Invalid)
		case wr.Opcode == ibv.WRRegMR && wr.Reg == nil:
			return fmt.Errorf("%w: REG_MR without registration information", errno.Invalid)
		}
	}
	return nil
}

// MaxMsgSize is the largest message (ibv_device_attr max_msg_sz; rxe 2^31).
const MaxMsgSize = 1 << 31

// enqueueLocked puts wr in the send queue. It fails only when inline data
// given by SGEs cannot be read (transport.InlineError): checkSendWR has
// checked them, so only an MR deregistered in between gets here; the
// queue is then unchanged.
func (qp *QP) enqueueLocked(wr *ibv.SendWR) error {
	w := qp.sq.at(qp.sq.tailIdx)
	sgl, inline := w.sgl[:0], w.inline[:0]
	*w = sendWQE{sgl: sgl, inline: inline}
	// Copy the WR field by field: copying the whole struct would let the
	// caller's SGE slice escape to the heap on every post.
	w.wr.WRID, w.wr.Opcode, w.wr.Flags = wr.WRID, wr.Opcode, wr.Flags
	w.wr.Imm, w.wr.InvRKey = wr.Imm, wr.InvRKey
	w.wr.RemoteAddr, w.wr.RKey = wr.RemoteAddr, wr.RKey
	w.wr.CompareAdd, w.wr.Swap = wr.CompareAdd, wr.Swap
	w.wr.RemoteQPN, w.wr.RemoteQKey, w.wr.RemoteSRQN = wr.RemoteQPN, wr.RemoteQKey, wr.RemoteSRQN
	w.wr.FlushType, w.wr.FlushLevel, w.wr.FlushLen = wr.FlushType, wr.FlushLevel, wr.FlushLen
	w.kind, _ = kindOf(qp.cfg.Type, wr.Opcode)
	w.sgl = append(w.sgl, wr.SGList...)
	w.wr.SGList = w.sgl
	if wr.Bind != nil {
		w.bind = *wr.Bind
	}
	if wr.Reg != nil {
		w.reg = *wr.Reg
	}
	if wr.Flags&ibv.SendInline != 0 {
		if wr.InlineData != nil {
			w.inline = append(w.inline, wr.InlineData...)
		} else {
			var err error
			if w.inline, err = qp.cfg.Mem.Gather(qp.cfg.PD, wr.SGList, w.inline); err != nil {
				return transport.InlineError(err)
			}
		}
		w.wr.InlineData = w.inline
		w.length = uint32(len(w.inline))
	} else {
		for _, s := range w.sgl {
			w.length += s.Length
		}
	}
	switch w.kind {
	case kindAtomic:
		w.length = 8
	case kindFlush:
		w.length = wr.FlushLen // no local data; the range's length (rxe wr_flush: dma.length)
	case kindLocal:
		w.length = 0
	}
	w.signaled = transport.Signaled(qp.cfg.SigAll, wr.Flags)
	qp.sq.tailIdx++
	return nil
}
