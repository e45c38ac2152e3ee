package transport

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// The modify and flush plumbing RC, UC and UD share; what a state change
// does to a QP (its timers, its send queue, the events it raises) stays
// with each transport.

// StoreAttrs copies into a the attributes of attr that mask selects, as
// ibv_query_qp returns them afterwards (rxe_qp.c rxe_qp_from_attr): the
// destination QPN cut to 24 bits, max_rd_atomic and max_dest_rd_atomic
// rounded up to a power of two. The caller has validated mask and values
// (CheckModify, CheckAttrValues), so only attributes of its QP type are
// set; it applies what they change in the transport itself.
func StoreAttrs(a, attr *ibv.QPAttr, mask ibv.AttrMask) {
	if mask&ibv.QPAttrAccessFlags != 0 {
		a.AccessFlags = attr.AccessFlags
	}
	if mask&ibv.QPAttrPKeyIndex != 0 {
		a.PKeyIndex = attr.PKeyIndex
	}
	if mask&ibv.QPAttrPort != 0 {
		a.PortNum = attr.PortNum
	}
	if mask&ibv.QPAttrQKey != 0 {
		a.QKey = attr.QKey
	}
	if mask&ibv.QPAttrAV != 0 {
		a.AHAttr = attr.AHAttr
	}
	if mask&ibv.QPAttrPathMTU != 0 {
		a.PathMTU = attr.PathMTU
	}
	if mask&ibv.QPAttrTimeout != 0 {
		a.Timeout = attr.Timeout
	}
	if mask&ibv.QPAttrRetryCnt != 0 {
		a.RetryCnt = attr.RetryCnt
	}
	if mask&ibv.QPAttrRNRRetry != 0 {
		a.RNRRetry = attr.RNRRetry
	}
	if mask&ibv.QPAttrRQPSN != 0 {
		a.RQPSN = attr.RQPSN
	}
	if mask&ibv.QPAttrMaxQPRdAtomic != 0 {
		a.MaxRdAtomic = roundUpPow2(attr.MaxRdAtomic)
	}
	if mask&ibv.QPAttrMinRNRTimer != 0 {
		a.MinRNRTimer = attr.MinRNRTimer
	}
	if mask&ibv.QPAttrSQPSN != 0 {
		a.SQPSN = attr.SQPSN
	}
	if mask&ibv.QPAttrMaxDestRdAtomic != 0 {
		a.MaxDestRdAtomic = roundUpPow2(attr.MaxDestRdAtomic)
	}
	if mask&ibv.QPAttrDestQPN != 0 {
		a.DestQPN = attr.DestQPN & wire.QPNMask
	}
	if mask&ibv.QPAttrEnSQDAsyncNotify != 0 {
		a.EnSQDAsyncNotify = attr.EnSQDAsyncNotify
	}
}

// roundUpPow2 is RoundUpPow2 for the uint8 attributes, at most 255.
func roundUpPow2(n uint8) uint8 { return uint8(min(RoundUpPow2(uint32(n)), 255)) }

// FlushRecvWQE completes receive WQE r of QP qpn on cq with WR_FLUSH_ERR
// (IBTA 10.3.1, ERR; 10.8.3.3 for receives posted in ERR).
func FlushRecvWQE(cq CQ, qpn uint32, r *RecvWQE) {
	wc := FlushedRecv(r, qpn)
	cq.Push(&wc, false)
}

// FlushRecvs completes a QP's receives with WR_FLUSH_ERR in posting order
// (IBTA 10.3.1, ERR): first *held, the receive WQE the QP took from its
// queue and has not completed, if *haveHeld (it is then released); then,
// unless the queue is shared, every receive still posted on rq. A shared
// queue (an SRQ or a WQ) keeps its receives for its other QPs.
func FlushRecvs(cq CQ, qpn uint32, held *RecvWQE, haveHeld *bool, rq *RecvQueue, shared bool) {
	if *haveHeld {
		*haveHeld = false
		FlushRecvWQE(cq, qpn, held)
	}
	if !shared {
		rq.Flush(cq, qpn)
	}
}

// DiscardRecvs drops every receive posted on a QP's own receive queue
// without completions, as a modify to RESET does (IBTA 10.3.1, RESET); a
// shared queue keeps them.
func DiscardRecvs(rq *RecvQueue, shared bool) {
	if !shared {
		rq.Drain(func(*RecvWQE) {})
	}
}
