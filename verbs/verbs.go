// Package verbs is softnic's public RDMA API: libibverbs in Go. Each type
// and method maps one-to-one to a libibverbs object or call, so its man
// pages apply: Device (ibv_context), PD, MR, CQ, CompChannel, QP, SRQ, WQ,
// AH and MW. The values they take and return — work requests,
// completions, QP and AH attributes, every enum — are libibverbs' structs
// and enums in package ibv (ibv.SendWR is struct ibv_send_wr,
// ibv.WorkCompletion struct ibv_wc), which the engine uses too, so a post
// copies nothing and converts nothing.
//
// A Device is a software NIC bound to one address on a link: the
// in-memory fabric (package fabric) for tests, or a UDP socket on port
// 4791 to talk to any RoCEv2 peer. Errors wrap the errno values
// libibverbs returns (EINVAL, ENOMEM, EBUSY, ...): test them with
// errors.Is. Misuse is an error, never a panic: a nil or foreign object,
// a nil attribute pointer or a nil context (the calls that wait take
// one; context.Background waits without a bound) is EINVAL.
//
// Beyond libibverbs, QP.Connect (and ToInit, ToRTR, ToRTS) takes a QP
// from RESET to RTS in one call, CQ.Wait waits for completions with a
// context and CQ.All ranges over them; every enum prints its name under
// %v and its number under %d and %x.
//
// Posting is safe from many goroutines: PostSend and BindMW on one QP
// are atomic, and wait while another goroutine holds a WrStart batch of
// the QP (its send queue), as on mlx5; from the goroutine holding the
// batch they are EBUSY. docs/verbs-map.md maps every call of
// libibverbs' verbs.h to its counterpart here, or says why there is
// none; the calls softnic deliberately lacks return EOPNOTSUPP and are
// listed in Unsupported.
//
// # Examples
//
// Each is a runnable function of example_*_test.go, checked by go test:
//
//   - Example: an RC connection the ibv_rc_pingpong way; SEND, WRITE,
//     READ and FETCH_AND_ADD.
//   - ExampleQP_Connect: the same connection in three lines.
//   - ExampleCQ_Wait, ExampleCQ_All: waiting for completions.
//   - ExamplePD_CreateAH: UD datagrams, the GRH, an AH made from a
//     completion.
//   - ExamplePD_CreateSRQ: two QPs sharing a receive queue.
//   - ExampleSRQ_PostOps: tag matching: a tagged buffer, an expected and
//     an unexpected message, the phase sync.
//   - ExamplePD_AllocMW: memory windows of type 1 and 2.
//   - ExamplePD_AllocMR: fast registration (MapSG, REG_MR, LOCAL_INV).
//   - ExampleQPEx: the ibv_wr_* builders, WrStart to WrComplete.
//   - ExampleQPEx_WrSendTSO: UD TSO, one WR sent as datagrams of a
//     header and an mss-byte piece each.
//   - ExampleXRCD: XRC, one connection into two XRC SRQs of a domain,
//     each message's SRQ named by its number.
//   - ExamplePD_CreateGSIQP: the General Services QP (QP1), a MAD from
//     one device's QP1 to another's.
//   - ExampleQP_AttachMcast: UD multicast, one datagram to a group and
//     two QPs attached to it.
//   - Example_faultInjection: a packet lost on the fabric, the NAK and
//     the go-back-N resend.
package verbs

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
	"github.com/softnic/softnic/link"
)

// Config configures a Device.
type Config struct {
	// Link carries the device's packets: a fabric endpoint or a UDP link.
	Link link.Link
	// Clock drives the transport's timers; nil means the wall clock.
	Clock clock.Clock
	// Processors is the number of engine goroutines (0: GOMAXPROCS, ≤ 4).
	Processors int
	// PeerPort is the UDP port peers receive on (default 4791).
	PeerPort uint16
	// Name is the device name (default "softnic0").
	Name string
	// PortMTU fixes the port's active MTU, the largest UD message. 0, the
	// default, makes it follow the MTU of the link's network interface as
	// rxe's follows its netdev's (nic.ActiveMTU: 1500 gives MTU1024,
	// 4176 or more MTU4096), changes included; MTU4096 when the link
	// cannot tell. It does not bound RC and UC QPs, whose path MTU does.
	PortMTU ibv.MTU
	// BusyPoll is how long a blocking wait (CompChannel.GetEvent, CQ.Wait)
	// polls the link (Device.Progress) before it sleeps, as the kernel's
	// SO_BUSY_POLL has a blocking socket read spin on the device queue
	// first: a wait that the next packet ends then never sleeps and never
	// waits for another goroutine, for the price of a CPU that spins. It
	// also tells the device that the application busy-polls: while its
	// polls come less than 200 µs apart, the receive goroutine steps off
	// the link for them within 100 µs, not only once it wins a datagram
	// from them, so that every poll that finds a SEND or WRITE leaves its
	// ACK to go out with the application's answer. 0, the default, sleeps at once.
	BusyPoll time.Duration
	// CC turns on congestion control, DCQCN with these parameters
	// (ibv.DefaultCCParams: mlx5's defaults); nil, the default, leaves it
	// off. The device then sends every packet ECN-capable, paces each
	// RC, UC, XRC and UD QP to the rate the CNPs it gets set, and answers a
	// packet that arrives marked Congestion Experienced with a CNP to
	// the QP that sent it. Only a peer that marks its packets
	// ECN-capable (softnic with CC on) ever gets a CNP; rxe, which sends
	// none so and has no CNP opcode, is left alone. For the UDP link set
	// link.UDPConfig.ECN too, so that its socket marks by default.
	CC *ibv.CCParams
}

// Device is an open RDMA device: ibv_context of one softnic NIC. Only
// Open makes a usable one: methods of a nil or zero Device return EINVAL
// (or zero values), and after Close every call on the device or one of
// its objects (QP, CQ, SRQ, WQ, MR, ...) fails with an error wrapping
// ENODEV that says the device is closed, calls without an error answer
// as for an object not made by this package (QP.State is
// QPStateUnknown), while destroy calls (Destroy, Dealloc, Dereg, Close,
// AckEvents) still release what they hold.
type Device struct {
	n    *nic.NIC
	acks asyncAcks
	mws  *registry[mwIndex, *MW] // the device's memory windows by key index
	objs objects                 // live QPs, SRQs, WQs, AHs, MRs, MWs: who holds what
	// busyPoll is Config.BusyPoll.
	busyPoll time.Duration
}

// Open starts a device on cfg.Link (ibv_open_device). A link carries one
// device: Open on a link an open device uses is EBUSY, naming that
// device. Close closes the device's link, so a link once used cannot be
// opened again (ENODEV): attach a new fabric endpoint or UDP link at the
// address.
func Open(cfg Config) (*Device, error) {
	if cfg.BusyPoll < 0 {
		return nil, fmt.Errorf("%w: a negative busy-poll time (%v)", EINVAL, cfg.BusyPoll)
	}
	n, err := nic.New(nic.Config{Link: cfg.Link, Clock: cfg.Clock, Processors: cfg.Processors,
		PeerPort: cfg.PeerPort, Name: cfg.Name, PortMTU: cfg.PortMTU, BusyPoll: cfg.BusyPoll > 0, CC: cfg.CC})
	if err != nil {
		return nil, err
	}
	return &Device{n: n, mws: newRegistry[mwIndex, *MW](), busyPoll: cfg.BusyPoll}, nil
}

// Progress reads what has arrived on the device's link without waiting
// and handles it on the calling goroutine, and returns how many datagrams
// it read: the progress call of UCX or DPDK's rx burst. softnic's receive
// goroutine handles every datagram anyway; Progress is for an
// application that spins and would rather not wait for that goroutine to
// be scheduled. On a UDP link, an application that polls busily (polls
// less than 200 µs apart) leases the link, as Linux's preferred busy
// polling does (SO_PREFER_BUSY_POLL): the receive goroutine stays off it,
// so each datagram wakes no second thread, and a poll that read the end
// of a SEND or WRITE may leave its ACKs to leave with the application's
// answer (its next post). The lease ends when the application blocks in
// one of the device's waits (CompChannel.GetEvent, CQ.Wait,
// WaitActivity) or 1 ms after its last poll: until then what arrives
// waits for the next poll, and ACKs left behind for the next post, poll
// or wait. CQ.Poll calls it when the CQ is empty; an application
// that spins on memory instead (the last byte of an RDMA WRITE, as
// perftest's write_lat does) calls it in its loop. It returns 0 at once
// when another goroutine is in Progress, and on a link that cannot be
// read without waiting.
func (d *Device) Progress() int {
	if !d.ok() {
		return 0
	}
	return d.n.Progress()
}

// WaitActivity blocks until the device has done work - handled received
// datagrams, or run a QP's transport for its timers or what a receive
// left over - or timeout has passed or ctx ends, and reports whether it
// was the device's work (which need not be what the caller waits for:
// look again). It is for an application that waits on memory a peer writes
// (the last byte of an RDMA WRITE, as perftest's write_lat does): where
// a hardware NIC leaves it nothing to block on, softnic's receive
// goroutine can wake it. ready is the application's own check (has the
// byte arrived?); WaitActivity calls it once it is counted as a waiter
// and returns true at once if it holds, so a datagram handled between
// the application's last look and the wait is not missed. It does not
// allocate. With several goroutines waiting, one batch of datagrams may
// wake only one of them.
func (d *Device) WaitActivity(ctx context.Context, timeout time.Duration, ready func() bool) bool {
	if !d.ok() || ctx == nil {
		return false
	}
	return d.n.WaitActivity(ctx, timeout, ready)
}

// BusyPoll returns Config.BusyPoll: how long the device's blocking waits
// poll the link before they sleep (0: they sleep at once). An
// application's own wait loops (on memory, say) follow it by calling
// Progress as they spin.
func (d *Device) BusyPoll() time.Duration {
	if !d.ok() {
		return 0
	}
	return d.busyPoll
}

// busyPollUntil spins on Progress until done reports true or the
// device's BusyPoll has passed; it reports done's last answer.
func (d *Device) busyPollUntil(done func() bool) bool {
	if d.busyPoll <= 0 {
		return false
	}
	end := time.Now().Add(d.busyPoll)
	for {
		d.n.Progress()
		if done() {
			return true
		}
		if !time.Now().Before(end) {
			return false
		}
	}
}

func (d *Device) ok() bool { return d != nil && d.n != nil }

// check reports why d cannot make objects: not opened, or closed.
func (d *Device) check() error {
	if !d.ok() {
		return errNil("Device")
	}
	if d.n.Closed() {
		return fmt.Errorf("%w: device %s is closed", ENODEV, d.n.Name())
	}
	return nil
}

// Close stops the device and its engine goroutines (ibv_close_device).
// Closing a closed device does nothing.
func (d *Device) Close() error {
	if !d.ok() {
		return errNil("Device")
	}
	return d.n.Close()
}

// Name returns the device name (ibv_get_device_name).
func (d *Device) Name() string {
	if !d.ok() {
		return ""
	}
	return d.n.Name()
}

// CC returns a copy of the device's congestion control parameters, nil
// when congestion control is off (Config.CC).
func (d *Device) CC() *ibv.CCParams {
	if !d.ok() || d.n.CC() == nil {
		return nil
	}
	p := *d.n.CC()
	return &p
}

// Addr returns the IP address the device is bound to.
func (d *Device) Addr() netip.Addr {
	if !d.ok() {
		return netip.Addr{}
	}
	return d.n.Addr()
}

// QueryDevice returns the device attributes (ibv_query_device).
func (d *Device) QueryDevice() ibv.DeviceAttr {
	if !d.ok() {
		return ibv.DeviceAttr{}
	}
	return d.n.QueryDevice()
}

// Counters returns a snapshot of the device's protocol counters (rxe
// hw_counters): values read when it is called, each with an atomic load;
// call it again for newer ones. A Device not made by Open has zero
// counters.
func (d *Device) Counters() ibv.Counters {
	if !d.ok() {
		return ibv.Counters{}
	}
	return d.n.Counters().Load()
}

// PortAttr is a port's attributes (struct ibv_port_attr), as rxe reports
// them (rxe.c rxe_init_port_param, rxe_verbs.c rxe_query_port).
type PortAttr struct {
	State        uint8 // a PortState: 4 = IBV_PORT_ACTIVE, 1 = IBV_PORT_DOWN
	MaxMTU       ibv.MTU
	ActiveMTU    ibv.MTU
	GIDTblLen    int
	PortCapFlags uint32
	MaxMsgSz     uint64
	PKeyTblLen   uint16
	LID          uint16
	SMLID        uint16
	LMC          uint8
	MaxVLNum     uint8
	ActiveWidth  uint8 // enum ib_port_width: 1 = 1X, 16 = 2X, 2 = 4X, 4 = 8X, 8 = 12X
	ActiveSpeed  uint8 // enum ib_port_speed: 1 = SDR (2.5 Gb/s), 8 = FDR10, 32 = EDR, ...
	PhysState    uint8 // 5 = LinkUp, 2 = Polling (up, no carrier), 3 = Disabled (down)
	LinkLayer    uint8 // 2 = IBV_LINK_LAYER_ETHERNET
}

// Port state and link-layer values.
const (
	PortActive        PortState = 4 // IBV_PORT_ACTIVE: the state of softnic's port while its link is up
	LinkLayerEthernet           = 2
	PortCapCMSup                = 1 << 16 // IB_PORT_CM_SUP
)

// ActiveMTU is the active MTU a port takes on a network interface of
// MTU netdevMTU, as rxe derives it from its netdev (rxe.c rxe_set_mtu:
// the largest IB MTU that fits with the RoCE headers; 1500 gives
// MTU1024, 9000 and loopback MTU4096, MTU256 at the least).
func ActiveMTU(netdevMTU int) ibv.MTU { return nic.ActiveMTU(netdevMTU) }

// QueryPort returns port 1's attributes (ibv_query_port). The active MTU
// is Config.PortMTU when set, else derived from the MTU of the link's
// network interface as it is now (nic.ActiveMTU, rxe.c rxe_set_mtu); the
// max MTU is 4096, as rxe reports. The active MTU bounds UD messages; an
// RC or UC QP's path MTU, checked against the max MTU only (rxe_qp.c
// rxe_qp_chk_attr), bounds its packets.
//
// The state follows the link as rxe's follows its netdev (rxe_query_port):
// ACTIVE while the link's interface is up with a carrier, DOWN otherwise
// and once the link is closed; the physical state is LinkUp, Polling (up
// without a carrier) or Disabled. The speed and width are the
// interface's, mapped as the kernel's ib_get_eth_speed maps its ethtool
// speed (nic.EthSpeed: 10 Gb/s, a veth's, is 1X FDR10; an unknown speed,
// loopback's, 1X SDR). A link that cannot tell its state (a fabric
// endpoint says it: fabric.Endpoint.SetLinkState) is ACTIVE at 1X SDR
// while it is open. Each change raises EventPortErr or EventPortActive
// (see GetAsyncEvent); each fall counts link_downed.
//
// While the link is administratively down or closed it sends nothing and
// sent_pkts does not count what it refused. A UD or UC work request sent
// then fails with IBV_WC_LOC_QP_OP_ERR (the QP to SQE for UD, ERR for
// UC), as rxe's requester fails one when its netdev has no route. RC's
// packets wait for the retransmit timer and the work request completes
// if the link comes back within the QP's retries: a deliberate
// difference, rxe fails RC's the same way.
func (d *Device) QueryPort(port uint8) (PortAttr, error) {
	if err := d.check(); err != nil {
		return PortAttr{}, err
	}
	if port != 1 {
		return PortAttr{}, fmt.Errorf("%w: port %d (the device has port 1)", EINVAL, port)
	}
	p := d.n.Port()
	return PortAttr{
		State: p.State, MaxMTU: ibv.MTU4096, ActiveMTU: d.n.PortMTU(), GIDTblLen: 1,
		PortCapFlags: PortCapCMSup, MaxMsgSz: uint64(d.n.QueryDevice().MaxMsgSize), PKeyTblLen: 1,
		MaxVLNum: 1, ActiveWidth: p.Width, ActiveSpeed: p.Speed, PhysState: p.PhysState, LinkLayer: LinkLayerEthernet,
	}, nil
}

// Link returns the link the device was opened on (Config.Link), for what
// only the link knows: its network's answers (link.WatchSendErrors), its
// routes (link.ResolveRoute), its counters. The device owns it: closing
// the device closes it, and a datagram written to it directly travels
// beside the device's own. nil for a Device not made by Open.
func (d *Device) Link() link.Link {
	if !d.ok() {
		return nil
	}
	return d.n.Link()
}

// GID is a 16-byte global identifier; for RoCEv2 an IPv6 address or an
// IPv4-mapped one.
type GID [16]byte

// Addr returns the GID as an address (IPv4 for IPv4-mapped GIDs).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// String formats the GID as ibv_devinfo does (an IPv6 address).
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// MarshalText makes a GID a string in JSON and other text encodings: the
// IPv6 text form ibv_devinfo prints for a RoCE v2 GID (devinfo.c
// print_formated_gid: inet_ntop(AF_INET6)), "::ffff:127.0.0.2" for an
// IPv4-mapped one. (Only the deprecated IPv4-compatible ::a.b.c.d GIDs
// differ from glibc's inet_ntop: softnic writes them in hex groups.)
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses what MarshalText writes, or any IPv6 address, or an
// IPv4 address (which becomes its IPv4-mapped GID). It returns an error
// wrapping EINVAL for anything else, zoned addresses included.
func (g *GID) UnmarshalText(b []byte) error {
	a, err := netip.ParseAddr(string(b))
	if err != nil || a.Zone() != "" {
		return fmt.Errorf("%w: GID %q is not an IP address", EINVAL, b)
	}
	*g = GIDFromAddr(a)
	return nil
}

// GIDFromAddr returns the RoCEv2 GID of an IP address.
func GIDFromAddr(a netip.Addr) GID { return GID(netip.AddrFrom16(a.As16()).As16()) }

// QueryGID returns GID index of port 1 (ibv_query_gid). softnic's table
// has one entry, the device address (a RoCEv2 GID).
func (d *Device) QueryGID(port uint8, index int) (GID, error) {
	if err := d.check(); err != nil {
		return GID{}, err
	}
	if port != 1 || index != 0 {
		return GID{}, fmt.Errorf("%w: GID %d/%d (the table has port 1 index 0)", EINVAL, port, index)
	}
	return GID(d.n.GID()), nil
}

// AsyncEvents returns the asynchronous events queued since the last call
// (ibv_get_async_event without blocking) and a channel signalled when
// more arrive (a nil channel for a Device not made by Open). It takes
// them from GetAsyncEvent's queue, without acknowledgements.
func (d *Device) AsyncEvents() ([]ibv.AsyncEvent, <-chan struct{}) {
	if !d.ok() {
		return nil, nil
	}
	return d.n.AsyncEvents(), d.n.AsyncReady()
}

// PD is a protection domain (ibv_pd).
type PD struct {
	d  *Device
	pd *nic.PD

	// mu orders Dealloc after the creations that take a reference on the
	// PD (QPs, SRQs, AHs): they hold it shared, Dealloc exclusively, so
	// none can reference a freed PD (nic.PD.Ref does not check).
	mu      sync.RWMutex
	dead    bool // guarded by mu
	parents int  // guarded by mu; parent domains protecting with this PD
	cqs     int  // guarded by mu; a parent domain's CQs (CreateCQEx)

	// A parent domain (AllocParentDomain) shares its protection domain's
	// engine PD and names it here, with its thread domain and context.
	parent  *PD
	td      *TD
	context any
}

func (pd *PD) ok() bool { return pd != nil && pd.pd != nil && pd.d.ok() }

// use checks that pd can hold a new object and keeps Dealloc away until
// release is called.
func (pd *PD) use() (release func(), err error) {
	if !pd.ok() {
		return nil, errNil("PD")
	}
	if err := pd.d.check(); err != nil {
		return nil, err
	}
	pd.mu.RLock()
	if pd.dead {
		pd.mu.RUnlock()
		return nil, fmt.Errorf("%w: PD %d was deallocated", EINVAL, pd.pd.Handle())
	}
	return pd.mu.RUnlock, nil
}

// The protection domain a parent domain names cannot be deallocated
// before it (PD.Dealloc is EBUSY), so a parent domain that is not dead
// has a live protection domain and use needs only its own lock.

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*PD, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	pd, err := d.n.Mem().AllocPD()
	if err != nil {
		return nil, err
	}
	return &PD{d: d, pd: pd}, nil
}

// Dealloc frees the PD (ibv_dealloc_pd); EBUSY while MRs, MWs, QPs,
// SRQs, WQs or AHs use it (the error names them) or parent domains
// protect with it, EINVAL when it was already freed. Of a parent domain
// it frees the parent domain (ibv_dealloc_pd frees both kinds).
func (pd *PD) Dealloc() error {
	if !pd.ok() {
		return errNil("PD")
	}
	if pd.parent != nil {
		return pd.deallocParent()
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.parents > 0 && !pd.dead {
		return fmt.Errorf("%w: PD %d protects %d parent domains", EBUSY, pd.pd.Handle(), pd.parents)
	}
	if err := pd.d.n.Mem().DeallocPD(pd.pd); err != nil {
		return pd.d.busy(err, fmt.Sprintf("PD %d", pd.pd.Handle()), func(obj any) bool {
			return pdOf(obj) == pd
		})
	}
	pd.dead = true
	return nil
}

// Handle returns the PD's handle.
func (pd *PD) Handle() uint32 {
	if !pd.ok() {
		return 0
	}
	return pd.pd.Handle()
}

// MR is a registered memory region (ibv_mr), or a fast-registration
// region from PD.AllocMR (fastreg.go).
type MR struct {
	d  *Device
	pd atomic.Pointer[PD] // Rereg with ReregChangePD changes it
	mr *nic.MR
	// key is a fast-registration MR's lkey and rkey as the application
	// sees them (ib_mr.lkey/rkey): UpdateFastRegKey changes it before the
	// REG_MR that installs it runs.
	key atomic.Uint32
}

func (mr *MR) ok() bool { return mr != nil && mr.mr != nil && mr.d.ok() }

// RegMR registers buf (ibv_reg_mr): its address for lkey/rkey access is
// the buffer's own address, as for a C program. REMOTE_WRITE or
// REMOTE_ATOMIC without LOCAL_WRITE is refused with EINVAL, as the
// kernel's ib_check_mr_access refuses it.
func (pd *PD) RegMR(buf []byte, access ibv.Access) (*MR, error) {
	return pd.regMR(buf, 0, false, access)
}

// RegMRIOVA registers buf with iova as the address of its first byte
// (ibv_reg_mr_iova), with RegMR's access rules.
func (pd *PD) RegMRIOVA(buf []byte, iova uint64, access ibv.Access) (*MR, error) {
	return pd.regMR(buf, iova, true, access)
}

func (pd *PD) regMR(buf []byte, iova uint64, useIOVA bool, access ibv.Access) (*MR, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	defer release()
	mr, err := pd.d.n.Mem().RegMR(pd.pd, buf, iova, useIOVA, access)
	if err != nil {
		return nil, err
	}
	return pd.newMR(mr), nil
}

// newMR wraps an engine MR of pd and records it among the device's
// objects.
func (pd *PD) newMR(mr *nic.MR) *MR {
	m := &MR{d: pd.d, mr: mr}
	m.pd.Store(pd)
	pd.d.objs.add(m)
	return m
}

// Dereg deregisters the region (ibv_dereg_mr); EBUSY while memory windows
// are bound to it (the error names them), EINVAL when it already was.
func (mr *MR) Dereg() error {
	if !mr.ok() {
		return errNil("MR")
	}
	d := mr.d
	if err := d.n.Mem().DeregMR(mr.mr); err != nil {
		return d.busy(err, fmt.Sprintf("MR %#x", mr.LKey()), func(obj any) bool {
			mw, ok := obj.(*MW)
			return ok && mw.mw.BoundTo(mr.mr)
		})
	}
	d.objs.del(mr)
	return nil
}

// LKey returns the local key. For a fast-registration MR it is the key
// UpdateFastRegKey last set (ib_mr.lkey).
func (mr *MR) LKey() uint32 {
	if !mr.ok() {
		return 0
	}
	if mr.mr.Fast() {
		return mr.key.Load()
	}
	return mr.mr.LKey()
}

// RKey returns the remote key (the same value as LKey).
func (mr *MR) RKey() uint32 { return mr.LKey() }

// Addr returns the address of the region's first byte; for a
// fast-registration MR the address MapSG mapped (ib_mr.iova).
func (mr *MR) Addr() uint64 {
	if !mr.ok() {
		return 0
	}
	if mr.mr.Fast() {
		iova, _ := mr.mr.Mapped()
		return iova
	}
	return mr.mr.Addr()
}

// Len returns the region's length; for a fast-registration MR the length
// MapSG mapped (ib_mr.length).
func (mr *MR) Len() uint64 {
	if !mr.ok() {
		return 0
	}
	if mr.mr.Fast() {
		_, n := mr.mr.Mapped()
		return n
	}
	return mr.mr.Len()
}

// Buf returns the registered memory.
func (mr *MR) Buf() []byte {
	if !mr.ok() {
		return nil
	}
	return mr.mr.Bytes()
}

// SGE returns an SGE for bytes [off, off+n) of the region. It does not
// check the range: the transport does when the SGE is used.
func (mr *MR) SGE(off, n int) ibv.SGE {
	return ibv.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
}
