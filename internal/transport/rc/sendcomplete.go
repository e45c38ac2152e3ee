package rc

// Completing send WQEs: work completions in order, errors, and retiring
// WQEs off the send ring (rxe_comp.c do_complete, make_send_cqe).

import (
	"encoding/binary"

	"github.com/softnic/softnic/ibv"
)

// completeLocalsLocked completes, in order, the executed local operations
// that every earlier WQE has completed before; it stops at the first WQE
// still outstanding: the completer's walk with nothing newly acknowledged.
func (qp *QP) completeLocalsLocked() {
	qp.comp.advanceLocked(qp)
	qp.retireLocked()
}

// completeLocalLocked completes the executed local operation w, all of
// whose predecessors are done. It reports false when w failed: the QP is
// then in ERR.
func (qp *QP) completeLocalLocked(w *sendWQE) bool {
	if w.status != ibv.WCSuccess {
		qp.completeSendLocked(w, true)
		qp.toErrorLocked()
		return false
	}
	qp.completeSendLocked(w, false)
	return true
}

// putAtomicResult stores an atomic's original value in the WQE's local
// buffer in CPU byte order (rxe_comp.c do_atomic: atmack_orig → host order).
func (qp *QP) putAtomicResult(w *sendWQE) error {
	var v [8]byte
	binary.NativeEndian.PutUint64(v[:], w.orig)
	return qp.cfg.Mem.Scatter(qp.cfg.PD, w.sgl, 0, v[:])
}

// localErrorLocked fails w with a local error status and moves the QP to
// ERR (rxe_req.c req_error).
func (qp *QP) localErrorLocked(w *sendWQE, st ibv.WCStatus) {
	w.status = st
	w.state = wqePending
	qp.cfg.Counters.SendErr.Add(1)
	qp.completeSendLocked(w, true)
	qp.toErrorLocked()
}

// completeSendLocked posts w's completion if it is signaled or failed
// (errors always complete, IBTA 10.7.3.1) and marks it done.
func (qp *QP) completeSendLocked(w *sendWQE, force bool) {
	if w.state == wqeDone {
		return
	}
	w.state = wqeDone
	if !(w.signaled || force || w.status != ibv.WCSuccess) {
		return
	}
	if w.rndv.kind != rndvNone {
		// A rendezvous's own WQE (signaled only if it is its READ).
		qp.completeRndvLocked(w)
		return
	}
	wc := &qp.wc // a field, so the interface call does not move it to the heap
	*wc = ibv.WorkCompletion{
		WRID:   w.wr.WRID,
		Status: w.status,
		Opcode: wcOpcode(w.wr.Opcode),
		QPNum:  qp.cfg.QPN,
	}
	if w.status == ibv.WCSuccess {
		wc.ByteLen = w.length
	}
	if !qp.cfg.SendCQ.Push(wc, false) {
		qp.toErrorLocked() // CQ overrun: the QP goes to error (IBTA 11.4.2.1)
	}
}

// retireLocked pops completed WQEs off the head of the SQ.
func (qp *QP) retireLocked() {
	for !qp.sq.empty() && qp.sq.head().state == wqeDone && qp.sq.headIdx < qp.req.idx {
		qp.sq.pop()
	}
}

func wcOpcode(op ibv.WROpcode) ibv.WCOpcode {
	switch op {
	case ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm:
		return ibv.WCRDMAWrite
	case ibv.WRRDMARead:
		return ibv.WCRDMARead
	case ibv.WRAtomicCmpAndSwp:
		return ibv.WCCompSwap
	case ibv.WRAtomicFetchAndAdd:
		return ibv.WCFetchAdd
	case ibv.WRLocalInv:
		return ibv.WCLocalInv
	case ibv.WRBindMW:
		return ibv.WCBindMW
	case ibv.WRFlush:
		return ibv.WCFlush
	case ibv.WRAtomicWrite:
		return ibv.WCAtomicWrite
	case ibv.WRRegMR:
		return ibv.WCRegMR
	}
	return ibv.WCSend
}
