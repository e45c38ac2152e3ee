// Package tm is the tag-matching engine of a tag-matching SRQ
// (ibv_post_srq_ops(3), rdma-core Documentation/tag_matching.md): the list
// of tagged buffers the application adds and deletes by handle, the match
// of an incoming TMH tag against it, and the phase synchronisation that
// turns matching off while software has not seen every unexpected message.
//
// It knows nothing of packets: the RC responder asks Match at the first
// packet of a tagged SEND, counts an unexpected message with Unexpected,
// and gives a consumed tag back with Release when its message completes.
//
// softnic differs from mlx5 (providers/mlx5/qp.c mlx5_post_srq_ops,
// providers/mlx5/cq.c handle_tag_matching) in that a list operation is
// done, and its completion written, inside the post: no operation is ever
// outstanding, so MaxOps bounds the operations of one post.
package tm

import (
	"fmt"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
)

// state is where a tag list entry is.
type state uint8

const (
	free     state = iota // on the free list, no buffer
	listed                // in the list, matchable
	consumed              // matched by a message not yet completed
)

// entry is one tagged buffer, indexed by its handle.
type entry struct {
	state state
	seq   uint64 // posting order: the earliest listed match wins
	tag   uint64
	mask  uint64
	wqe   transport.RecvWQE // WRID is the add's recv_wr_id
}

// List is a tag-matching SRQ's tag list and phase state. It is safe for
// concurrent use: the application posts operations, the engine matches.
// Completions of list operations go to cq; the caller must not hold a lock
// the CQ's consumers take.
type List struct {
	cq     transport.CQ
	maxSGE int
	maxOps int

	mu    sync.Mutex
	tags  []entry  // guarded by mu; by handle
	free  []uint32 // guarded by mu; a ring of the free handles, oldest first
	head  int      // guarded by mu: the ring's oldest
	nfree int      // guarded by mu: free handles in the ring
	seq   uint64   // guarded by mu
	// hwUnexp counts unexpected messages (the NIC's phase); swUnexp is the
	// unexpected_cnt software last reported with IBV_OPS_TM_SYNC. Matching
	// is on only while they are equal (tag_matching.md: "tag matching must
	// be disabled for new tags until SW and HW synchronize").
	hwUnexp uint32 // guarded by mu
	swUnexp uint32 // guarded by mu
}

// New makes a tag list of maxTags entries of up to maxSGE SGEs, taking at
// most maxOps operations per post, completing them on cq.
func New(maxTags, maxOps, maxSGE int, cq transport.CQ) *List {
	l := &List{cq: cq, maxSGE: maxSGE, maxOps: maxOps, tags: make([]entry, maxTags)}
	l.free, l.nfree = make([]uint32, maxTags), maxTags
	for i := range l.free {
		l.free[i] = uint32(i)
		l.tags[i].wqe.SGList = make([]ibv.SGE, 0, maxSGE)
	}
	return l
}

// MaxTags returns the list's capacity.
func (l *List) MaxTags() int { return len(l.tags) }

// Post runs ops in order (ibv_post_srq_ops). It stops at the first it
// cannot run and returns its index with an error, as ibv_post_srq_ops's
// bad_wr; the ops before it are done. A WRTagAdd writes its handle back
// into ops[i].Handle.
//
//   - WRTagAdd with the list full, or an op beyond MaxOps in one post:
//     errno.Full (ENOMEM, as mlx5_post_srq_ops: "tag matching list
//     is full", work queue overflow);
//   - more SGEs than the list's max_sge, an unknown opcode, or a
//     WRTagDel handle outside the list: errno.Invalid (EINVAL;
//     mlx5 checks num_sge ≤ 1 only in debug builds and indexes its list
//     with the handle unchecked — softnic refuses it).
//
// A WRTagDel of a handle that is not listed (consumed by a message, or
// already deleted) completes with WCTMErr whether signaled or not, as
// mlx5's TM_REMOVE CQE reports a failed removal ("Remove reports failure
// if tag was consumed meanwhile", handle_tag_matching). Any op with
// OpsTMSync sets the unexpected count software reports; signaled op
// completions carry WCTMSyncReq while that count lags the NIC's (mlx5:
// hw_phase_cnt != the op's phase_cnt).
func (l *List) Post(ops []ibv.OpsWR) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ops {
		op := &ops[i]
		if i >= l.maxOps {
			return i, fmt.Errorf("%w: %d list operations in one post, max_ops %d", errno.Full, len(ops), l.maxOps)
		}
		status := ibv.WCSuccess
		var opcode ibv.WCOpcode
		switch op.Opcode {
		case ibv.WRTagAdd:
			if len(op.SGList) > l.maxSGE {
				return i, fmt.Errorf("%w: TAG_ADD with %d SGEs, max %d", errno.Invalid, len(op.SGList), l.maxSGE)
			}
			if l.nfree == 0 {
				return i, fmt.Errorf("%w: tag list holds %d tags", errno.Full, len(l.tags))
			}
			h := l.free[l.head]
			l.head, l.nfree = (l.head+1)%len(l.free), l.nfree-1
			e := &l.tags[h]
			l.seq++
			e.state, e.seq, e.tag, e.mask = listed, l.seq, op.Tag, op.Mask
			e.wqe.WRID = op.RecvWRID
			e.wqe.SGList = append(e.wqe.SGList[:0], op.SGList...)
			e.wqe.Length = 0
			for _, s := range op.SGList {
				e.wqe.Length += uint64(s.Length)
			}
			op.Handle = h
			opcode = ibv.WCTMAdd
		case ibv.WRTagDel:
			if op.Handle >= uint32(len(l.tags)) {
				return i, fmt.Errorf("%w: TAG_DEL handle %d, the list has %d", errno.Invalid, op.Handle, len(l.tags))
			}
			if e := &l.tags[op.Handle]; e.state == listed {
				l.releaseLocked(op.Handle)
			} else {
				status = ibv.WCTMErr
			}
			opcode = ibv.WCTMDel
		case ibv.WRTagSync:
			opcode = ibv.WCTMSync
		default:
			return i, fmt.Errorf("%w: list operation opcode %d", errno.Invalid, op.Opcode)
		}
		if op.Flags&ibv.OpsTMSync != 0 {
			l.swUnexp = op.UnexpectedCnt
		}
		if op.Flags&ibv.OpsSignaled == 0 && status == ibv.WCSuccess {
			continue
		}
		wc := ibv.WorkCompletion{WRID: op.WRID, Status: status, Opcode: opcode}
		if l.swUnexp != l.hwUnexp {
			wc.Flags |= ibv.WCTMSyncReq
		}
		l.cq.Push(&wc, false)
	}
	return len(ops), nil
}

// releaseLocked frees handle h; it is handed out again after the handles
// freed before it (mlx5 keeps its free entries in a list the same way,
// mlx5_tm_release_tag).
func (l *List) releaseLocked(h uint32) {
	l.tags[h].state = free
	l.free[(l.head+l.nfree)%len(l.free)] = h
	l.nfree++
}

// Match looks tag up (the TMH tag of an incoming EAGER or RNDV message):
// the earliest posted listed entry with tag & mask == entry tag
// (ibv_post_srq_ops(3): "TMH.tag & entry.mask == entry.tag"; MPI order,
// tag_matching.md). It consumes the entry, copies its buffer into out and
// returns its handle. It finds nothing while matching is off (software's
// unexpected count lags the NIC's).
func (l *List) Match(tag uint64, out *transport.RecvWQE) (handle uint32, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.swUnexp != l.hwUnexp {
		return 0, false
	}
	best := -1
	for i := range l.tags {
		e := &l.tags[i]
		if e.state == listed && tag&e.mask == e.tag && (best < 0 || e.seq < l.tags[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	e := &l.tags[best]
	e.state = consumed
	out.WRID, out.Length = e.wqe.WRID, e.wqe.Length
	out.SGList = append(out.SGList[:0], e.wqe.SGList...)
	return uint32(best), true
}

// Release frees the entry a Match consumed, once its message completed
// (or was flushed).
func (l *List) Release(handle uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if handle < uint32(len(l.tags)) && l.tags[handle].state == consumed {
		l.releaseLocked(handle)
	}
}

// Unexpected counts one unexpected message (a tagged message that did not
// match, or any message delivered whole to an SRQ buffer as IBV_WC_RECV)
// and returns whether its completion asks for a sync: always, since the
// NIC's count now runs ahead of software's until software reports it
// (ibv_post_srq_ops(3): IBV_WC_TM_SYNC_REQ "may be returned by unexpected
// receive WC"; softnic asks at every difference, mlx5 only past a
// backlog of MLX5_TM_MAX_SYNC_DIFF).
func (l *List) Unexpected() (syncReq bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hwUnexp++
	return l.hwUnexp != l.swUnexp
}

// Matching reports whether matching is on (the counts agree) and the
// NIC's unexpected count.
func (l *List) Matching() (on bool, unexpected uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.swUnexp == l.hwUnexp, l.hwUnexp
}
