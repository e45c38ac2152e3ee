package rc

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// tmKind is what a SEND on a tag-matching SRQ turned out to be at its
// first packet.
type tmKind uint8

const (
	tmNone       tmKind = iota // not on a TM-SRQ (or no message yet)
	tmMatched                  // an EAGER message placed into a tagged buffer
	tmUnexpected               // delivered whole into an SRQ buffer, counted
	tmNoTag                    // a NO_TAG message, delivered whole, not counted
)

// tmState is the responder's tag-matching state of the message in
// progress.
type tmState struct {
	kind   tmKind
	handle uint32 // tmMatched: the consumed tag's handle
	tag    uint64 // tmMatched: the TMH's tag and app_ctx
	priv   uint32
	multi  bool // tmMatched: the message spans packets (a MATCH completion went out)
	sync   bool // tmUnexpected: the completion asks for a sync
	// rndvSW: a matched RNDV request whose data does not fit the tagged
	// buffer; the request itself went there, for software to finish.
	rndvSW bool
}

// startTMLocked chooses, at the first packet of a SEND on a QP whose SRQ
// is a tag-matching SRQ, where the message goes, and returns the part of
// the packet's payload to place (rdma-core Documentation/tag_matching.md;
// providers/mlx5/cq.c handle_tag_matching):
//
//   - EAGER whose tag matches a listed tagged buffer (matching on): the
//     payload after the TMH goes into the tagged buffer, completed as
//     IBV_WC_TM_RECV. A message of several packets gives two completions
//     as on mlx5: one with IBV_WC_TM_MATCH at once (mlx5's TM_EXPECTED
//     CQE) and one with IBV_WC_TM_DATA_VALID at its end (TM_CONSUMED); a
//     single-packet message gives one with both (TM_CONSUMED_MSG).
//   - NO_TAG: an ordinary receive into an SRQ buffer, the message whole
//     (its TMH included: tag_matching.md delivers every message HW does
//     not match whole), completed as IBV_WC_TM_NO_TAG; not unexpected.
//   - RNDV whose tag matches (one packet, the QP in RTS): the rendezvous
//     (rndvLocked) reads the sender's data into the tagged buffer.
//   - FIN: delivered like NO_TAG.
//   - anything else — a tag nothing matches, any tagged message while
//     matching is off (an unmatched RNDV goes with its RVH and user
//     data), a first packet shorter than the TMH or a TMH with an unknown
//     opcode: an unexpected message, whole into an SRQ buffer, completed
//     as IBV_WC_RECV with IBV_WC_TM_SYNC_REQ, and counted for the phase
//     sync.
//
// With no SRQ buffer for a message that needs one, the answer is an RNR
// NAK as on any SRQ, and nothing is counted: the retry chooses again.
func (r *responder) startTMLocked(qp *QP, p *wire.Packet) ([]byte, respErr) {
	l := qp.cfg.TM
	r.tm = tmState{}
	m, err := wire.ParseTM(p.Payload)
	if err == nil {
		switch m.TMH.Op() {
		case wire.TMNoTag:
			if !r.takeWQELocked(qp) {
				return nil, errRNR
			}
			r.tm.kind = tmNoTag
			return p.Payload, respOK
		case wire.TMFin:
			// A FIN ends a rendezvous this side asked for: it is the
			// application's business, delivered like NO_TAG and not
			// counted as unexpected (softnic's choice).
			if !r.takeWQELocked(qp) {
				return nil, errRNR
			}
			r.tm.kind = tmNoTag
			return p.Payload, respOK
		case wire.TMRndv:
			if !p.Is(wire.MaskEnd) || qp.state != ibv.QPStateRTS {
				break // longer than a packet, or no way to READ: unexpected
			}
			if qp.sq.count()+2 > len(qp.sq.ring) {
				// No room for the READ and the FIN: come back later.
				return nil, errRNR
			}
			if h, ok := l.Match(m.TMH.Tag(), &r.wqe); ok {
				return r.rndvLocked(qp, p, m, h)
			}
		case wire.TMEager:
			if h, ok := l.Match(m.TMH.Tag(), &r.wqe); ok {
				r.haveWQE, r.recvOff = true, 0
				r.tm = tmState{kind: tmMatched, handle: h, tag: m.TMH.Tag(), priv: m.TMH.AppCtx(), multi: !p.Is(wire.MaskEnd)}
				if r.tm.multi {
					wc := &qp.wc
					*wc = ibv.WorkCompletion{
						WRID: r.wqe.WRID, Opcode: ibv.WCTMRecv, Flags: ibv.WCTMMatch,
						QPNum: qp.cfg.QPN, SrcQP: qp.attr.DestQPN, TMTag: r.tm.tag, TMPriv: r.tm.priv,
					}
					if !qp.cfg.RecvCQ.Push(wc, false) {
						return nil, errCQOverflow
					}
				}
				return m.Data, respOK
			}
		}
	}
	if !r.takeWQELocked(qp) {
		return nil, errRNR
	}
	r.tm = tmState{kind: tmUnexpected, sync: l.Unexpected()}
	return p.Payload, respOK
}

// completeTMLocked fills in the tag-matching part of the completion of a
// message startTMLocked placed, and gives a matched message's tag back to
// the list.
func (r *responder) completeTMLocked(qp *QP, wc *ibv.WorkCompletion) {
	switch r.tm.kind {
	case tmMatched:
		wc.Opcode, wc.TMTag, wc.TMPriv = ibv.WCTMRecv, r.tm.tag, r.tm.priv
		switch {
		case wc.Status == ibv.WCSuccess && r.tm.rndvSW:
			wc.Status, wc.Flags = ibv.WCTMRndvIncomplete, wc.Flags|ibv.WCTMMatch
		case wc.Status == ibv.WCSuccess:
			wc.Flags |= ibv.WCTMDataValid
			if !r.tm.multi {
				wc.Flags |= ibv.WCTMMatch
			}
		}
		qp.cfg.TM.Release(r.tm.handle)
	case tmUnexpected:
		if r.tm.sync {
			wc.Flags |= ibv.WCTMSyncReq
		}
	case tmNoTag:
		wc.Opcode = ibv.WCTMNoTag
	}
	r.tm = tmState{}
}

// dropTMLocked gives back the tag of a matched message that will not
// complete (the QP flushes or resets): its WQE is flushed or dropped with
// the QP's.
func (r *responder) dropTMLocked(qp *QP) {
	if r.tm.kind == tmMatched {
		qp.cfg.TM.Release(r.tm.handle)
	}
	r.tm = tmState{}
}

// rndvKind marks the send WQEs a rendezvous adds to the QP's send queue.
type rndvKind uint8

const (
	rndvNone rndvKind = iota // the application's WQE
	rndvRead                 // the READ of the sender's data
	rndvFin                  // the FIN back to the sender
)

// rndvWQE is what a rendezvous's READ remembers for its completion.
type rndvWQE struct {
	kind   rndvKind
	handle uint32 // the consumed tag
	wrid   uint64 // the tag's recv_wr_id
	tag    uint64
	priv   uint32
}

// rndvLocked runs a rendezvous for RNDV request p, which matched tag
// handle h (r.wqe holds the tagged buffer): as tag_matching.md describes
// it, the receiver RDMA READs the RVH's range into the tagged buffer on
// the same RC QP, then SENDs a FIN (the TMH with opcode FIN: "Rendezvous
// response: TMH") back; the buffer completes as IBV_WC_TM_RECV with
// IBV_WC_TM_MATCH|IBV_WC_TM_DATA_VALID when the READ has completed.
//
// softnic differs from mlx5 in that the READ and the FIN are WQEs of the
// QP's own send queue (the FIN fenced behind the READ): they take two of
// its slots (a full queue answers the request with an RNR NAK) and never
// complete on its send CQ. The user data after the RVH is not placed.
//
// Data larger than the tagged buffer is not read: the request itself
// (TMH, RVH, user data) goes into the buffer and completes with
// IBV_WC_TM_RNDV_INCOMPLETE, for software to do the rendezvous (mlx5
// handle_tag_matching: TM_CONSUMED_MSG_SW_RDNV).
func (r *responder) rndvLocked(qp *QP, p *wire.Packet, m wire.TMMessage, h uint32) ([]byte, respErr) {
	tag, priv := m.TMH.Tag(), m.TMH.AppCtx()
	if uint64(m.RVH.Len()) > r.wqe.Length {
		r.haveWQE, r.recvOff = true, 0
		r.tm = tmState{kind: tmMatched, handle: h, tag: tag, priv: priv, rndvSW: true}
		return p.Payload, respOK
	}
	// The READ: the buffer's SGEs cut to the RVH's length.
	sgl := r.wqe.SGList
	left := m.RVH.Len()
	for i := range sgl {
		if sgl[i].Length >= left {
			sgl[i].Length, sgl = left, sgl[:i+1]
			break
		}
		left -= sgl[i].Length
	}
	if m.RVH.Len() == 0 {
		sgl = nil
	}
	read := ibv.SendWR{Opcode: ibv.WRRDMARead, SGList: sgl, RemoteAddr: m.RVH.VA(), RKey: m.RVH.RKey()}
	if err := qp.enqueueLocked(&read); err != nil {
		qp.cfg.TM.Release(h)
		return nil, errMalformedWQE
	}
	w := qp.sq.at(qp.sq.tailIdx - 1)
	w.signaled = true
	w.rndv = rndvWQE{kind: rndvRead, handle: h, wrid: r.wqe.WRID, tag: tag, priv: priv}
	var fin [wire.TMHLen]byte
	wire.PutTMH(fin[:], wire.TMFin, priv, tag)
	send := ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendInline | ibv.SendFence, InlineData: fin[:]}
	if err := qp.enqueueLocked(&send); err != nil {
		return nil, errMalformedWQE // not reached: inline data from memory of our own
	}
	w = qp.sq.at(qp.sq.tailIdx - 1)
	w.signaled = false
	w.rndv = rndvWQE{kind: rndvFin}
	r.haveWQE, r.tm = false, tmState{}
	return nil, respOK
}

// completeRndvLocked completes a rendezvous's WQE w: its READ completes
// the tagged buffer on the TM-SRQ's CQ (with the READ's error, or
// WR_FLUSH_ERR, if it failed) and gives the tag back; its FIN completes
// nothing.
func (qp *QP) completeRndvLocked(w *sendWQE) {
	if w.rndv.kind != rndvRead {
		return
	}
	wc := &qp.wc
	*wc = ibv.WorkCompletion{
		WRID: w.rndv.wrid, Status: w.status, Opcode: ibv.WCTMRecv, QPNum: qp.cfg.QPN, SrcQP: qp.attr.DestQPN,
		TMTag: w.rndv.tag, TMPriv: w.rndv.priv,
	}
	if w.status == ibv.WCSuccess {
		wc.ByteLen, wc.Flags = w.length, ibv.WCTMMatch|ibv.WCTMDataValid
	}
	qp.cfg.TM.Release(w.rndv.handle)
	w.rndv.kind = rndvNone
	if !qp.cfg.RecvCQ.Push(wc, false) {
		qp.toErrorLocked()
	}
}

// dropRndvLocked gives back the tags of rendezvous READs the send queue
// drops without completing (a reset).
func (qp *QP) dropRndvLocked() {
	for i := qp.sq.headIdx; i < qp.sq.tailIdx; i++ {
		if w := qp.sq.at(i); w.rndv.kind == rndvRead && w.state != wqeDone {
			qp.cfg.TM.Release(w.rndv.handle)
			w.rndv.kind = rndvNone
		}
	}
}
