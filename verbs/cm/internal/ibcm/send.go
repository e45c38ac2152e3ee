package ibcm

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/wire"
)

// sendMsg is struct ib_mad_send_buf of a message that expects an answer:
// the MAD layer resends it every timeout, retries times, then reports a
// timeout (mad.c; cm.c cm_send_handler).
type sendMsg struct {
	id      *ID
	mad     []byte
	dst     netip.Addr
	timeout time.Duration
	retries int
	state   State // context[1]: the state the message belongs to
	timer   clock.Timer
	gen     int // the armed timer's generation: a timer stopped too late finds it changed
	done    bool
}

// newMAD returns a zeroed MAD with the CM header (cm_format_mad_hdr).
func newMAD(attr uint16, tid uint64) wire.MAD {
	return wire.PutCM(make([]byte, wire.MADLen), attr, tid)
}

// send sends a MAD once. a.mu is held.
func (a *Agent) send(dst netip.Addr, m []byte) {
	attr := wire.MAD(m).AttrID()
	if int(attr) < len(a.cnt.Sent) {
		a.cnt.Sent[attr]++
	}
	if err := a.cfg.Port.SendMAD(dst, m); err != nil {
		a.cnt.SendErrors++
	}
}

// post sends m for id and, when timeout > 0, retransmits it until
// cancelled or out of retries. a.mu is held.
func (a *Agent) post(id *ID, m []byte, timeout time.Duration, retries int, st State) *sendMsg {
	msg := &sendMsg{id: id, mad: m, dst: id.dgid, timeout: timeout, retries: retries, state: st}
	a.send(msg.dst, m)
	if timeout > 0 {
		a.arm(msg)
	}
	return msg
}

// arm (re)starts msg's timer for its timeout. a.mu held.
func (a *Agent) arm(msg *sendMsg) {
	msg.gen++
	gen := msg.gen
	msg.timer = a.clk.AfterFunc(msg.timeout, func() { a.retransmit(msg, gen) })
}

// retransmit is the MAD layer's timeout of msg: resend, or give up.
func (a *Agent) retransmit(msg *sendMsg, gen int) {
	a.mu.Lock()
	if msg.done || msg.gen != gen {
		a.mu.Unlock()
		return
	}
	if msg.retries > 0 {
		msg.retries--
		a.cnt.Retries++
		a.send(msg.dst, msg.mad)
		a.arm(msg)
		a.mu.Unlock()
		return
	}
	msg.done = true
	a.sendError(msg, syscall.ETIMEDOUT)
	a.unlockAndDeliver()
}

// PortUnreachable tells the agent that no CM listens at dst: a MAD sent
// there drew an ICMP port unreachable (the RDMA CM hears it from its
// link: link.SendError). Every message to dst still waiting for its
// first answer (a REQ, a REP, a DREQ, a SIDR_REQ: an ID in REQ_SENT,
// REP_SENT, DREQ_SENT or SIDR_REQ_SENT; not one the peer answered with an
// MRA, which proved it there) fails now, as its last retry timing out
// would (cm_process_send_error), its event carrying ECONNREFUSED.
// softnic's own: the kernel's MAD layer hears no ICMP for rxe's socket
// and retries until the timeout (16 REQs over about 100 s for the RDMA
// CM's).
func (a *Agent) PortUnreachable(dst netip.Addr) {
	dst = dst.Unmap()
	a.mu.Lock()
	var msgs []*sendMsg
	for _, id := range a.ids {
		msg := id.msg
		if msg == nil || msg.done || msg.dst.Unmap() != dst || msg.state != id.state {
			continue
		}
		switch id.state {
		case StateReqSent, StateRepSent, StateDreqSent, StateSIDRReqSent:
			msgs = append(msgs, msg)
		}
	}
	// In the order the IDs were made, so that events come in a fixed
	// order whatever the map's.
	slices.SortFunc(msgs, func(x, y *sendMsg) int { return cmp.Compare(x.id.localID^a.operand, y.id.localID^a.operand) })
	for _, msg := range msgs {
		a.cancel(msg)
		a.sendError(msg, syscall.ECONNREFUSED)
	}
	a.unlockAndDeliver()
}

// modify is ib_modify_mad: a new timeout for msg, from now on and for
// every retry after (an MRA's service timeout).
func (a *Agent) modify(msg *sendMsg, timeout time.Duration) {
	if msg == nil || msg.done {
		return
	}
	msg.timeout = timeout
	if msg.timer != nil {
		msg.timer.Stop()
	}
	a.arm(msg)
}

// cancel is ib_cancel_mad.
func (a *Agent) cancel(msg *sendMsg) {
	if msg == nil || msg.done {
		return
	}
	msg.done = true
	msg.gen++
	if msg.timer != nil {
		msg.timer.Stop()
	}
}

// sendError is cm.c cm_process_send_error: the message failed, timed out
// (ETIMEDOUT) or refused (ECONNREFUSED: PortUnreachable). a.mu held.
func (a *Agent) sendError(msg *sendMsg, why syscall.Errno) {
	id := msg.id
	if id.destroyed || msg != id.msg || msg.state != id.state {
		return
	}
	id.msg = nil
	var t EventType
	switch id.state {
	case StateReqSent, StateMRAReqRcvd:
		a.resetToIdle(id)
		t = EventReqError
	case StateRepSent, StateMRARepRcvd:
		a.resetToIdle(id)
		t = EventRepError
	case StateDreqSent:
		a.enterTimewait(id)
		t = EventDreqError
	case StateSIDRReqSent:
		id.state = StateIdle
		t = EventSIDRReqError
	default:
		return
	}
	a.queueEvent(Event{Type: t, ID: id, Err: why})
}

// removeRemote is cm.c cm_remove_remote. a.mu held.
func (a *Agent) removeRemote(id *ID) {
	if id.inRemoteID {
		delete(a.remoteID, remoteKey{id.remoteID, id.remoteCAGUID})
		id.inRemoteID = false
	}
	if id.inRemoteQP {
		delete(a.remoteQP, remoteKey{id.remoteQPN, id.remoteCAGUID})
		id.inRemoteQP = false
	}
}

// resetToIdle is cm.c cm_reset_to_idle. a.mu held.
func (a *Agent) resetToIdle(id *ID) {
	id.state = StateIdle
	a.removeRemote(id)
}

// enterTimewait is cm.c cm_enter_timewait: the ID waits out its path's
// timeout (av.timeout, the packet life time + 1) so late packets of the
// old connection die, then reports TIMEWAIT_EXIT. a.mu held.
func (a *Agent) enterTimewait(id *ID) {
	a.removeRemote(id)
	id.state = StateTimewait
	if id.twTimer != nil {
		id.twTimer.Stop()
	}
	id.twGen++
	gen := id.twGen
	id.twTimer = a.clk.AfterFunc(ConvertToDuration(id.avTimeout), func() {
		a.mu.Lock()
		// cm.c cm_timewait_handler: only if the ID is still in that timewait.
		if id.destroyed || id.state != StateTimewait || id.twGen != gen {
			a.mu.Unlock()
			return
		}
		id.state = StateIdle
		id.twTimer = nil
		a.queueEvent(Event{Type: EventTimewaitExit, ID: id})
		a.unlockAndDeliver()
	})
}

func (a *Agent) lockLive(id *ID) error {
	a.mu.Lock()
	if a.closed || id.destroyed {
		a.mu.Unlock()
		return fmt.Errorf("ibcm: destroyed ID: %w", syscall.EINVAL)
	}
	return nil
}

// Listen listens for REQs and SIDR_REQs whose service ID matches
// serviceID under mask (ib_cm_listen; mask 0 means exact). EBUSY if an
// overlapping listener exists.
func (id *ID) Listen(serviceID, mask uint64) error {
	a := id.a
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.mu.Unlock()
	if id.state != StateIdle {
		return errState("listen", id.state)
	}
	if mask == 0 {
		mask = ^uint64(0)
	}
	serviceID &= mask
	for _, l := range a.listens {
		// cm.c cm_insert_listen
		if l.serviceMask&serviceID == mask&l.serviceID {
			return fmt.Errorf("ibcm: service ID %#x already listened on: %w", serviceID, syscall.EBUSY)
		}
	}
	id.serviceID, id.serviceMask = serviceID, mask
	a.listens = append(a.listens, id)
	id.state = StateListen
	return nil
}

// findListen is cm.c cm_find_listen. a.mu held.
func (a *Agent) findListen(serviceID uint64) *ID {
	for _, l := range a.listens {
		if l.serviceMask&serviceID == l.serviceID {
			return l
		}
	}
	return nil
}

// SendREQ sends a REQ (ib_send_cm_req, cm_format_req) and retransmits it
// every 2 × the path's packet life time + the remote CM response timeout,
// MaxCMRetries times, then reports REQ_ERROR.
func (id *ID) SendREQ(p *ReqParam) error {
	a := id.a
	if p == nil || (p.QPType != QPTypeRC && p.QPType != QPTypeUC && p.QPType != QPTypeXRC) || len(p.PrivateData) > wire.CMReqPrivateDataLen ||
		!p.Path.DGID.IsValid() {
		return fmt.Errorf("ibcm: bad REQ parameters: %w", syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	if id.state != StateIdle {
		return errState("send REQ", id.state)
	}
	id.dgid = p.Path.DGID
	id.path = p.Path
	id.avTimeout = p.Path.PacketLifeTime + 1
	id.serviceID, id.serviceMask = p.ServiceID, ^uint64(0)
	id.timeout = ConvertToDuration(p.Path.PacketLifeTime)*2 + ConvertToDuration(p.RemoteCMResponseTimeout)
	id.maxRetries = int(p.MaxCMRetries)
	id.initDepth, id.respRes = p.InitiatorDepth, p.ResponderResources
	id.retryCount, id.rnrRetry = p.RetryCount, p.RNRRetryCount
	id.pathMTU, id.qpType = p.Path.MTU, p.QPType
	id.localQPN, id.rqPSN = p.QPNum&wire.QPNMask, p.StartingPSN&wire.PSNMask
	id.tid = id.formTID()

	m := wire.CMReq(newMAD(wire.CMAttrREQ, id.tid))
	m.SetLocalCommID(id.localID)
	m.SetServiceID(p.ServiceID)
	m.SetLocalCAGUID(a.cfg.CAGUID)
	m.SetLocalQPN(p.QPNum)
	m.SetInitiatorDepth(p.InitiatorDepth)
	m.SetRemoteCMResponseTimeout(p.RemoteCMResponseTimeout)
	m.SetTransportServiceType(p.QPType)
	if p.QPType == QPTypeXRC {
		m.SetExtendedTransportType(extTransportXRC)
	}
	m.SetEndToEndFlowControl(p.FlowControl)
	m.SetStartingPSN(p.StartingPSN)
	m.SetLocalCMResponseTimeout(p.LocalCMResponseTimeout)
	m.SetPartitionKey(p.Path.PKey)
	m.SetPathMTU(p.Path.MTU)
	m.SetMaxCMRetries(p.MaxCMRetries)
	if p.QPType != QPTypeXRC {
		// cm_format_req: an XRC initiator has no responder, and its
		// retries are its own QP's business.
		m.SetResponderResources(p.ResponderResources)
		m.SetRetryCount(p.RetryCount)
		m.SetRNRRetryCount(p.RNRRetryCount)
		m.SetSRQ(p.SRQ)
	}
	sg, dg := gid16(p.Path.SGID), gid16(p.Path.DGID)
	m.SetPrimaryLocalPortGID(sg[:])
	m.SetPrimaryRemotePortGID(dg[:])
	if p.Path.HopLimit <= 1 {
		// No LIDs on RoCE: softnic has LID 0.
		m.SetPrimaryLocalPortLID(0)
		m.SetPrimaryRemotePortLID(0)
	} else {
		// cm.c cm_format_req: "Work-around until there's a way to obtain
		// remote LID info": the permissive LID.
		m.SetPrimaryLocalPortLID(0xFFFF)
		m.SetPrimaryRemotePortLID(0xFFFF)
	}
	m.SetPrimaryFlowLabel(p.Path.FlowLabel)
	m.SetPrimaryPacketRate(p.Path.Rate)
	m.SetPrimaryTrafficClass(p.Path.TrafficClass)
	m.SetPrimaryHopLimit(p.Path.HopLimit)
	m.SetPrimarySL(p.Path.SL)
	m.SetPrimarySubnetLocal(p.Path.HopLimit <= 1)
	m.SetPrimaryLocalACKTimeout(AckTimeout(a.cfg.AckDelay, p.Path.PacketLifeTime))
	m.SetPrivateData(p.PrivateData)

	id.msg = a.post(id, m, id.timeout, id.maxRetries, StateReqSent)
	id.state = StateReqSent
	return nil
}

// SendREP accepts a REQ (ib_send_cm_rep); it is retransmitted every REQ's
// local CM response timeout, MaxCMRetries times, until the RTU.
func (id *ID) SendREP(p *RepParam) error {
	a := id.a
	if p == nil || len(p.PrivateData) > wire.CMRepPrivateDataLen {
		return fmt.Errorf("ibcm: bad REP parameters: %w", syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	if id.state != StateReqRcvd && id.state != StateMRAReqSent {
		return errState("send REP", id.state)
	}
	m := wire.CMRep(newMAD(wire.CMAttrREP, id.tid))
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetStartingPSN(p.StartingPSN)
	m.SetResponderResources(p.ResponderResources)
	m.SetTargetACKDelay(a.cfg.AckDelay)
	m.SetFailoverAccepted(p.FailoverAccepted)
	m.SetRNRRetryCount(min(p.RNRRetryCount, 7))
	m.SetLocalCAGUID(a.cfg.CAGUID)
	if id.qpType != QPTypeXRC {
		m.SetInitiatorDepth(p.InitiatorDepth)
		m.SetEndToEndFlowControl(p.FlowControl)
		m.SetSRQ(p.SRQ)
		m.SetLocalQPN(p.QPNum)
	} else {
		// cm_format_rep: an XRC target receives into SRQs, and its QP
		// number goes where an EE context's would.
		m.SetSRQ(true)
		m.SetLocalEECN(p.QPNum)
	}
	m.SetPrivateData(p.PrivateData)
	id.msg = a.post(id, m, id.timeout, id.maxRetries, StateRepSent)
	id.state = StateRepSent
	id.initDepth, id.respRes = p.InitiatorDepth, p.ResponderResources
	id.rqPSN = p.StartingPSN & wire.PSNMask
	id.localQPN = p.QPNum & wire.QPNMask
	return nil
}

func (id *ID) formatRTU(pd []byte) wire.MAD {
	m := wire.CMRtu(newMAD(wire.CMAttrRTU, id.tid))
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetPrivateData(pd)
	return wire.MAD(m)
}

// SendRTU completes the connection on the active side (ib_send_cm_rtu).
func (id *ID) SendRTU(privateData []byte) error {
	a := id.a
	if len(privateData) > wire.CMRtuPrivateDataLen {
		return fmt.Errorf("ibcm: RTU private data of %d bytes: %w", len(privateData), syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	if id.state != StateRepRcvd && id.state != StateMRARepSent {
		return errState("send RTU", id.state)
	}
	a.send(id.dgid, id.formatRTU(privateData))
	id.state = StateEstablished
	id.privateData = copyBytes(privateData)
	return nil
}

func (id *ID) formatMRA(msgMRAed uint8) wire.MAD {
	m := wire.CMMRA(newMAD(wire.CMAttrMRA, id.tid))
	m.SetMessageMRAed(msgMRAed)
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetServiceTimeout(id.serviceTimeout)
	m.SetPrivateData(id.privateData)
	return wire.MAD(m)
}

// SendMRA tells the peer its REQ or REP was received and the answer will
// take serviceTimeout (ib_send_cm_mra). With MRAFlagDelay in
// serviceTimeout nothing is sent now: the MRA answers the next duplicate.
func (id *ID) SendMRA(serviceTimeout uint8, privateData []byte) error {
	a := id.a
	if len(privateData) > wire.CMMRAPrivateDataLen {
		return fmt.Errorf("ibcm: MRA private data of %d bytes: %w", len(privateData), syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	var resp uint8
	var next State
	switch id.state {
	case StateReqRcvd:
		resp, next = wire.CMMsgResponseREQ, StateMRAReqSent
	case StateRepRcvd:
		resp, next = wire.CMMsgResponseREP, StateMRARepSent
	default:
		return errState("send MRA", id.state)
	}
	id.serviceTimeout = serviceTimeout &^ MRAFlagDelay
	id.privateData = copyBytes(privateData)
	if serviceTimeout&MRAFlagDelay == 0 {
		a.send(id.dgid, id.formatMRA(resp))
	}
	id.state = next
	return nil
}

// formatRej is cm.c cm_format_rej.
func (id *ID) formatRej(reason uint16, ari, pd []byte, st State) wire.MAD {
	m := wire.CMRej(newMAD(wire.CMAttrREJ, id.tid))
	m.SetRemoteCommID(id.remoteID)
	switch st {
	case StateReqRcvd:
		m.SetLocalCommID(0)
		m.SetMessageRejected(wire.CMMsgResponseREQ)
	case StateMRAReqSent:
		m.SetLocalCommID(id.localID)
		m.SetMessageRejected(wire.CMMsgResponseREQ)
	case StateRepRcvd, StateMRARepSent:
		m.SetLocalCommID(id.localID)
		m.SetMessageRejected(wire.CMMsgResponseREP)
	default:
		m.SetLocalCommID(id.localID)
		m.SetMessageRejected(wire.CMMsgResponseOther)
	}
	m.SetReason(reason)
	if len(ari) > 0 {
		m.SetRejectedInfoLength(uint8(len(ari)))
		m.SetARI(ari)
	}
	m.SetPrivateData(pd)
	return wire.MAD(m)
}

// SendREJ rejects a REQ or REP (ib_send_cm_rej) with a reason, additional
// rejection information and private data.
func (id *ID) SendREJ(reason uint16, ari, privateData []byte) error {
	a := id.a
	if len(privateData) > wire.CMRejPrivateDataLen || len(ari) > wire.CMRejARILen {
		return fmt.Errorf("ibcm: REJ data too long: %w", syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	return a.sendRejLocked(id, reason, ari, privateData)
}

// sendRejLocked is cm.c cm_send_rej_locked. a.mu held.
func (a *Agent) sendRejLocked(id *ID, reason uint16, ari, pd []byte) error {
	st := id.state
	switch st {
	case StateReqSent, StateMRAReqRcvd, StateReqRcvd, StateMRAReqSent, StateRepRcvd, StateMRARepSent:
		a.cancel(id.msg)
		a.send(id.dgid, id.formatRej(reason, ari, pd, st))
		a.resetToIdle(id)
	case StateRepSent, StateMRARepRcvd:
		a.cancel(id.msg)
		a.send(id.dgid, id.formatRej(reason, ari, pd, st))
		a.enterTimewait(id)
	default:
		return errState("send REJ", st)
	}
	return nil
}

// SendDREQ starts a disconnect (ib_send_cm_dreq): retransmitted as the REQ
// or REP was, then DREQ_ERROR and timewait.
func (id *ID) SendDREQ(privateData []byte) error {
	a := id.a
	if len(privateData) > wire.CMDreqPrivateDataLen {
		return fmt.Errorf("ibcm: DREQ private data of %d bytes: %w", len(privateData), syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	return a.sendDreqLocked(id, privateData)
}

// sendDreqLocked is cm.c cm_send_dreq_locked. a.mu held.
func (a *Agent) sendDreqLocked(id *ID, pd []byte) error {
	if id.state != StateEstablished {
		return errState("send DREQ", id.state)
	}
	m := wire.CMDreq(newMAD(wire.CMAttrDREQ, id.formTID()))
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetRemoteQPN(id.remoteQPN)
	m.SetPrivateData(pd)
	id.msg = a.post(id, m, id.timeout, id.maxRetries, StateDreqSent)
	id.state = StateDreqSent
	return nil
}

func (id *ID) formatDrep(pd []byte) wire.MAD {
	m := wire.CMDrep(newMAD(wire.CMAttrDREP, id.tid))
	m.SetLocalCommID(id.localID)
	m.SetRemoteCommID(id.remoteID)
	m.SetPrivateData(pd)
	return wire.MAD(m)
}

// SendDREP answers a DREQ (ib_send_cm_drep) and enters timewait.
func (id *ID) SendDREP(privateData []byte) error {
	a := id.a
	if len(privateData) > wire.CMDrepPrivateDataLen {
		return fmt.Errorf("ibcm: DREP private data of %d bytes: %w", len(privateData), syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	return a.sendDrepLocked(id, privateData)
}

func (a *Agent) sendDrepLocked(id *ID, pd []byte) error {
	if id.state != StateDreqRcvd {
		return errState("send DREP", id.state)
	}
	id.privateData = copyBytes(pd)
	a.send(id.dgid, id.formatDrep(pd))
	a.enterTimewait(id)
	return nil
}

// Establish is ib_cm_notify(IB_EVENT_COMM_EST): the QP received data before
// the RTU, so the connection is up (cm.c cm_establish): USER_ESTABLISHED.
func (id *ID) Establish() error {
	a := id.a
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	switch id.state {
	case StateRepSent, StateMRARepRcvd:
		a.cancel(id.msg)
		id.msg = nil
		id.state = StateEstablished
		a.queueEvent(Event{Type: EventUserEstablished, ID: id})
		return nil
	case StateEstablished:
		return fmt.Errorf("ibcm: already established: %w", syscall.EISCONN)
	}
	return errState("establish", id.state)
}

// SendSIDRReq resolves a service ID to a UD QP (ib_send_cm_sidr_req).
func (id *ID) SendSIDRReq(p *SIDRReqParam) error {
	a := id.a
	if p == nil || len(p.PrivateData) > wire.CMSIDRReqPrivateDataLen || !p.DGID.IsValid() {
		return fmt.Errorf("ibcm: bad SIDR_REQ parameters: %w", syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	if id.state != StateIdle {
		return errState("send SIDR_REQ", id.state)
	}
	id.dgid = p.DGID
	id.timeout = p.Timeout
	id.maxRetries = int(p.MaxCMRetries)
	id.serviceID = p.ServiceID
	id.tid = id.formTID()
	m := wire.CMSIDRReq(newMAD(wire.CMAttrSIDRREQ, id.tid))
	m.SetRequestID(id.localID)
	m.SetPartitionKey(p.PKey)
	m.SetServiceID(p.ServiceID)
	m.SetPrivateData(p.PrivateData)
	id.msg = a.post(id, m, id.timeout, id.maxRetries, StateSIDRReqSent)
	id.state = StateSIDRReqSent
	return nil
}

// SendSIDRRep answers a SIDR_REQ (ib_send_cm_sidr_rep).
func (id *ID) SendSIDRRep(p *SIDRRepParam) error {
	a := id.a
	if p == nil || len(p.PrivateData) > wire.CMSIDRRepPrivateDataLen || len(p.Info) > wire.CMSIDRRepInfoLen {
		return fmt.Errorf("ibcm: bad SIDR_REP parameters: %w", syscall.EINVAL)
	}
	if err := a.lockLive(id); err != nil {
		return err
	}
	defer a.unlockAndDeliver()
	return a.sendSIDRRepLocked(id, p)
}

func (a *Agent) sendSIDRRepLocked(id *ID, p *SIDRRepParam) error {
	if id.state != StateSIDRReqRcvd {
		return errState("send SIDR_REP", id.state)
	}
	m := wire.CMSIDRRep(newMAD(wire.CMAttrSIDRREP, id.tid))
	m.SetRequestID(id.remoteID)
	m.SetStatus(p.Status)
	m.SetQPN(p.QPNum)
	m.SetServiceID(id.serviceID)
	m.SetQKey(p.QKey)
	if len(p.Info) > 0 {
		m.SetAdditionalInfoLength(uint8(len(p.Info)))
		m.SetAdditionalInfo(p.Info)
	}
	m.SetPrivateData(p.PrivateData)
	a.send(id.dgid, m)
	id.state = StateIdle
	if id.inSIDR {
		delete(a.sidr, sidrKey{id.remoteID, id.dgid})
		id.inSIDR = false
	}
	return nil
}

// Destroy destroys the ID (ib_destroy_cm_id, cm.c cm_destroy_id): a
// listener stops listening, a connection being made is rejected (REJ
// timeout for the active side, consumer reject for the passive), an
// established one sends a DREQ and goes through timewait at once; no
// event is delivered for it after Destroy returns, and its timers stop.
func (id *ID) Destroy() {
	id.destroy(false)
}

// DestroySilently is cm_destroy_id with -ENOMEM: a REQ_RCVD ID goes away
// without a REJ, so the peer's retry may find a listener with room.
func (id *ID) DestroySilently() { id.destroy(true) }

func (id *ID) destroy(silent bool) {
	a := id.a
	a.mu.Lock()
	if id.destroyed {
		a.mu.Unlock()
		return
	}
	for done := false; !done; {
		switch id.state {
		case StateListen:
			for i, l := range a.listens {
				if l == id {
					a.listens = append(a.listens[:i], a.listens[i+1:]...)
					break
				}
			}
			id.state = StateIdle
		case StateSIDRReqSent:
			a.cancel(id.msg)
			id.state = StateIdle
		case StateSIDRReqRcvd:
			a.sendSIDRRepLocked(id, &SIDRRepParam{Status: SIDRReject})
			id.state = StateIdle
		case StateReqSent, StateMRAReqRcvd:
			var guid [8]byte
			putBE64(guid[:], a.cfg.CAGUID)
			a.sendRejLocked(id, wire.CMRejTimeout, guid[:], nil)
		case StateReqRcvd:
			if silent {
				a.resetToIdle(id)
			} else {
				a.sendRejLocked(id, wire.CMRejConsumerDefined, nil, nil)
			}
		case StateRepSent, StateMRARepRcvd, StateMRAReqSent, StateRepRcvd, StateMRARepSent:
			a.sendRejLocked(id, wire.CMRejConsumerDefined, nil, nil)
		case StateEstablished:
			a.sendDreqLocked(id, nil)
		case StateDreqSent:
			a.cancel(id.msg)
			a.enterTimewait(id)
		case StateDreqRcvd:
			a.sendDrepLocked(id, nil)
		case StateTimewait:
			id.state = StateIdle
		default:
			done = true
		}
	}
	a.cancel(id.msg)
	if id.twTimer != nil {
		id.twTimer.Stop()
		id.twTimer = nil
	}
	a.removeRemote(id)
	if id.inSIDR {
		delete(a.sidr, sidrKey{id.remoteID, id.dgid})
		id.inSIDR = false
	}
	delete(a.ids, id.localID)
	id.destroyed = true
	a.unlockAndDeliver()
}

func putBE64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func gid16(a netip.Addr) [16]byte {
	if !a.IsValid() {
		return [16]byte{}
	}
	return a.As16()
}

// Conn is what an ID knows of its connection: the values rdma_init_qp_attr
// builds the QP's RTR and RTS attributes from (cm.c cm_init_qp_rtr_attr,
// cm_init_qp_rts_attr).
type Conn struct {
	Path               Path
	LocalQPN           uint32
	RemoteQPN          uint32
	SQPSN, RQPSN       uint32
	PathMTU            uint8
	ResponderResources uint8 // max_dest_rd_atomic
	InitiatorDepth     uint8 // max_rd_atomic
	RetryCount         uint8
	RNRRetryCount      uint8
	Timeout            uint8 // the local ACK timeout: av.timeout
	QPType             uint8
}

// Conn returns the ID's connection values.
func (id *ID) Conn() Conn {
	id.a.mu.Lock()
	defer id.a.mu.Unlock()
	return Conn{Path: id.path, LocalQPN: id.localQPN, RemoteQPN: id.remoteQPN, SQPSN: id.sqPSN, RQPSN: id.rqPSN,
		PathMTU: id.pathMTU, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		RetryCount: id.retryCount, RNRRetryCount: id.rnrRetry, Timeout: id.avTimeout, QPType: id.qpType}
}
