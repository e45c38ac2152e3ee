package nic

// The port: its state, which follows the link's network interface as
// rxe's follows its netdev (rxe_net.c rxe_notify: rxe_port_up and
// rxe_port_down on NETDEV_UP, NETDEV_DOWN and NETDEV_CHANGE), and its
// speed and width, derived from the interface's as the kernel's
// ib_get_eth_speed does (drivers/infiniband/core/verbs.c).

import (
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
)

// IB port speeds (enum ib_port_speed) and widths (enum ib_port_width), as
// ibv_port_attr's active_speed and active_width hold them.
const (
	SpeedSDR   = 1   // 2.5 Gb/s per lane
	SpeedDDR   = 2   // 5 Gb/s
	SpeedQDR   = 4   // 10 Gb/s
	SpeedFDR10 = 8   // 10.3125 Gb/s
	SpeedFDR   = 16  // 14.0625 Gb/s
	SpeedEDR   = 32  // 25.78125 Gb/s
	SpeedHDR   = 64  // 53.125 Gb/s
	SpeedNDR   = 128 // 106.25 Gb/s

	Width1X  = 1
	Width2X  = 16
	Width4X  = 2
	Width8X  = 4
	Width12X = 8
)

// Port states (enum ibv_port_state) and physical states (enum
// ib_port_phys_state) the port takes.
const (
	PortDown   = 1 // IBV_PORT_DOWN
	PortActive = 4 // IBV_PORT_ACTIVE

	PhysPolling  = 2 // IB_PORT_PHYS_STATE_POLLING: up, no carrier
	PhysDisabled = 3 // IB_PORT_PHYS_STATE_DISABLED: administratively down
	PhysLinkUp   = 5 // IB_PORT_PHYS_STATE_LINK_UP
)

// unknownSpeed is what ib_get_eth_speed takes when ethtool does not know
// the interface's speed (SPEED_1000, with a warning).
const unknownSpeed = 1000

// EthSpeed returns the IB speed and width a port reports on an Ethernet
// interface of mbps Mb/s, exactly as the kernel's ib_get_eth_speed maps
// them (ib_get_width_and_speed for a driver that reports no lanes): 0,
// unknown (SPEED_UNKNOWN, or no link settings: loopback, dummy), counts
// as 1000; up to 1000 Mb/s is 1X SDR, up to 10 Gb/s 1X FDR10, 20 Gb/s 4X
// DDR, 25 Gb/s 1X EDR, 40 Gb/s 4X FDR10, 50 Gb/s 2X EDR, 100 Gb/s 4X
// EDR, 200 Gb/s 4X HDR, more 4X NDR. The kernel maps a driver that
// reports its lanes (ethtool's netlink interface, not the ioctl softnic
// reads) by lane speed instead; softnic never has them.
func EthSpeed(mbps int) (speed, width uint8) {
	if mbps <= 0 {
		mbps = unknownSpeed
	}
	switch {
	case mbps <= 1000:
		return SpeedSDR, Width1X
	case mbps <= 10000:
		return SpeedFDR10, Width1X
	case mbps <= 20000:
		return SpeedDDR, Width4X
	case mbps <= 25000:
		return SpeedEDR, Width1X
	case mbps <= 40000:
		return SpeedFDR10, Width4X
	case mbps <= 50000:
		return SpeedEDR, Width2X
	case mbps <= 100000:
		return SpeedEDR, Width4X
	case mbps <= 200000:
		return SpeedHDR, Width4X
	}
	return SpeedNDR, Width4X
}

// PortStatus is what the port reports of its link (ibv_query_port's
// state, phys_state, active_speed and active_width).
type PortStatus struct {
	State     uint8 // PortActive or PortDown
	PhysState uint8 // PhysLinkUp, PhysPolling or PhysDisabled
	Speed     uint8 // SpeedSDR, ...
	Width     uint8 // Width1X, ...
}

// port is the NIC's port: the state its events last reported.
type port struct {
	mu     sync.Mutex
	active bool   // guarded by mu
	stop   func() // ends the link's state calls (link.WatchState)
}

// Port returns the port's state now (rxe_verbs.c rxe_query_port): ACTIVE
// while the link's interface is up with a carrier
// (ib_get_curr_port_state), else DOWN; the physical state LINK_UP when
// active, POLLING when up without a carrier, DISABLED when down or the
// link is closed; the speed and width from the interface's speed
// (EthSpeed). A link that cannot tell its state (link.State) is taken as
// up with a carrier while it is open, of unknown speed (1X SDR).
func (n *NIC) Port() PortStatus {
	s := n.linkState()
	st := PortStatus{State: PortDown, PhysState: PhysDisabled}
	switch {
	case s.Active():
		st.State, st.PhysState = PortActive, PhysLinkUp
	case s.Up:
		st.PhysState = PhysPolling
	}
	st.Speed, st.Width = EthSpeed(s.Speed)
	return st
}

// linkState returns the state of the NIC's link: down once it is closed,
// what it says (link.State), up with a carrier if it cannot tell.
func (n *NIC) linkState() link.LinkState {
	if n.linkGone.Load() {
		return link.LinkState{}
	}
	if c, ok := innerLink(n.cfg.Link).(link.LinkCloser); ok && c.Closed() {
		return link.LinkState{}
	}
	if s, ok := link.State(n.cfg.Link); ok {
		return s
	}
	return link.LinkState{Up: true, Carrier: true}
}

// startPort sets the port's first state and follows the link's from then
// on, as rxe_enable_driver calls rxe_set_port_state when the device is
// registered: IBV_EVENT_PORT_ACTIVE if the link is up, IBV_EVENT_PORT_ERR
// (and link_downed) if not.
func (n *NIC) startPort() {
	n.port.stop, _ = link.WatchState(n.cfg.Link, n.followLink)
	n.port.mu.Lock()
	defer n.port.mu.Unlock()
	n.port.active = n.linkState().Active()
	n.portEventLocked()
}

// followLink moves the port to the link's state when it changed (the
// link's state watcher, and the receive goroutine when it finds the link
// closed): rxe_port_up raises IBV_EVENT_PORT_ACTIVE; rxe_port_down raises
// IBV_EVENT_PORT_ERR and counts link_downed. Deliberate difference from
// rxe: one event, and one link_downed, per change of the port's state,
// where rxe raises one per netdev event (a NETDEV_CHANGE that finds the
// port down again raises PORT_ERR again). Nothing once the NIC is
// closed: closing it closes the link.
func (n *NIC) followLink() {
	if n.closed.Load() {
		return
	}
	active := n.linkState().Active()
	n.port.mu.Lock()
	defer n.port.mu.Unlock()
	if n.closed.Load() || active == n.port.active {
		return
	}
	n.port.active = active
	n.portEventLocked()
}

// portEventLocked raises the event of the port's state. n.port.mu held.
func (n *NIC) portEventLocked() {
	if n.port.active {
		n.postAsync(ibv.AsyncEvent{Type: ibv.EventPortActive})
		return
	}
	n.postAsync(ibv.AsyncEvent{Type: ibv.EventPortErr})
	n.ctr.LinkDowned.Add(1)
}

// linkClosed is the receive goroutine's news that its link refused a read
// for good while the NIC is open: closed under it (a link that says so
// through no state watcher, too).
func (n *NIC) linkClosed() {
	if n.closed.Load() {
		return
	}
	n.linkGone.Store(true)
	n.followLink()
}
