package cm

import (
	"net/netip"

	"github.com/softnic/softnic/ibv"
)

// Route is the path record of an ID's route on RoCE (struct
// ibv_sa_path_rec of rdma_route, as the kernel's rdma_cm reports it to
// librdmacm: cma.c cma_resolve_iboe_route, cm_format_paths_from_req), seen
// from the ID's side. Resolved is false until ResolveRoute succeeds (or,
// for the ID of a connection request, from the request's path).
type Route struct {
	Resolved       bool
	SGID, DGID     netip.Addr
	FlowLabel      uint32
	HopLimit       uint8
	TrafficClass   uint8
	SL             uint8
	PKey           uint16
	MTU            ibv.MTU
	PacketLifeTime uint8
}

// Route returns the ID's route.
func (id *ID) Route() Route {
	if !id.ok() {
		return Route{}
	}
	id.cm.mu.Lock()
	defer id.cm.mu.Unlock()
	p := id.path
	if !p.SGID.IsValid() {
		return Route{}
	}
	return Route{Resolved: true, SGID: p.SGID, DGID: p.DGID, FlowLabel: p.FlowLabel, HopLimit: p.HopLimit,
		TrafficClass: p.TrafficClass, SL: p.SL, PKey: p.PKey, MTU: ibv.MTU(p.MTU), PacketLifeTime: p.PacketLifeTime}
}
