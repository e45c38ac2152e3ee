package ud

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// sendWQE is a posted UD send work request: the WR's fields the requester
// needs, with its own copies of the SGE list, the inline data and the
// address vector (resolved from the address handle at post time, so the
// handle may be destroyed once the WR is posted).
type sendWQE struct {
	wrid      uint64
	opcode    ibv.WROpcode
	flags     ibv.SendFlags
	imm       uint32
	sgl       []ibv.SGE
	inline    []byte
	isInline  bool
	length    uint64
	signaled  bool
	av        ibv.AHAttr
	remoteQPN uint32
	qkey      uint32
	// tsoHdr and mss are a TSO WR's header (copied at post) and piece
	// size; pieces is the number of datagrams the WQE sends (1 but for
	// TSO), sent how many of them the link took, queued how many are
	// queued on it this pass.
	tsoHdr               []byte
	mss                  uint16
	pieces, sent, queued int
	// status is not success when the WR is known to fail before it is
	// sent: its address handle was destroyed or belongs to another PD.
	status ibv.WCStatus
	// sendState is where the WQE's datagrams are; psn is the first one's
	// PSN, taken from the QP (with one PSN for each piece) when the WQE
	// is first sent (hasPSN), kept for a resend; piece k has psn+k.
	sendState wqeSendState
	psn       wire.PSN
	hasPSN    bool
	// sendErr is the link's errno for the last send of a datagram.
	sendErr syscall.Errno
}

// wqeSendState is a UD send WQE's progress.
type wqeSendState uint8

const (
	wqeUnsent wqeSendState = iota // not (all) sent yet, or to be sent again
	wqeQueued                     // datagrams of it are queued on the link this pass
	wqeSent                       // all sent (or none was due): complete in order
)

// sendQueue is a ring of send WQEs.
type sendQueue struct {
	ring       []sendWQE
	head, tail uint64 // ever-increasing positions
}

func (q *sendQueue) init(n, maxSGE, maxInline, maxTSOHeader int) {
	q.ring = make([]sendWQE, max(n, 1))
	for i := range q.ring {
		q.ring[i].sgl = make([]ibv.SGE, 0, maxSGE)
		q.ring[i].inline = make([]byte, 0, maxInline)
		if maxTSOHeader > 0 {
			q.ring[i].tsoHdr = make([]byte, 0, maxTSOHeader)
		}
	}
}

func (q *sendQueue) reset()               { q.head, q.tail = 0, 0 }
func (q *sendQueue) empty() bool          { return q.head == q.tail }
func (q *sendQueue) free() int            { return len(q.ring) - int(q.tail-q.head) }
func (q *sendQueue) at(i uint64) *sendWQE { return &q.ring[i%uint64(len(q.ring))] }

// pop removes the oldest WQE and returns it; its slot stays intact until
// a later post reuses it.
func (q *sendQueue) pop() *sendWQE {
	w := q.at(q.head)
	q.head++
	return w
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

// post runs the shared post path (transport.SendPost) with the UD rules
// for wrs: all of them or none when all is set. One WR posted to an idle
// send queue is sent at once, on the posting goroutine, as RC sends one
// packet to an idle queue (transport.RunNow): its completion is queued
// before the post returns, as rxe's post_send runs its requester at
// once; a post to a queue with work outstanding joins it and leaves the
// sending to the processor, which sends the backlog in batches.
func (qp *QP) post(wrs []ibv.SendWR, all bool) (int, transport.Run, error) {
	qp.mu.Lock()
	now := qp.sq.empty() && len(wrs) == 1
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
	qp.flushEvents() // a flush in ERR or SQE may have raised some
	return p.Posted, transport.PostRun(p.Posted, now), p.Err
}

// postSQ is the QP's send queue as transport.SendPost reads it, with
// qp.mu held.
type postSQ struct{ qp *QP }

func (s postSQ) PostState() ibv.QPState { return s.qp.state }
func (s postSQ) Free() int              { return s.qp.sq.free() }
func (s postSQ) Size() int              { return len(s.qp.sq.ring) }
func (s postSQ) FlushPosted()           { s.qp.flushSendLocked() }

// checkSendWR validates a WR against the QP (ibv_post_send(3): a UD QP
// takes SEND and SEND_WITH_IMM with an address handle; rxe provider
// validate_send_wr), and TSO on a QP created with max_tso_header
// (checkTSO; rxe takes no TSO).
func (qp *QP) checkSendWR(wr *ibv.SendWR) error {
	switch wr.Opcode {
	case ibv.WRSend, ibv.WRSendWithImm, ibv.WRTSO:
	default:
		return fmt.Errorf("%w: opcode %v not supported on UD QPs", errno.Invalid, wr.Opcode)
	}
	if wr.AH == nil {
		return fmt.Errorf("%w: UD send without an address handle", errno.Invalid)
	}
	if av, pd, ok := wr.AH.AddressVector(); av == nil {
		return fmt.Errorf("%w: UD send with a nil address handle", errno.Invalid)
	} else if ok && pd == 0 {
		// A bare address vector is checked here; an address handle was
		// checked when it was created.
		if err := CheckAV(av, qp.cfg.LocalAddr); err != nil {
			return err
		}
	}
	if wr.RemoteQPN > wire.QPNMask {
		return fmt.Errorf("%w: remote QPN %#x does not fit 24 bits", errno.Invalid, wr.RemoteQPN)
	}
	n, err := transport.CheckSendCaps(wr, &qp.cfg.Cap, false)
	if err != nil {
		return err
	}
	if wr.Opcode == ibv.WRTSO {
		if err := qp.checkTSO(wr, n); err != nil {
			return err
		}
	}
	if wr.Flags&ibv.SendInline != 0 && wr.InlineData == nil {
		if err := qp.cfg.Mem.CheckGather(qp.cfg.PD, wr.SGList); err != nil {
			return transport.InlineError(err)
		}
	}
	return nil
}

// enqueueLocked puts wr in the send queue. It fails only when inline data
// given by SGEs cannot be read (transport.InlineError): checkSendWR has
// checked them, so only an MR deregistered in between gets here; the
// queue is then unchanged.
func (qp *QP) enqueueLocked(wr *ibv.SendWR) error {
	w := qp.sq.at(qp.sq.tail)
	sgl, inline, hdr := w.sgl[:0], w.inline[:0], w.tsoHdr[:0]
	*w = sendWQE{
		wrid: wr.WRID, opcode: wr.Opcode, flags: wr.Flags, imm: wr.Imm,
		remoteQPN: wr.RemoteQPN, qkey: wr.RemoteQKey,
		signaled: transport.Signaled(qp.cfg.SigAll, wr.Flags),
		pieces:   1,
	}
	if qp.cfg.GSI {
		w.qkey = wire.GSIQKey // rxe_req.c init_req_packet: QP1 sends GSI_QKEY
	}
	w.sgl = append(sgl, wr.SGList...)
	w.inline = inline
	w.tsoHdr = hdr
	if wr.Flags&ibv.SendInline != 0 {
		w.isInline = true
		if wr.InlineData != nil {
			w.inline = append(w.inline, wr.InlineData...)
		} else {
			var err error
			if w.inline, err = qp.cfg.Mem.Gather(qp.cfg.PD, wr.SGList, w.inline); err != nil {
				return transport.InlineError(err)
			}
		}
		w.length = uint64(len(w.inline))
	} else {
		for _, s := range w.sgl {
			w.length += uint64(s.Length)
		}
	}
	if wr.Opcode == ibv.WRTSO {
		w.tsoHdr = append(w.tsoHdr, wr.TSOHeader...) // within its capacity: checkTSO
		w.mss = wr.MSS
		w.pieces = tsoPieces(w.length, w.mss)
	}
	// Resolve the address handle now. One destroyed, or of another PD,
	// fails the WR when its turn comes, as rxe_get_av does (local QP
	// operation error).
	av, pd, ok := wr.AH.AddressVector()
	switch {
	case !ok:
		w.status = ibv.WCLocQPOpErr
	case pd != 0 && pd != qp.cfg.PD.Handle():
		w.status = ibv.WCLocQPOpErr
	default:
		w.av = *av
	}
	qp.sq.tail++
	return nil
}

// CheckAV checks an address vector for a UD destination of a NIC at
// local: RoCE needs a global route with a valid, specified destination
// GID of the local address's family, GID index 0 (the GID table has one
// entry) and port 1 (0 is taken as 1) (rdma_check_ah_attr,
// rxe_av_chk_attr).
func CheckAV(av *ibv.AHAttr, local netip.Addr) error {
	g := &av.GRH
	switch {
	case !av.IsGlobal:
		return fmt.Errorf("%w: RoCE needs a global route (is_global = 0)", errno.Invalid)
	case !g.DGID.IsValid() || g.DGID.Unmap().IsUnspecified():
		return fmt.Errorf("%w: dgid %v is not a destination", errno.Invalid, g.DGID)
	case g.DGID.Unmap().Is4() != local.Unmap().Is4():
		return fmt.Errorf("%w: dgid %v is not of the device address %v's family", errno.Invalid, g.DGID, local)
	case g.SGIDIndex != 0:
		return fmt.Errorf("%w: sgid_index %d (the GID table has index 0)", errno.Invalid, g.SGIDIndex)
	case av.PortNum > 1:
		return fmt.Errorf("%w: port_num %d (the device has port 1)", errno.Invalid, av.PortNum)
	}
	return nil
}

// sendLocked sends up to budget queued datagrams, one per WQE or, for a
// TSO WQE, one per piece, and reports whether sendable work is left
// (rxe_req.c rxe_requester for UD QPs: a single SEND_ONLY packet per
// WQE, completed once sent). A TSO WQE larger than the budget sends its
// pieces over several passes; it completes once its last piece is sent.
//
// Send errors. When out is a transport.Flusher (the engine's is), the QP
// flushes its datagrams and learns which the link could not send, and
// does what rxe_requester does with rxe_xmit_packet's error:
//
//   - no route to the destination (transport.Unroutable: ENETUNREACH,
//     EHOSTUNREACH, ...): rxe finds it before sending (rxe_find_route
//     fails, finish_packet returns -EHOSTUNREACH) and fails the WQE with
//     IB_WC_LOC_QP_OP_ERR; so does softnic, and the QP goes to SQE as for
//     its other UD send errors (rxe moves it to ERR);
//   - any other error (EMSGSIZE, EPERM from a firewall, ENOBUFS, ...):
//     rxe_send returns -EAGAIN for every ip_local_out failure, and the
//     requester rolls the WQE back to before the packet (rollback_state,
//     the PSN too) and reschedules itself at once (rxe_sched_task) to
//     send it again: the WQE is not completed until its packet goes out,
//     and every failed attempt counts send_err (rxe_xmit_packet). softnic
//     does the same: the WQE stays at the head with its PSN and Process
//     reports more work, so the processor runs the QP again. As in rxe,
//     an error that persists (a firewall rule) keeps the QP retrying
//     until the cause goes or the QP is modified or destroyed. A TSO WQE
//     resumes from its first piece the link refused, with that piece's
//     PSN; pieces after it that the link did take in the same pass are
//     sent again (a UD receiver may see them twice).
//
// Datagrams of later WQEs of the same pass that did go out are not sent
// again (rxe would not have sent them before the head's): they complete,
// in order, once the head's has gone.
//
// In SQD nothing new starts, but a TSO WQE caught midway sends its other
// pieces and completes (IBTA 10.3.1: the WQEs in progress complete
// before the send queue is drained); the drain is reported then.
func (qp *QP) sendLocked(out transport.Output) bool {
	finishing := false
	if qp.state != ibv.QPStateRTS {
		// SQE, ERR: the queue was flushed.
		if qp.state != ibv.QPStateSQD || !qp.midWQELocked() {
			return false
		}
		finishing = true
	}
	more := qp.sendPassLocked(out, finishing)
	if finishing && qp.state == ibv.QPStateSQD && !qp.midWQELocked() {
		qp.sqDrainedLocked()
		return false
	}
	return more
}

// midWQELocked reports whether the WQE at the head has sent some of its
// datagrams but not all: a TSO WQE midway.
func (qp *QP) midWQELocked() bool {
	if qp.sq.empty() {
		return false
	}
	w := qp.sq.at(qp.sq.head)
	return w.status == ibv.WCSuccess && w.sent > 0 && w.sent < w.pieces
}

// sendPassLocked is one pass of sendLocked: only the head WQE when
// finishing it in SQD.
func (qp *QP) sendPassLocked(out transport.Output, finishing bool) bool {
	// Queue the datagrams of the WQEs at the head, within the budget.
	qp.lens = qp.lens[:0]
	end, limit := qp.sq.head, qp.sq.tail
	if finishing {
		limit = qp.sq.head + 1
	}
	// paced: the pacer stopped the pass (congestion control); its timer
	// wakes the QP, which is not run again before.
	paced := false
	var now time.Time
	if qp.rp != nil {
		now = qp.cfg.Clock.Now()
	}
	for n := 0; n < budget && end != limit && len(qp.lens) < budget && !paced; n++ {
		w := qp.sq.at(end)
		if w.status != ibv.WCSuccess {
			break // it fails when its turn comes, below
		}
		end++
		if w.sendState == wqeSent {
			continue
		}
		if !w.hasPSN {
			w.psn, w.hasPSN = qp.psn, true
			qp.psn = qp.psn.Add(uint32(w.pieces))
		}
		if _, n := w.piece(0); len(w.tsoHdr)+n > qp.cfg.MTU() {
			// C10-93.1.1: a UD message longer than the port MTU emits no
			// packet and raises no error; rxe completes it successfully
			// ("fake a successful UD send", and consumes a PSN), and so
			// does softnic. A TSO WQE gets here only when the port MTU
			// shrank after its post (checkTSO), and consumes its PSNs.
			w.sendState = wqeSent
			continue
		}
		for w.sent+w.queued < w.pieces && len(qp.lens) < budget {
			if qp.rp != nil {
				if d := qp.rp.Wait(now); d > 0 {
					qp.pace.Arm(qp.cfg.Clock, d, qp.cfg.Waker)
					paced = true
					break
				}
			}
			n, ok := qp.sendPacketLocked(w, w.sent+w.queued, out)
			if !ok {
				w.status = ibv.WCLocProtErr
				break
			}
			if qp.rp != nil {
				qp.rp.Sent(n+qp.encap.HeaderLen(), now)
			}
			qp.lens = append(qp.lens, n)
			w.queued++
		}
		if w.queued > 0 {
			w.sendState = wqeQueued
		}
		if w.status != ibv.WCSuccess || w.sent+w.queued < w.pieces {
			break // a piece failed, or the budget ran out within the WQE
		}
	}
	// Learn what the link did with them.
	var errs []syscall.Errno
	if f, ok := out.(transport.Flusher); ok {
		errs = f.Flush()
	}
	j := 0
	for i := qp.sq.head; i != end; i++ {
		w := qp.sq.at(i)
		if w.sendState != wqeQueued {
			continue
		}
		w.sendErr = 0
		for k := range w.queued {
			e := syscall.Errno(0)
			if j+k < len(errs) {
				e = errs[j+k]
			}
			if w.sendErr != 0 {
				continue // after a refused piece: sent again from there
			}
			if e != 0 {
				w.sendErr = e
				continue
			}
			// sent_pkts and the bytes are counted by the Output, for
			// what the link took (rxe_xmit_packet counts sent_pkts
			// after rxe_send); a UD SEND is counted once sent.
			qp.cfg.Counters.RDMASends.Add(1)
			w.sent++
		}
		j += w.queued
		w.queued = 0
		w.sendState = wqeUnsent
		if w.sent == w.pieces {
			w.sendState = wqeSent
		}
	}
	// Complete in order.
	for !qp.sq.empty() {
		w := qp.sq.at(qp.sq.head)
		switch {
		case w.status != ibv.WCSuccess:
			qp.sendErrorLocked(w.status)
			return false
		case w.sendState == wqeSent:
			qp.completeSendLocked(qp.sq.pop())
			if qp.state != ibv.QPStateRTS {
				return false // the send CQ overflowed
			}
		case w.sendErr != 0 && transport.Unroutable(w.sendErr):
			qp.sendErrorLocked(ibv.WCLocQPOpErr)
			return false
		default:
			// Not (all) sent yet, or to be sent again at once; a QP
			// over its rate waits for its pacer's timer.
			return !paced
		}
	}
	return false
}

// sendPacketLocked builds and queues datagram k of w (its piece k, for
// TSO) and returns its length. It reports false when the WQE's memory
// cannot be read (its SGE fails the MR checks).
func (qp *QP) sendPacketLocked(w *sendWQE, k int, out transport.Output) (int, bool) {
	var h wire.Headers
	h.BTH.Opcode = wire.UDSendOnly
	if w.opcode == ibv.WRSendWithImm {
		h.BTH.Opcode = wire.UDSendOnlyImm
		h.Imm = w.imm
	}
	h.BTH.SE = w.flags&ibv.SendSolicited != 0
	h.BTH.PKey = wire.DefaultPKey
	h.BTH.DestQP = w.remoteQPN
	h.BTH.PSN = w.psn.Add(uint32(k))
	// AckReq as rxe puts it on the wire: set on QP1's MADs (the rping
	// capture, wire/testdata/rping_cm.pcap), clear on every other UD QP's
	// datagrams (rxe's ud_pingpong captures). rxe_req.c init_req_packet
	// asks for an ACK on a message's last packet by QP type, and QP1 is
	// IB_QPT_GSI there, not IB_QPT_UD. UD never answers either way.
	h.BTH.AckReq = qp.cfg.GSI
	qkey := w.qkey
	if qkey&qkeyUseQP != 0 {
		// IBTA 10.2.5: a Q_Key with its high-order bit set in a send WR
		// means "use the QP's Q_Key" (rxe deth_set_qkey sends the WR's
		// value verbatim; softnic follows the spec).
		qkey = qp.attr.QKey
	}
	h.DETH = wire.DETHFields{QKey: qkey, SrcQP: qp.cfg.QPN}

	b := out.Buf()
	hdr, err := wire.PutHeaders(b, &h)
	if err != nil {
		panic(err) // the two UD opcodes are in the table: unreachable
	}
	off, n := w.piece(k)
	th := copy(b[hdr:], w.tsoHdr) // a TSO piece starts with the WR's header
	if err := qp.gather(w, off, b[hdr+th:hdr+th+n]); err != nil {
		return 0, false
	}
	// The Encap lives in the QP: a local's address passed to the Output
	// interface would move it to the heap, an allocation per datagram.
	e := &qp.encap
	*e = qp.encapFor(&w.av)
	total, err := wire.Finish(b, e, hdr, th+n)
	if err != nil {
		panic(err) // th+n is at most the port MTU: unreachable
	}
	out.Send(total, e)
	return total, true
}

// encapFor returns the IP/UDP header of a datagram to av (rxe_net.c
// prepare4/prepare6 with the AH's address vector): the AH's traffic
// class, the route's hop limit (the AH's for a multicast group), its flow
// label on IPv6, DF on IPv4, and the QP's fixed source port. A multicast
// destination GID sends to that IP multicast address; the WR names
// DestQP 0xFFFFFF itself, as mckey does.
func (qp *QP) encapFor(av *ibv.AHAttr) wire.Encap {
	g := &av.GRH
	e := transport.RouteEncap(qp.cfg.LocalAddr, g, qp.cfg.DstPort)
	e.SrcPort = qp.srcPort
	if g.HopLimit != 0 && e.Dst.IsMulticast() {
		// A multicast address vector is not resolved through a route, so
		// its hop limit is the AH's (ib_resolve_eth_dmac maps a multicast
		// GID to its MAC and leaves the GRH alone); 0 keeps the route's.
		e.HopLimit = g.HopLimit
	}
	if !e.Dst.Is4() {
		e.FlowLabel = g.FlowLabel & 0xFFFFF
	}
	return e
}

// gather copies bytes [off, off+len(dst)) of the WQE's message into dst
// from its inline data or its SGEs, checking each SGE against the MR
// table.
func (qp *QP) gather(w *sendWQE, off uint64, dst []byte) error {
	if w.isInline {
		copy(dst, w.inline[off:])
		return nil
	}
	return qp.cfg.Mem.GatherAt(qp.cfg.PD, w.sgl, off, dst)
}

// sendErrorLocked fails the head WQE with st and moves the QP to SQE,
// flushing the rest of the send queue.
func (qp *QP) sendErrorLocked(st ibv.WCStatus) {
	w := qp.sq.pop()
	w.status = st
	qp.cfg.Counters.SendErr.Add(1)
	qp.completeSendLocked(w)
	if qp.state == ibv.QPStateRTS {
		qp.toSQELocked()
	}
}

// completeSendLocked posts w's completion if it is signaled or failed
// (errors always complete, IBTA 10.7.3.1). A CQ overrun moves the QP to
// ERR (IBTA 11.4.2.1).
func (qp *QP) completeSendLocked(w *sendWQE) {
	if w.status == ibv.WCSuccess && !w.signaled {
		return
	}
	// The completion is built in the QP, not in a local whose address,
	// passed to the CQ interface, would move it to the heap.
	wc := &qp.wc
	*wc = ibv.WorkCompletion{
		WRID:   w.wrid,
		Status: w.status,
		Opcode: ibv.WCSend,
		QPNum:  qp.cfg.QPN,
	}
	if w.opcode == ibv.WRTSO {
		wc.Opcode = ibv.WCTSO
	}
	if w.status == ibv.WCSuccess {
		// The message's length, as rxe reports a SEND's (rxe_comp.c
		// make_send_cqe: wqe->dma.length). For TSO it is the payload,
		// header copies not counted; mlx5 sets no byte_len on a TSO
		// completion (providers/mlx5/cq.c handle_good_req), so no
		// application can rely on one there.
		wc.ByteLen = uint32(w.length)
	}
	if !qp.cfg.SendCQ.Push(wc, false) && qp.state != ibv.QPStateErr {
		qp.toErrorLocked(true)
	}
}
