package cm

import (
	"net/netip"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs/cm/internal/ibcm"
	"github.com/softnic/softnic/wire"
)

// ibEvent turns one IB CM event into the RDMA CM's (cma.c cma_ib_handler,
// cma_ib_req_handler, cma_sidr_rep_handler) and does librdmacm's part
// (rdma_get_cm_event: the QP's RTR and RTS and the RTU on a REP).
func (c *CM) ibEvent(ev *ibcm.Event) {
	if ev.Type == ibcm.EventReqReceived || ev.Type == ibcm.EventSIDRReqReceived {
		c.connRequest(ev)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.byCM[ev.ID]
	if id == nil || id.destroyed {
		return
	}
	out := &Event{}
	switch ev.Type {
	case ibcm.EventReqError, ibcm.EventRepError:
		// cma.c cma_ib_handler: -ETIMEDOUT when the retries ran out;
		// -ECONNREFUSED when the network said no CM listens at the
		// peer (an ICMP port unreachable: cmDev.sendError), softnic's
		// own.
		out.Type, out.Status = EventUnreachable, -int(whyFailed(ev))
	case ibcm.EventRepReceived:
		r := ev.Rep
		out.Conn = ConnParam{PrivateData: ev.PrivateData, ResponderResources: r.ResponderResources,
			InitiatorDepth: r.InitiatorDepth, RNRRetryCount: r.RNRRetryCount, SRQ: r.SRQ, QPNum: r.RemoteQPN}
		if r.FlowControl {
			out.Conn.FlowControl = 1
		}
		if id.qp == nil {
			// cma.c: the consumer answers; an MRA answers a repeated REP meanwhile.
			id.ib.SendMRA(cmaMRASetting, nil)
			out.Type = EventConnectResponse
			break
		}
		// librdmacm ucma_process_conn_resp.
		if err := id.modifyRTRRTS(MaxResponderResources, MaxInitiatorDepth); err != nil {
			id.qpErr()
			id.connEr = true
			out.Type, out.Status = EventConnectError, -int(errno(err))
			break
		}
		if err := id.ib.SendRTU(nil); err != nil {
			id.connEr = true
			out.Type, out.Status = EventConnectError, -int(errno(err))
			break
		}
		out.Type = EventEstablished
	case ibcm.EventRTUReceived, ibcm.EventUserEstablished:
		out.Type = EventEstablished
	case ibcm.EventDreqError, ibcm.EventDreqReceived, ibcm.EventDrepReceived:
		if ev.Type == ibcm.EventDreqError {
			out.Status = -int(whyFailed(ev))
		}
		if id.state != stConnect {
			return
		}
		id.state = stDisconnect
		if id.connEr {
			return
		}
		out.Type = EventDisconnected
	case ibcm.EventTimewaitExit:
		out.Type = EventTimewaitExit
	case ibcm.EventRejReceived:
		id.qpErr()
		if id.connEr {
			return
		}
		out.Type, out.Status = EventRejected, int(ev.RejReason)
		out.Conn.PrivateData = ev.PrivateData
	case ibcm.EventSIDRReqError:
		out.Type, out.Status = EventUnreachable, -int(whyFailed(ev))
	case ibcm.EventSIDRRepReceived:
		s := ev.SIDR
		out.UD.PrivateData = ev.PrivateData
		switch {
		case s.Status != ibcm.SIDRSuccess:
			out.Type, out.Status = EventUnreachable, int(s.Status)
		case id.qkey != 0 && s.QKey != id.qkey:
			// cma.c cma_set_qkey.
			out.Type, out.Status = EventAddrError, -int(syscall.EINVAL)
		default:
			out.Type = EventEstablished
			out.UD.AHAttr = id.ahToPeer()
			out.UD.QPNum, out.UD.QKey = s.QPN, s.QKey
		}
	default:
		return // MRA_RECEIVED and the rest: nothing for the consumer
	}
	id.post(out)
}

// whyFailed is the errno of an IB CM message's failure: ETIMEDOUT unless
// the IB CM says otherwise (ibcm.Event.Err).
func whyFailed(ev *ibcm.Event) syscall.Errno {
	if ev.Err != 0 {
		return ev.Err
	}
	return syscall.ETIMEDOUT
}

// ahToPeer is the address vector to the ID's peer (ib_init_ah_attr_from_path).
func (id *ID) ahToPeer() ibv.AHAttr {
	return ibv.AHAttr{IsGlobal: true, PortNum: 1, SL: id.path.SL, GRH: ibv.GlobalRoute{DGID: id.dst.Addr(),
		FlowLabel: id.path.FlowLabel, HopLimit: cmaHopLimit, TrafficClass: id.path.TrafficClass}}
}

func errno(err error) syscall.Errno {
	for e := err; e != nil; {
		if en, ok := e.(syscall.Errno); ok {
			return en
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return syscall.EINVAL
}

// findListener is cma.c cma_find_listener: the ID listening on the port
// of the request's port space for its destination address, on this device
// or on all. c.mu held.
func (c *CM) findListener(ps PortSpace, port uint16, dst netip.Addr, d *cmDev) *ID {
	var any *ID
	for _, id := range c.binds[bindKey{ps, port}] {
		if id.state != stListen || id.destroyed {
			continue
		}
		a := id.src.Addr()
		switch {
		case a == dst && (id.dev == nil || id.dev == d):
			return id
		case a.IsUnspecified() && a.Is4() == dst.Is4():
			any = id
		case a.IsUnspecified() && any == nil:
			any = id
		}
	}
	return any
}

// connRequest is cma.c cma_ib_req_handler: a REQ or SIDR_REQ for a
// listener becomes a new ID and a CONNECT_REQUEST; one for nobody is
// rejected by destroying its IB CM ID (REJ consumer reject, SIDR_REP
// reject), and one over the listener's backlog is dropped silently so the
// requester retries (ucma.c -ENOMEM).
func (c *CM) connRequest(ev *ibcm.Event) {
	d, _ := ev.ID.Context.(*cmDev)
	ud := ev.Type == ibcm.EventSIDRReqReceived
	var service uint64
	if ud {
		service = ev.SIDR.ServiceID
	} else {
		service = ev.Req.ServiceID
	}
	hdr, herr := wire.ParseCMAHeader(ev.PrivateData)
	ps, port, ok := wire.RDMAServiceIDParts(service)
	c.mu.Lock()
	var l *ID
	if herr == nil && ok && d != nil && !c.closed {
		l = c.findListener(PortSpace(ps), port, hdr.Dst.Unmap(), d)
	}
	if l == nil {
		c.mu.Unlock()
		ev.ID.Destroy()
		return
	}
	// cma.c cma_check_req_qp_type: an XRC REQ is for an XRC target's
	// listener, and only an XRC REQ is.
	if (l.qpType == ibv.QPTypeUD) != ud || (!ud && (ev.Req.QPType == ibcm.QPTypeXRC) != (l.qpType == ibv.QPTypeXRCRecv)) {
		c.mu.Unlock()
		ev.ID.Destroy()
		return
	}
	if l.backlogUsed >= l.backlog {
		c.mu.Unlock()
		ev.ID.DestroySilently()
		return
	}
	var ch *EventChannel
	if !l.sync {
		ch = l.ch
	}
	nid := c.newID(ch, l.ctx, l.ps, l.qpType)
	nid.dev = d
	nid.src = netip.AddrPortFrom(hdr.Dst.Unmap(), port)
	nid.dst = netip.AddrPortFrom(hdr.Src.Unmap(), hdr.SrcPort)
	nid.ib = ev.ID
	nid.state = stConnect
	c.byCM[ev.ID] = nid
	user := ev.PrivateData[wire.CMAHdrLen:]
	out := &Event{Type: EventConnectRequest, ListenID: l, owner: l}
	if ud {
		nid.path = ibcm.Path{SGID: d.addr, DGID: nid.dst.Addr(), HopLimit: cmaHopLimit, PKey: defaultPKey}
		out.UD = UDParam{PrivateData: user, AHAttr: nid.ahToPeer(), QKey: UDPQKey}
	} else {
		r := ev.Req
		nid.path = r.Path
		nid.resp, nid.init = r.ResponderResources, r.InitiatorDepth
		out.Conn = ConnParam{PrivateData: user, ResponderResources: r.ResponderResources,
			InitiatorDepth: r.InitiatorDepth, RetryCount: r.RetryCount, RNRRetryCount: r.RNRRetryCount,
			SRQ: r.SRQ, QPNum: r.RemoteQPN}
		if r.FlowControl {
			out.Conn.FlowControl = 1
		}
		// cma.c: the consumer has not answered yet; a repeated REQ gets an MRA.
		ev.ID.SendMRA(cmaMRASetting, nil)
	}
	l.backlogUsed++
	out.ID = nid
	l.ch.post(out)
	c.mu.Unlock()
}
