package ud

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// receiveLocked runs one datagram through the UD responder (rxe_resp.c
// for IB_QPT_UD: no PSN or opcode-sequence checks, no acknowledgement).
// The engine has checked the ICRC, the destination GID, the P_Key and
// that the opcode is a UD one. Every refusal is counted and dropped.
func (qp *QP) receiveLocked(p *transport.RxPacket) {
	c := qp.cfg.Counters
	pkt := &p.Pkt
	// Requests need RTR or later (rxe_recv.c check_type_state); SQD and
	// SQE still receive.
	if qp.state < ibv.QPStateRTR || qp.state == ibv.QPStateErr {
		c.DropState.Add(1)
		return
	}
	// The DETH Q_Key must be the QP's (IBTA 10.2.5; rxe_recv.c
	// check_keys: qkey_viol_cntr).
	deth := pkt.DETH()
	if deth == nil || !pkt.Is(wire.MaskSend) {
		c.DropMalformed.Add(1)
		return
	}
	if deth.QKey() != qp.attr.QKey {
		c.DropQKey.Add(1)
		return
	}
	// CHK_RESOURCE: a UD datagram without a receive WQE is dropped, never
	// RNR-NAKed (rxe_resp.c check_resource: RESPST_ERR_RNR → drop for UD).
	if !qp.haveWQE {
		if !qp.cfg.RQ.Take(&qp.wqe) {
			c.DropNoRecvWQE.Add(1)
			return
		}
		qp.haveWQE = true
	}
	// CHK_LENGTH: the GRH area and the payload must fit the receive
	// buffer (rxe_resp_check_length). Without an SRQ the datagram is
	// dropped and the WQE stays for the next one (rxe: class D, drop_msg,
	// the WQE not consumed); with an SRQ the WQE was taken from the shared
	// queue and completes in error (rxe: class E, IB_WC_REM_INV_REQ_ERR).
	n := GRHLen + len(pkt.Payload)
	if uint64(n) > qp.wqe.Length {
		c.DropLength.Add(1)
		if qp.cfg.SRQ {
			qp.completeRecvLocked(ibv.WCRemInvReqErr, p, 0)
		}
		return
	}
	var grh [GRHLen]byte
	PutGRH(grh[:], &p.Encap, len(p.Data))
	if err := qp.cfg.Mem.Scatter(qp.cfg.PD, qp.wqe.SGList, 0, grh[:]); err != nil {
		qp.malformedWQELocked(p)
		return
	}
	if err := qp.cfg.Mem.Scatter(qp.cfg.PD, qp.wqe.SGList, GRHLen, pkt.Payload); err != nil {
		qp.malformedWQELocked(p)
		return
	}
	c.RDMARecvs.Add(1)
	qp.completeRecvLocked(ibv.WCSuccess, p, uint32(n))
}

// malformedWQELocked handles a receive WQE the MR table refuses: the WQE
// completes with a local protection error and the QP moves to ERR (rxe:
// RESPST_ERR_MALFORMED_WQE, class A, for every QP type).
func (qp *QP) malformedWQELocked(p *transport.RxPacket) {
	qp.completeRecvLocked(ibv.WCLocProtErr, p, 0)
	if qp.state != ibv.QPStateErr {
		qp.toErrorLocked(true)
	}
}

// completeRecvLocked completes the held receive WQE with st (rxe_resp.c
// do_complete for UD): the source QP from the DETH, IBV_WC_GRH, and a
// byte count that includes the 40 GRH bytes (rxe-interop-facts.md §2.11).
// A CQ overrun moves the QP to ERR.
func (qp *QP) completeRecvLocked(st ibv.WCStatus, p *transport.RxPacket, byteLen uint32) {
	qp.haveWQE = false
	pkt := &p.Pkt
	wc := ibv.WorkCompletion{
		WRID:   qp.wqe.WRID,
		Status: st,
		Opcode: ibv.WCRecv,
		QPNum:  qp.cfg.QPN,
		SrcQP:  pkt.DETH().SrcQP(),
	}
	if st == ibv.WCSuccess {
		wc.ByteLen = byteLen
		wc.Flags = ibv.WCGRH
		if im := pkt.ImmDt(); im != nil {
			wc.Flags |= ibv.WCWithImm
			wc.Imm = im.Imm()
		}
	}
	if !qp.cfg.RecvCQ.Push(&wc, pkt.SE()) && qp.state != ibv.QPStateErr {
		qp.toErrorLocked(true)
	}
}

// PutGRH writes into dst (at least GRHLen bytes) the GRH area rxe puts
// before a UD payload, a union rdma_network_hdr rebuilt from the
// datagram's headers: for IPv4, 20 zero bytes and then the 20-byte IPv4
// header; for IPv6, the 40-byte IPv6 header. udpPayload is the length of
// the UDP payload (BTH through ICRC), from which the IP lengths follow.
func PutGRH(dst []byte, e *wire.Encap, udpPayload int) {
	var hdr [wire.IPv6HeaderLen + wire.UDPHeaderLen]byte
	n := e.PutHeaders(hdr[:], udpPayload) - wire.UDPHeaderLen
	clear(dst[:GRHLen-n])
	copy(dst[GRHLen-n:GRHLen], hdr[:n])
}
