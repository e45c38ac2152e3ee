package cm

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// AddrInfo is struct rdma_addrinfo.
type AddrInfo struct {
	Flags     int // AIPassive, AINumericHost, ...
	Family    int // syscall.AF_INET, AF_INET6 or 0
	QPType    ibv.QPType
	PortSpace PortSpace
	Src, Dst  netip.AddrPort
}

// AddrInfo flags (rdma_cma.h RAI_*).
const (
	AIPassive     = 0x01
	AINumericHost = 0x02
	AINoAddr      = 0x04
	AIFamily      = 0x08
)

// GetAddrInfo resolves node and service (rdma_getaddrinfo): names through
// the system resolver (a numeric address is taken as it is), services as
// port numbers or names. Without hints the port space is TCP with RC QPs;
// a UDP port space gives UD. With AIPassive the addresses are sources (an
// empty node: the unspecified address), else destinations, with hints.Src
// as the source.
func GetAddrInfo(ctx context.Context, node, service string, hints *AddrInfo) ([]AddrInfo, error) {
	if ctx == nil {
		return nil, errf(verbs.EINVAL, "nil context")
	}
	var h AddrInfo
	if hints != nil {
		h = *hints
	}
	if h.PortSpace == 0 {
		h.PortSpace = PSTCP
		if h.QPType == ibv.QPTypeUD {
			h.PortSpace = PSUDP
		}
	}
	if h.QPType == 0 {
		h.QPType = ibv.QPTypeRC
		if h.PortSpace == PSUDP || h.PortSpace == PSIPoIB {
			h.QPType = ibv.QPTypeUD
		}
	}
	var port uint16
	if service != "" {
		if n, err := strconv.ParseUint(service, 10, 16); err == nil {
			port = uint16(n)
		} else {
			netw := "tcp"
			if h.PortSpace == PSUDP {
				netw = "udp"
			}
			p, err := net.DefaultResolver.LookupPort(ctx, netw, service)
			if err != nil {
				return nil, errf(verbs.EINVAL, "service %q: %v", service, err)
			}
			port = uint16(p)
		}
	}
	famOK := func(a netip.Addr) bool {
		switch h.Family {
		case syscall.AF_INET:
			return a.Is4()
		case syscall.AF_INET6:
			return !a.Is4()
		}
		return true
	}
	var addrs []netip.Addr
	switch {
	case node == "":
		if h.Flags&AIPassive == 0 {
			return nil, errf(verbs.EINVAL, "no node for an active address")
		}
		if h.Family == syscall.AF_INET6 {
			addrs = []netip.Addr{netip.IPv6Unspecified()}
		} else {
			addrs = []netip.Addr{netip.IPv4Unspecified()}
		}
	default:
		if a, err := netip.ParseAddr(node); err == nil {
			addrs = []netip.Addr{a.Unmap()}
		} else if h.Flags&AINumericHost != 0 {
			return nil, errf(verbs.EINVAL, "%q is not a numeric address", node)
		} else {
			nw := "ip"
			switch h.Family {
			case syscall.AF_INET:
				nw = "ip4"
			case syscall.AF_INET6:
				nw = "ip6"
			}
			as, err := net.DefaultResolver.LookupNetIP(ctx, nw, node)
			if err != nil {
				return nil, errf(EADDRNOTAVAIL, "%q: %v", node, err)
			}
			for _, a := range as {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	var out []AddrInfo
	for _, a := range addrs {
		if !famOK(a) {
			continue
		}
		ai := AddrInfo{Flags: h.Flags, Family: syscall.AF_INET6, QPType: h.QPType, PortSpace: h.PortSpace}
		if a.Is4() {
			ai.Family = syscall.AF_INET
		}
		if h.Flags&AIPassive != 0 {
			ai.Src = netip.AddrPortFrom(a, port)
		} else {
			ai.Dst = netip.AddrPortFrom(a, port)
			ai.Src = h.Src
		}
		out = append(out, ai)
	}
	if len(out) == 0 {
		return nil, errf(EADDRNOTAVAIL, "no address of the family asked for %q", node)
	}
	return out, nil
}

// epTimeout is librdmacm's rdma_create_ep resolution timeout.
const epTimeout = 2000 * time.Millisecond

// CreateEP makes a synchronous ID from ai (rdma_create_ep): bound to
// ai.Src (AIPassive) or resolved to ai.Dst with its route, and with a QP
// when attr is not nil (for a passive ID: each ID GetRequest returns).
func (c *CM) CreateEP(ai *AddrInfo, pd *verbs.PD, attr *verbs.QPInitAttr) (*ID, error) {
	if c == nil || ai == nil {
		return nil, errf(verbs.EINVAL, "nil CM or address info")
	}
	ps, qt := ai.PortSpace, ai.QPType
	if ps == 0 {
		ps = PSTCP
	}
	if qt == 0 {
		qt = ibv.QPTypeRC
		if ps == PSUDP || ps == PSIPoIB {
			qt = ibv.QPTypeUD
		}
	}
	id, err := c.CreateID(nil, nil, ps, qt)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ID, error) {
		id.destroy(false)
		return nil, err
	}
	if ai.Flags&AIPassive != 0 {
		if err := id.BindAddr(ai.Src); err != nil {
			return fail(err)
		}
		if attr != nil {
			a := *attr
			c.mu.Lock()
			id.epPD, id.epAttr = pd, &a
			c.mu.Unlock()
		}
		return id, nil
	}
	if err := id.ResolveAddr(ai.Src, ai.Dst, epTimeout); err != nil {
		return fail(err)
	}
	if err := id.ResolveRoute(epTimeout); err != nil {
		return fail(err)
	}
	if attr != nil {
		if _, err := id.CreateQP(pd, *attr); err != nil {
			return fail(err)
		}
	}
	return id, nil
}
