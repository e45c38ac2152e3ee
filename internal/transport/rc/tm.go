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
//   - anything else — a tag nothing matches, any tagged message while
//     matching is off, a RNDV (softnic does no rendezvous: it goes
//     unexpected with its RVH, as an unmatched one does), a FIN, a first
//     packet shorter than the TMH or a TMH with an unknown opcode: an
//     unexpected message, whole into an SRQ buffer, completed as
//     IBV_WC_RECV with IBV_WC_TM_SYNC_REQ, and counted for the phase sync.
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
		if wc.Status == ibv.WCSuccess {
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
