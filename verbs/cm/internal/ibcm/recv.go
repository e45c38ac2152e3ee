package ibcm

import (
	"net/netip"

	"github.com/softnic/softnic/wire"
)

// Receive handles one MAD received on the port's QP1 from the port whose
// GID is src (cm.c cm_recv_handler and the handler of each message). It
// never fails: a MAD that does not parse, or that no ID expects, is
// counted and dropped. b is not kept.
func (a *Agent) Receive(b []byte, src netip.Addr) {
	m, err := wire.ParseCM(b)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	if err != nil {
		a.cnt.Malformed++
		a.mu.Unlock()
		return
	}
	attr := m.AttrID()
	if attr < wire.CMAttrREQ || attr > wire.CMAttrAPR {
		a.cnt.Malformed++
		a.mu.Unlock()
		return
	}
	a.cnt.Received[attr]++
	switch attr {
	case wire.CMAttrREQ:
		a.recvREQ(wire.CMReq(m), src)
	case wire.CMAttrMRA:
		a.recvMRA(wire.CMMRA(m))
	case wire.CMAttrREJ:
		a.recvREJ(wire.CMRej(m))
	case wire.CMAttrREP:
		a.recvREP(wire.CMRep(m), src)
	case wire.CMAttrRTU:
		a.recvRTU(wire.CMRtu(m))
	case wire.CMAttrDREQ:
		a.recvDREQ(wire.CMDreq(m), src)
	case wire.CMAttrDREP:
		a.recvDREP(wire.CMDrep(m))
	case wire.CMAttrSIDRREQ:
		a.recvSIDRReq(wire.CMSIDRReq(m), src)
	case wire.CMAttrSIDRREP:
		a.recvSIDRRep(wire.CMSIDRRep(m))
	default:
		// LAP and APR: alternate paths are not supported; cm.c answers a
		// LAP only on an ESTABLISHED ID with a loaded alternate path.
		a.cnt.Unmatched++
	}
	a.unlockAndDeliver()
}

// acquire is cm.c cm_acquire_id: the ID whose local comm ID is local and
// whose remote comm ID is remote.
func (a *Agent) acquire(local, remote uint32) *ID {
	id := a.ids[local]
	if id == nil || id.remoteID != remote || id.destroyed {
		return nil
	}
	return id
}

// issueRej is cm.c cm_issue_rej: a REJ to a MAD no ID owns, its comm IDs
// swapped from the received ones and its TID reused.
func (a *Agent) issueRej(rcv wire.MAD, dst netip.Addr, reason uint16, msgRejected uint8) {
	// Every CM message starts with local comm ID then remote comm ID.
	r := wire.CMRej(rcv)
	m := wire.CMRej(newMAD(wire.CMAttrREJ, rcv.TID()))
	m.SetRemoteCommID(r.LocalCommID())
	m.SetLocalCommID(r.RemoteCommID())
	m.SetMessageRejected(msgRejected)
	m.SetReason(reason)
	a.send(dst, m)
}

// recvREQ is cm.c cm_req_handler with cm_match_req.
func (a *Agent) recvREQ(req wire.CMReq, src netip.Addr) {
	guid := req.LocalCAGUID()
	rk := remoteKey{req.LocalCommID(), guid}
	// Duplicate REQ: cm_dup_req_handler.
	if cur := a.remoteID[rk]; cur != nil {
		a.cnt.Duplicates++
		switch cur.state {
		case StateMRAReqSent:
			a.send(src, cur.formatMRA(wire.CMMsgResponseREQ))
		case StateTimewait:
			a.send(src, cur.formatRej(wire.CMRejStaleConn, nil, nil, StateTimewait))
		}
		// REQ_RCVD and every later state: the answer is on its way or
		// retransmitted by its own timer.
		return
	}
	// Stale connection: the remote QP is still connected to one of ours.
	qk := remoteKey{req.LocalQPN(), guid}
	if cur := a.remoteQP[qk]; cur != nil {
		a.issueRej(req.MAD(), src, wire.CMRejStaleConn, wire.CMMsgResponseREQ)
		if cur.state == StateEstablished {
			a.sendDreqLocked(cur, nil)
		}
		return
	}
	l := a.findListen(req.ServiceID())
	if l == nil {
		a.issueRej(req.MAD(), src, wire.CMRejInvalidServiceID, wire.CMMsgResponseREQ)
		a.cnt.Unmatched++
		return
	}
	if tt := req.TransportServiceType(); tt != QPTypeRC && tt != QPTypeUC &&
		(tt != QPTypeXRC || req.ExtendedTransportType() != extTransportXRC) {
		a.issueRej(req.MAD(), src, wire.CMRejInvalidTransport, wire.CMMsgResponseREQ)
		return
	}
	if a.cfg.GID.IsValid() {
		if want := a.cfg.GID.As16(); string(req.PrimaryRemotePortGID()) != string(want[:]) {
			// cm_init_av_by_path fails: REJ invalid GID with our GID as ARI.
			m := wire.CMRej(newMAD(wire.CMAttrREJ, req.MAD().TID()))
			m.SetRemoteCommID(req.LocalCommID())
			m.SetMessageRejected(wire.CMMsgResponseREQ)
			m.SetReason(wire.CMRejInvalidGID)
			m.SetRejectedInfoLength(16)
			m.SetARI(want[:])
			a.send(src, m)
			return
		}
	}
	id := a.allocID(l.handler, l.Context)
	id.remoteID = req.LocalCommID()
	id.remoteCAGUID = guid
	id.serviceID, id.serviceMask = req.ServiceID(), ^uint64(0)
	id.tid = req.MAD().TID()
	id.timeout = ConvertToDuration(req.LocalCMResponseTimeout())
	id.maxRetries = int(req.MaxCMRetries())
	id.remoteQPN = req.LocalQPN()
	id.initDepth = req.ResponderResources()
	id.respRes = req.InitiatorDepth()
	id.pathMTU = req.PathMTU()
	id.sqPSN = req.StartingPSN()
	id.retryCount = req.RetryCount()
	id.rnrRetry = req.RNRRetryCount()
	id.qpType = req.TransportServiceType()
	id.dgid = src
	// cm_format_paths_from_req: the path seen from this side.
	plt := req.PrimaryLocalACKTimeout()
	if plt > 0 {
		plt--
	}
	id.path = Path{
		SGID: addrFromGID(req.PrimaryRemotePortGID()), DGID: addrFromGID(req.PrimaryLocalPortGID()),
		FlowLabel: req.PrimaryFlowLabel(), HopLimit: req.PrimaryHopLimit(), TrafficClass: req.PrimaryTrafficClass(),
		SL: req.PrimarySL(), Rate: req.PrimaryPacketRate(), PKey: req.PartitionKey(), MTU: req.PathMTU(),
		PacketLifeTime: plt,
	}
	id.avTimeout = plt + 1
	a.remoteID[rk] = id
	id.inRemoteID = true
	a.remoteQP[qk] = id
	id.inRemoteQP = true
	id.state = StateReqRcvd
	a.queueEvent(Event{Type: EventReqReceived, ID: id, PrivateData: copyBytes(req.PrivateData()), Req: &ReqEvent{
		Listen: l, Path: id.path, RemoteCAGUID: guid, RemoteQKey: req.LocalQKey(), RemoteQPN: req.LocalQPN(),
		QPType: req.TransportServiceType(), StartingPSN: req.StartingPSN(),
		ResponderResources: req.InitiatorDepth(), InitiatorDepth: req.ResponderResources(),
		LocalCMResponseTimeout: req.RemoteCMResponseTimeout(), FlowControl: req.EndToEndFlowControl(),
		RemoteCMResponseTimeout: req.LocalCMResponseTimeout(), RetryCount: req.RetryCount(),
		RNRRetryCount: req.RNRRetryCount(), SRQ: req.SRQ(), ServiceID: req.ServiceID(),
	}})
}

func addrFromGID(b []byte) netip.Addr {
	if len(b) != 16 {
		return netip.Addr{}
	}
	return netip.AddrFrom16([16]byte(b)).Unmap()
}

// recvMRA is cm.c cm_mra_handler: the peer needs longer; wait its service
// timeout plus the path's before the next retry.
func (a *Agent) recvMRA(m wire.CMMRA) {
	id := a.acquire(m.RemoteCommID(), 0)
	if id == nil {
		id = a.acquire(m.RemoteCommID(), m.LocalCommID())
	}
	if id == nil {
		a.cnt.Unmatched++
		return
	}
	timeout := ConvertToDuration(m.ServiceTimeout()) + ConvertToDuration(id.avTimeout)
	switch id.state {
	case StateReqSent:
		if m.MessageMRAed() != wire.CMMsgResponseREQ {
			a.cnt.Unmatched++
			return
		}
		a.modify(id.msg, timeout)
		id.state = StateMRAReqRcvd
		if id.msg != nil {
			id.msg.state = StateMRAReqRcvd
		}
	case StateRepSent:
		if m.MessageMRAed() != wire.CMMsgResponseREP {
			a.cnt.Unmatched++
			return
		}
		a.modify(id.msg, timeout)
		id.state = StateMRARepRcvd
		if id.msg != nil {
			id.msg.state = StateMRARepRcvd
		}
	case StateMRAReqRcvd, StateMRARepRcvd:
		a.cnt.Duplicates++
		return
	default:
		a.cnt.Unmatched++
		return
	}
	// The active side learns the remote comm ID from an MRA of its REQ
	// only with the REP; keep it unknown here as cm.c does.
	a.queueEvent(Event{Type: EventMRAReceived, ID: id, MRATimeout: m.ServiceTimeout(), PrivateData: copyBytes(m.PrivateData())})
}

// recvREJ is cm.c cm_rej_handler with cm_acquire_rejected_id.
func (a *Agent) recvREJ(m wire.CMRej) {
	var id *ID
	switch {
	case m.Reason() == wire.CMRejTimeout:
		// The ARI holds the rejecting CA's GUID: find the ID by remote comm ID.
		if m.RejectedInfoLength() >= 8 {
			ari := m.ARI()
			var guid uint64
			for _, x := range ari[:8] {
				guid = guid<<8 | uint64(x)
			}
			id = a.remoteID[remoteKey{m.LocalCommID(), guid}]
		}
	case m.MessageRejected() == wire.CMMsgResponseREQ:
		id = a.acquire(m.RemoteCommID(), 0)
	default:
		id = a.acquire(m.RemoteCommID(), m.LocalCommID())
	}
	if id == nil {
		a.cnt.Unmatched++
		return
	}
	switch id.state {
	case StateReqSent, StateMRAReqRcvd, StateRepSent, StateMRARepRcvd:
		a.cancel(id.msg)
		fallthrough
	case StateReqRcvd, StateMRAReqSent:
		if m.Reason() == wire.CMRejStaleConn {
			a.enterTimewait(id)
		} else {
			a.resetToIdle(id)
		}
	case StateDreqSent:
		a.cancel(id.msg)
		a.enterTimewait(id)
	case StateRepRcvd, StateMRARepSent, StateEstablished:
		a.enterTimewait(id)
	default:
		a.cnt.Unmatched++
		return
	}
	ari := m.ARI()[:min(int(m.RejectedInfoLength()), wire.CMRejARILen)]
	a.queueEvent(Event{Type: EventRejReceived, ID: id, RejReason: m.Reason(), ARI: copyBytes(ari),
		PrivateData: copyBytes(m.PrivateData())})
}

// recvREP is cm.c cm_rep_handler (and cm_dup_rep_handler).
func (a *Agent) recvREP(m wire.CMRep, src netip.Addr) {
	id := a.acquire(m.RemoteCommID(), 0)
	if id == nil {
		// cm_dup_rep_handler: answer a REP we already have.
		cur := a.acquire(m.RemoteCommID(), m.LocalCommID())
		if cur == nil {
			a.cnt.Unmatched++
			return
		}
		a.cnt.Duplicates++
		switch cur.state {
		case StateEstablished:
			a.send(src, cur.formatRTU(cur.privateData))
		case StateMRARepSent:
			a.send(src, cur.formatMRA(wire.CMMsgResponseREP))
		}
		return
	}
	if id.state != StateReqSent && id.state != StateMRAReqRcvd {
		a.cnt.Unmatched++
		return
	}
	guid := m.LocalCAGUID()
	rk := remoteKey{m.LocalCommID(), guid}
	if a.remoteID[rk] != nil {
		a.cnt.Duplicates++
		return
	}
	// cm_rep_get_qpn: an XRC target's QP number is in the EECN field.
	rqpn := m.LocalQPN()
	if id.qpType == QPTypeXRC {
		rqpn = m.LocalEECN()
	}
	qk := remoteKey{rqpn, guid}
	if cur := a.remoteQP[qk]; cur != nil {
		// Stale connection: REJ the REP, DREQ the old connection; the
		// REQ's ID stays as it was, its REQ still retried (cm.c
		// cm_rep_handler: no event).
		a.issueRej(m.MAD(), src, wire.CMRejStaleConn, wire.CMMsgResponseREP)
		if cur.state == StateEstablished {
			a.sendDreqLocked(cur, nil)
		}
		a.cnt.Unmatched++
		return
	}
	id.remoteID = m.LocalCommID()
	id.remoteCAGUID = guid
	id.remoteQPN = rqpn
	a.remoteID[rk] = id
	id.inRemoteID = true
	a.remoteQP[qk] = id
	id.inRemoteQP = true
	id.initDepth = m.ResponderResources()
	id.respRes = m.InitiatorDepth()
	id.sqPSN = m.StartingPSN()
	id.rnrRetry = m.RNRRetryCount()
	id.targetDelay = m.TargetACKDelay()
	// cm_rep_handler: av.timeout = cm_ack_timeout(target ACK delay, av.timeout - 1).
	id.avTimeout = AckTimeout(id.targetDelay, id.avTimeout-1)
	id.state = StateRepRcvd
	a.cancel(id.msg)
	id.msg = nil
	a.queueEvent(Event{Type: EventRepReceived, ID: id, PrivateData: copyBytes(m.PrivateData()), Rep: &RepEvent{
		RemoteCAGUID: guid, RemoteQKey: m.LocalQKey(), RemoteQPN: rqpn, StartingPSN: m.StartingPSN(),
		ResponderResources: m.InitiatorDepth(), InitiatorDepth: m.ResponderResources(),
		TargetACKDelay: m.TargetACKDelay(), FailoverAccepted: m.FailoverAccepted(),
		FlowControl: m.EndToEndFlowControl(), RNRRetryCount: m.RNRRetryCount(), SRQ: m.SRQ(),
	}})
}

// recvRTU is cm.c cm_rtu_handler.
func (a *Agent) recvRTU(m wire.CMRtu) {
	id := a.acquire(m.RemoteCommID(), m.LocalCommID())
	if id == nil {
		a.cnt.Unmatched++
		return
	}
	if id.state != StateRepSent && id.state != StateMRARepRcvd {
		a.cnt.Duplicates++
		return
	}
	a.cancel(id.msg)
	id.msg = nil
	id.state = StateEstablished
	a.queueEvent(Event{Type: EventRTUReceived, ID: id, PrivateData: copyBytes(m.PrivateData())})
}

// recvDREQ is cm.c cm_dreq_handler.
func (a *Agent) recvDREQ(m wire.CMDreq, src netip.Addr) {
	id := a.acquire(m.RemoteCommID(), m.LocalCommID())
	if id == nil {
		// cm_issue_drep: the connection is gone; answer so the peer stops.
		a.cnt.Unmatched++
		r := wire.CMDrep(newMAD(wire.CMAttrDREP, m.MAD().TID()))
		r.SetLocalCommID(m.RemoteCommID())
		r.SetRemoteCommID(m.LocalCommID())
		a.send(src, r)
		return
	}
	if m.RemoteQPN() != id.localQPN {
		a.cnt.Unmatched++
		return
	}
	switch id.state {
	case StateRepSent, StateDreqSent, StateMRARepRcvd:
		a.cancel(id.msg)
		id.msg = nil
	case StateEstablished:
	case StateTimewait:
		a.cnt.Duplicates++
		r := id.formatDrep(id.privateData)
		wire.PutMADHdr(r, wire.MADHdr{BaseVersion: wire.MADBaseVersion, MgmtClass: wire.MgmtClassCM,
			ClassVersion: wire.CMClassVersion, Method: wire.MADMethodSend, TID: m.MAD().TID(), AttrID: wire.CMAttrDREP})
		a.send(src, r)
		return
	case StateDreqRcvd:
		a.cnt.Duplicates++
		return
	default:
		a.cnt.Unmatched++
		return
	}
	id.state = StateDreqRcvd
	id.tid = m.MAD().TID()
	a.queueEvent(Event{Type: EventDreqReceived, ID: id, PrivateData: copyBytes(m.PrivateData())})
}

// recvDREP is cm.c cm_drep_handler.
func (a *Agent) recvDREP(m wire.CMDrep) {
	id := a.acquire(m.RemoteCommID(), m.LocalCommID())
	if id == nil {
		a.cnt.Unmatched++
		return
	}
	if id.state != StateDreqSent && id.state != StateDreqRcvd {
		a.cnt.Unmatched++
		return
	}
	a.cancel(id.msg)
	id.msg = nil
	a.enterTimewait(id)
	a.queueEvent(Event{Type: EventDrepReceived, ID: id, PrivateData: copyBytes(m.PrivateData())})
}

// recvSIDRReq is cm.c cm_sidr_req_handler.
func (a *Agent) recvSIDRReq(m wire.CMSIDRReq, src netip.Addr) {
	sk := sidrKey{m.RequestID(), src}
	if a.sidr[sk] != nil {
		a.cnt.Duplicates++
		return
	}
	l := a.findListen(m.ServiceID())
	if l == nil {
		// No listener: SIDR_REP with status unsupported (cm.c).
		r := wire.CMSIDRRep(newMAD(wire.CMAttrSIDRREP, m.MAD().TID()))
		r.SetRequestID(m.RequestID())
		r.SetStatus(SIDRUnsupported)
		r.SetServiceID(m.ServiceID())
		a.send(src, r)
		a.cnt.Unmatched++
		return
	}
	id := a.allocID(l.handler, l.Context)
	id.remoteID = m.RequestID()
	id.dgid = src
	id.tid = m.MAD().TID()
	id.serviceID = m.ServiceID()
	a.sidr[sk] = id
	id.inSIDR = true
	id.state = StateSIDRReqRcvd
	a.queueEvent(Event{Type: EventSIDRReqReceived, ID: id, PrivateData: copyBytes(m.PrivateData()), SIDR: &SIDREvent{
		Listen: l, ServiceID: m.ServiceID(), PKey: m.PartitionKey(), SrcGID: src,
	}})
}

// recvSIDRRep is cm.c cm_sidr_rep_handler.
func (a *Agent) recvSIDRRep(m wire.CMSIDRRep) {
	id := a.acquire(m.RequestID(), 0)
	if id == nil || id.state != StateSIDRReqSent {
		a.cnt.Unmatched++
		return
	}
	a.cancel(id.msg)
	id.msg = nil
	id.state = StateIdle
	info := m.AdditionalInfo()[:min(int(m.AdditionalInfoLength()), wire.CMSIDRRepInfoLen)]
	a.queueEvent(Event{Type: EventSIDRRepReceived, ID: id, PrivateData: copyBytes(m.PrivateData()), SIDR: &SIDREvent{
		ServiceID: m.ServiceID(), Status: m.Status(), QPN: m.QPN(), QKey: m.QKey(), Info: copyBytes(info),
	}})
}
