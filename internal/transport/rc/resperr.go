package rc

import (
	"errors"
	"sync/atomic"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// respErr is an error the responder finds in a request: one value per
// cause, as rxe_resp.c's enum resp_states has one RESPST_ERR_* state per
// cause. respRules says once what each one does on RC (STYLE.md 27).
type respErr uint8

const (
	respOK respErr = iota
	// errPSNOutOfSeq: a request beyond the expected PSN (RESPST_ERR_PSN_OUT_OF_SEQ).
	errPSNOutOfSeq
	// errRNR: no receive WQE for a SEND or WRITE_WITH_IMM (RESPST_ERR_RNR).
	errRNR
	// errMissingOpcode: MIDDLE/LAST without a message open, or FIRST/ONLY
	// inside one (RESPST_ERR_MISSING_OPCODE_FIRST, _LAST_C).
	errMissingOpcode
	// errUnsupportedOpcode: an operation the QP's access flags do not
	// allow, an opcode the responder does not execute, or a FLUSH whose
	// placement type or selectivity the IBA does not define
	// (RESPST_ERR_UNSUPPORTED_OPCODE; rxe check_op_valid,
	// check_qp_attr_access).
	errUnsupportedOpcode
	// errTooManyRdAtomic: a READ, atomic, FLUSH or ATOMIC WRITE on a QP
	// with max_dest_rd_atomic 0 (RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
	errTooManyRdAtomic
	// errLength: a payload the PMTU, the RETH or max_msg_sz does not allow
	// (RESPST_ERR_LENGTH from check_length and check_rkey).
	errLength
	// errRecvLength: a SEND longer than the receive WQE (RESPST_ERR_LENGTH
	// from send_data_in's -ENOSPC).
	errRecvLength
	// errMisalignedAtomic: an atomic or ATOMIC WRITE to an address not
	// 8-byte aligned (RESPST_ERR_MISALIGNED_ATOMIC).
	errMisalignedAtomic
	// errRKeyViolation: the rkey does not grant the access over the range
	// (RESPST_ERR_RKEY_VIOLATION).
	errRKeyViolation
	// errMalformedWQE: the MR table refuses the receive WQE's SGEs
	// (RESPST_ERR_MALFORMED_WQE).
	errMalformedWQE
	// errInvalidateRKey: SEND with Invalidate names an rkey the QP may
	// not invalidate (RESPST_ERR_INVALIDATE_RKEY).
	errInvalidateRKey
	// errCQOverflow: the receive CQ refused a completion (RESPST_ERR_CQ_OVERFLOW).
	errCQOverflow
	// errXRCSRQ: an XRC request whose XRCETH names no XRC SRQ of the
	// target QP's XRC domain (IBTA 9.3.7; rxe has no XRC, so no rxe name).
	errXRCSRQ
)

// errClass is how an error is handled (IBTA 9.9.2 responder error
// classes; rxe_resp.c rxe_responder's RESPST_ERR_* cases).
type errClass uint8

const (
	// classB: NAK, drop the packet, the QP carries on.
	classB errClass = iota + 1
	// classC: NAK, complete the receive WQE in use with an error, QP to
	// ERR (IBTA 9.9.2.4; class A is handled alike, rxe do_class_ac_error).
	classC
	// classJ: the message is executed and acknowledged, its receive WQE
	// completes with an error and the QP goes to ERR (IBTA 10.6.5 SEND
	// with Invalidate; rxe RESPST_ERR_INVALIDATE_RKEY).
	classJ
	// classG: the QP goes to ERR at once (rxe RESPST_ERR_CQ_OVERFLOW).
	classG
)

// respRule is what the RC responder does for one respErr.
type respRule struct {
	class errClass
	// syn is the NAK's AETH syndrome (class B and C). An RNR NAK's timer
	// field comes from the QP's min_rnr_timer.
	syn wire.Syndrome
	// atEPSN: the NAK carries the expected PSN instead of the request's
	// (C9-109: a sequence NAK names the PSN the responder wants).
	atEPSN bool
	// status completes the receive WQE in use (class C and J; a class C
	// error outside a SEND or WRITE_WITH_IMM has none in use). A class C
	// rule without one completes it with the status of its NAK code, the
	// status the requester's completer fails its WQE with for that NAK
	// (transport.NAKStatus: one table for both sides, STYLE.md 27).
	status ibv.WCStatus
	// count is the counter the error adds to, if any.
	count func(*transport.Counters) *atomic.Uint64
	// event is the affiliated event reported besides the QP-fatal one of
	// ERR, if any.
	event ibv.AsyncEventType
	// uc counts a UC message dropped for this error. UC sends no NAK and
	// its QP stays up: every error the UC responder meets drops the
	// message (IBTA 9.8.3; rxe RESPST_ERR_* cases for UC: classes D, D1,
	// E). softnic deliberately differs from rxe where rxe completes the
	// receive WQE in use: on a UC QP with an SRQ (RKEY_VIOLATION, LENGTH,
	// class E) and for a malformed WQE (class A); softnic drops the message
	// and keeps the WQE for the next one.
	uc func(*transport.Counters) *atomic.Uint64
}

func outOfSequence(c *transport.Counters) *atomic.Uint64     { return &c.OutOfSequence }
func sendRNRErr(c *transport.Counters) *atomic.Uint64        { return &c.SendRNRErr }
func invalidRequestErr(c *transport.Counters) *atomic.Uint64 { return &c.InvalidRequestErr }
func remoteAccessErr(c *transport.Counters) *atomic.Uint64   { return &c.RemoteAccessErr }
func remoteOpErr(c *transport.Counters) *atomic.Uint64       { return &c.RemoteOpErr }
func dropUCMessage(c *transport.Counters) *atomic.Uint64     { return &c.DropUCMessage }
func dropLength(c *transport.Counters) *atomic.Uint64        { return &c.DropLength }

// respRules maps each responder error to its handling: the one place
// where a cause meets its NAK code, WC status, counter and event. The
// status of a NAK code is transport.NAKStatus's, the table the
// requester's completer reads too; a row names a status only where it
// differs or sends no NAK.
var respRules = [...]respRule{
	// C9-109 (rxe check_psn): a gap is NAKed once with the expected PSN.
	errPSNOutOfSeq: {class: classB, syn: wire.NakPSNSequence, atEPSN: true, count: outOfSequence,
		uc: dropUCMessage},
	// C9-133 (rxe check_resource): RNR NAK with the failed PSN.
	errRNR: {class: classB, syn: wire.SyndromeRNRNAK, count: sendRNRErr, uc: dropUCMessage},
	// C9-92 (rxe check_op_seq).
	errMissingOpcode: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr, uc: dropUCMessage},
	// C9-93 (rxe check_op_valid).
	errUnsupportedOpcode: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr, uc: dropUCMessage},
	// rxe check_resource: max_dest_rd_atomic 0 accepts no READ or atomic.
	errTooManyRdAtomic: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr},
	// C9-89..C9-92 (rxe check_length, rxe_resp_check_length).
	errLength: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr, uc: dropLength},
	// rxe send_data_in: -ENOSPC is RESPST_ERR_LENGTH, an invalid request
	// to the requester. softnic completes the receive with LOC_LEN_ERR
	// (what the receive side saw); rxe reports REM_INV_REQ_ERR.
	errRecvLength: {class: classC, syn: wire.NakInvalidRequest, status: ibv.WCLocLenErr,
		count: invalidRequestErr, event: ibv.EventQPReqErr, uc: dropLength},
	// C9-128 (rxe atomic_reply, rxe_mr_do_atomic_op).
	errMisalignedAtomic: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr},
	// NAK code 2, remote access error (IBTA Table 44; rxe check_rkey):
	// IBV_EVENT_QP_ACCESS_ERR.
	errRKeyViolation: {class: classC, syn: wire.NakRemoteAccess,
		count: remoteAccessErr, event: ibv.EventQPAccessErr, uc: dropUCMessage},
	// rxe class A: NAK remote operational error. softnic completes the
	// receive with LOC_PROT_ERR (the SGE check that failed); rxe reports
	// LOC_QP_OP_ERR.
	errMalformedWQE: {class: classC, syn: wire.NakRemoteOp, status: ibv.WCLocProtErr,
		count: remoteOpErr, event: ibv.EventQPReqErr, uc: dropLength},
	// IBTA 9.4.1.2 / 10.6.5 (rxe invalidate_rkey): class J, no NAK.
	errInvalidateRKey: {class: classJ, status: ibv.WCRemInvReqErr},
	// IBTA 11.4.2.1 CQ overrun (rxe do_complete): class G.
	errCQOverflow: {class: classG},
	// IBTA 9.3.7: the XRCETH's SRQ must be an XRC SRQ of the target QP's
	// XRC domain; else an invalid request NAK, as for any request the
	// responder cannot take (class C).
	errXRCSRQ: {class: classC, syn: wire.NakInvalidRequest,
		count: invalidRequestErr, event: ibv.EventQPReqErr},
}

// recvStatus is the status the rule completes the receive WQE in use
// with: its own, else for class C its NAK code's (respRule.status);
// WCSuccess for none.
func (r *respRule) recvStatus() ibv.WCStatus {
	if r.status == ibv.WCSuccess && r.class == classC {
		return transport.NAKStatus(r.syn)
	}
	return r.status
}

// remoteErr maps the MR table's refusal of a remote access (mem.Table
// Remote, RemoteV, RemoteAtomic, Flush) to the responder error: a
// misaligned atomic address is an invalid request, as is a FLUSH the IBA
// does not define; every other refusal (key, PD, rights, range) is a
// remote access error (mem/errors.go; rxe check_rkey).
func remoteErr(err error) respErr {
	switch {
	case errors.Is(err, mem.ErrAlign):
		return errMisalignedAtomic
	case errors.Is(err, errno.Invalid):
		return errUnsupportedOpcode
	}
	return errRKeyViolation
}

// errorLocked handles responder error e found in request p the way
// respRules says (rxe_resp.c rxe_responder, RESPST_ERR_* cases). out may
// be nil for class G.
func (r *responder) errorLocked(qp *QP, out transport.Output, e respErr, p *wire.Packet) {
	rule := &respRules[e]
	if rule.count != nil {
		rule.count(qp.cfg.Counters).Add(1)
	}
	switch rule.class {
	case classB, classC:
		syn, psn := rule.syn, p.PSN()
		if syn == wire.SyndromeRNRNAK {
			syn = wire.RNRNAK(qp.attr.MinRNRTimer)
		}
		if rule.atEPSN {
			r.nakGapLocked(qp, out)
			return
		}
		r.nakLocked(qp, out, syn, psn)
	case classJ:
		r.acceptLocked(qp, p, out)
	}
	if rule.class == classB {
		return
	}
	if st := rule.recvStatus(); st != ibv.WCSuccess && r.haveWQE {
		r.completeRecvLocked(qp, st, nil)
	}
	if rule.event != 0 {
		qp.events.Add(rule.event)
	}
	qp.toErrorLocked()
}
