package cm

import (
	"net/netip"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// idOptions are an ID's options (rdma_set_option, cma.c's tos,
// reuseaddr, afonly and timeout of struct rdma_id_private).
type idOptions struct {
	tos           uint8
	reuseAddr     bool
	afOnly        bool
	ackTimeout    uint8
	ackTimeoutSet bool
}

// sharesPort reports whether an ID with options o may bind addr on a
// port that another, with options other and address otherAddr, holds
// (cma.c cma_check_port): both asked to reuse it and the other does not
// listen, or both are of one address family only and theirs differ.
func (o *idOptions) sharesPort(other *idOptions, otherListens bool, addr, otherAddr netip.Addr) bool {
	if o.reuseAddr && other.reuseAddr && !otherListens {
		return true
	}
	return o.afOnly && other.afOnly && addr.Is4() != otherAddr.Is4()
}

// SetTOS sets the type of service of the ID's connection
// (RDMA_OPTION_ID_TOS, cma.c rdma_set_service_type): on RoCE the traffic
// class of the route ResolveRoute finds (cma_resolve_iboe_route), so of
// the REQ's path and the QPs' address vectors.
func (id *ID) SetTOS(tos uint8) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	id.opt.tos = tos
	return nil
}

// SetReuseAddr lets the ID bind a port others hold that let it too, and
// do not listen (RDMA_OPTION_ID_REUSEADDR, cma.c rdma_set_reuseaddr):
// before the ID binds, or to stop reusing at any time but while it
// listens (EINVAL otherwise).
func (id *ID) SetReuseAddr(on bool) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	if (on && id.state != stIdle) || (!on && id.state == stListen) {
		return errf(verbs.EINVAL, "reuseaddr in state %d", id.state)
	}
	id.opt.reuseAddr = on
	return nil
}

// SetAFOnly binds the ID's port in its address family only
// (RDMA_OPTION_ID_AFONLY, cma.c rdma_set_afonly): before it listens or
// connects (EINVAL otherwise).
func (id *ID) SetAFOnly(on bool) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	if id.state != stIdle && id.state != stAddrBound {
		return errf(verbs.EINVAL, "afonly in state %d", id.state)
	}
	id.opt.afOnly = on
	return nil
}

// SetAckTimeout sets the local ACK timeout of the ID's RC QP, which
// InitQPAttr gives for RTS instead of the path's (RDMA_OPTION_ID_ACK_TIMEOUT,
// cma.c rdma_set_ack_timeout): 4.096 µs × 2^timeout. EINVAL on a UC or
// UD ID.
func (id *ID) SetAckTimeout(timeout uint8) error {
	if err := id.lock(); err != nil {
		return err
	}
	defer id.cm.mu.Unlock()
	if id.qpType != ibv.QPTypeRC {
		return errf(verbs.EINVAL, "ack timeout on a %v ID", id.qpType)
	}
	id.opt.ackTimeout, id.opt.ackTimeoutSet = timeout, true
	return nil
}
