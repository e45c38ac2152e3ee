package main

// #cgo CFLAGS: -I${SRCDIR}/../include
// #include "softnic_engine.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"unsafe"

	"github.com/softnic/softnic/clib/exec"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// device is the process's NIC: opened by the first context, closed with
// the last (every ibv_open_device of the process shares it, as contexts of
// one kernel device share the device).
type device struct {
	nic  *toolnic.NIC
	dev  *verbs.Device
	refs int // contexts open; guarded by devMu
	fd   int // the link's socket (linkFD), or -1: ibv_poll_cq never waits

	stop context.CancelFunc // ends the async event goroutine
	done chan struct{}      // closed when it has ended
}

var (
	devMu sync.Mutex
	dev   *device // guarded by devMu

	opts     exec.Options
	optsErr  error
	optsOnce sync.Once
)

// options reads the SOFTNIC_* environment once, at the first open.
func options() (exec.Options, error) {
	optsOnce.Do(func() { opts, optsErr = exec.FromEnv(os.Getenv) })
	return opts, optsErr
}

// debugf prints why a call failed when SOFTNIC_DEBUG=1.
func debugf(format string, args ...any) {
	if o, _ := options(); o.Debug {
		fmt.Fprintf(os.Stderr, "softnic: "+format+"\n", args...)
	}
}

// openDevice opens the process's NIC, or takes another reference on it.
func openDevice(name string) (*device, error) {
	devMu.Lock()
	defer devMu.Unlock()
	if dev != nil {
		dev.refs++
		return dev, nil
	}
	o, err := options()
	if err != nil {
		return nil, err
	}
	cfg := toolnic.Config{Addr: o.Addr, Port: o.Port, Name: name, BusyPoll: o.BusyPoll,
		PortMTU: ibv.MTUFromBytes(o.MTU), Pcap: o.PcapPath(), Metrics: o.Metrics, MetricsFile: o.MetricsFile,
		// The program's thread polls the link (NIC.Progress) and the
		// engine runs with at least two Ps (minProcs): a socket in Go's
		// netpoller would wake the other P's thread for every datagram.
		Unpolled: true}
	if !cfg.Addr.IsValid() {
		cfg.Addr = preferAddr // the address a CM program binds (sne_cm_prefer_addr)
	}
	var n *toolnic.NIC
	if cfg.Addr.IsValid() {
		n, err = toolnic.Open(cfg)
	} else {
		// The first loopback address whose port is free: two programs
		// on one host pair with no configuration, as the Go tools'
		// server and client take 127.0.0.1 and 127.0.0.2.
		for i := 1; i < 255; i++ {
			cfg.Addr = netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
			n, err = toolnic.Open(cfg)
			var inUse *toolnic.ErrAddrInUse
			if !errors.As(err, &inUse) {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	d := &device{nic: n, dev: n.Dev, refs: 1, fd: -1, stop: stop, done: make(chan struct{})}
	if o.PollWait {
		d.fd = linkFD(n.Dev.Link())
	}
	go d.asyncLoop(ctx)
	dev = d
	return d, nil
}

// release drops a context's reference; the last closes the NIC.
func (d *device) release() error {
	devMu.Lock()
	defer devMu.Unlock()
	d.refs--
	if d.refs > 0 {
		return nil
	}
	dev = nil
	d.stop()
	<-d.done
	return d.nic.Close()
}

// asyncLoop hands the device's asynchronous events to the contexts: a
// port event to every context of the device, an event about an object to
// the context that made it (ib_uverbs_async_handler).
func (d *device) asyncLoop(ctx context.Context) {
	defer close(d.done)
	for {
		evs, ready := d.dev.AsyncEvents()
		for _, ev := range evs {
			deliverAsync(d, ev)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return
		}
	}
}

// devCtx is one ibv_context: its objects are those made through it, its
// asynchronous events those about them and the port's.
type devCtx struct {
	d       *device
	asyncFD int // the eventfd signalled per queued event (the C library's)

	mu     sync.Mutex
	events []C.struct_sn_async_event // guarded by mu
}

var ctxs table[*devCtx]

// owner is the context and C object (cookie) of a verbs object that
// raises asynchronous events (QP, CQ, SRQ, WQ).
type owner struct {
	ctx    *devCtx
	cookie uint64
}

var (
	ownersMu sync.Mutex
	owners   = map[any]owner{} // guarded by ownersMu
)

func addOwner(obj any, c *devCtx, cookie uint64) {
	ownersMu.Lock()
	owners[obj] = owner{c, cookie}
	ownersMu.Unlock()
}

// dropOwner forgets obj and drops its events not yet taken, as the kernel
// drops a destroyed object's queued events.
func dropOwner(obj any) {
	ownersMu.Lock()
	o, ok := owners[obj]
	delete(owners, obj)
	ownersMu.Unlock()
	if !ok {
		return
	}
	o.ctx.mu.Lock()
	ev := o.ctx.events[:0]
	for _, e := range o.ctx.events {
		if uint64(e.cookie) != o.cookie {
			ev = append(ev, e)
		}
	}
	o.ctx.events = ev
	o.ctx.mu.Unlock()
}

func deliverAsync(d *device, ev ibv.AsyncEvent) {
	e := C.struct_sn_async_event{event_type: C.uint32_t(ev.Type), port_num: 1}
	ownersMu.Lock()
	defer ownersMu.Unlock()
	if ev.Other == nil {
		_, cs := ctxs.all(func(c *devCtx) bool { return c.d == d })
		for _, c := range cs {
			c.queue(e)
		}
		return
	}
	o, ok := owners[ev.Other]
	if !ok {
		return // destroyed meanwhile
	}
	e.cookie = C.uint64_t(o.cookie)
	o.ctx.queue(e)
}

// queue adds an event for ibv_get_async_event and signals the fd.
func (c *devCtx) queue(e C.struct_sn_async_event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	signalFD(c.asyncFD)
}

//export sne_abi_version
func sne_abi_version() C.int { return C.SN_ABI_VERSION }

//export sne_ctx_open
func sne_ctx_open(name *C.char, asyncFD C.int, h *C.sn_handle, info *C.struct_sn_dev_info) C.int {
	d, err := openDevice(C.GoString(name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "softnic: %v\n", err)
		return C.int(errnoOf(err, "open device"))
	}
	c := &devCtx{d: d, asyncFD: int(asyncFD)}
	*h = C.sn_handle(ctxs.add(c))
	gid := verbs.GIDFromAddr(d.dev.Addr())
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&info.gid[0])), 16), gid[:])
	if e, err := d.dev.QueryGIDEx(1, 0, 0); err == nil {
		info.ifindex = C.uint32_t(e.NdevIfindex)
	}
	info.link_fd = C.int32_t(d.fd)
	return 0
}

//export sne_ctx_close
func sne_ctx_close(h C.sn_handle) C.int {
	c, ok := ctxs.get(handle(h))
	if !ok {
		return einval
	}
	c.destroyAll()
	// Under ownersMu: a port event being delivered holds it, so once
	// the context is out of the table no event signals its fd, which the
	// C library closes when this returns.
	ownersMu.Lock()
	ctxs.del(handle(h))
	ownersMu.Unlock()
	if err := c.d.release(); err != nil {
		debugf("close device: %v", err)
	}
	return 0
}

//export sne_query_device
func sne_query_device(h C.sn_handle, a *C.struct_sn_device_attr) C.int {
	c, ok := ctxs.get(handle(h))
	if !ok {
		return einval
	}
	x := c.d.dev.QueryDeviceEx()
	fw := unsafe.Slice((*byte)(unsafe.Pointer(&a.fw_ver[0])), len(a.fw_ver))
	clear(fw)
	copy(fw[:len(fw)-1], x.FWVer)
	a.node_guid = C.uint64_t(x.NodeGUID)
	a.sys_image_guid = C.uint64_t(x.SysImageGUID)
	a.max_mr_size = C.uint64_t(x.MaxMRSize)
	a.page_size_cap = C.uint64_t(x.PageSizeCap)
	a.device_cap_flags = C.uint64_t(x.DeviceCapFlags)
	a.vendor_id = C.uint32_t(x.VendorID)
	a.vendor_part_id = C.uint32_t(x.VendorPartID)
	a.hw_ver = C.uint32_t(x.HWVer)
	a.max_qp = C.int32_t(x.MaxQP)
	a.max_qp_wr = C.int32_t(x.MaxQPWR)
	a.max_sge = C.int32_t(x.MaxSGE)
	a.max_sge_rd = C.int32_t(x.MaxSGERd)
	a.max_cq = C.int32_t(x.MaxCQ)
	a.max_cqe = C.int32_t(x.MaxCQE)
	a.max_mr = C.int32_t(x.MaxMR)
	a.max_pd = C.int32_t(x.MaxPD)
	a.max_qp_rd_atom = C.int32_t(x.MaxQPRdAtom)
	a.max_ee_rd_atom = C.int32_t(x.MaxEERdAtom)
	a.max_res_rd_atom = C.int32_t(x.MaxResRdAtom)
	a.max_qp_init_rd_atom = C.int32_t(x.MaxQPInitRdAtom)
	a.max_ee_init_rd_atom = C.int32_t(x.MaxEEInitRdAtom)
	a.atomic_cap = C.int32_t(x.AtomicCap)
	a.max_mw = C.int32_t(x.MaxMW)
	a.max_ah = C.int32_t(x.MaxAH)
	a.max_fmr = C.int32_t(x.MaxFMR)
	a.max_srq = C.int32_t(x.MaxSRQ)
	a.max_srq_wr = C.int32_t(x.MaxSRQWR)
	a.max_srq_sge = C.int32_t(x.MaxSRQSGE)
	a.max_pkeys = C.int32_t(x.MaxPKeys)
	a.max_mcast_grp = C.int32_t(x.MaxMcastGrp)
	a.max_mcast_qp_attach = C.int32_t(x.MaxMcastQPAttach)
	a.max_total_mcast_qp_attach = C.int32_t(x.MaxTotalMcastQPAttach)
	a.local_ca_ack_delay = C.uint8_t(x.LocalCAAckDelay)
	a.phys_port_cnt = C.uint8_t(x.PhysPortCnt)
	a.tm_max_rndv_hdr_size = C.uint32_t(x.TMCaps.MaxRndvHdrSize)
	a.tm_max_num_tags = C.uint32_t(x.TMCaps.MaxNumTags)
	a.tm_flags = C.uint32_t(x.TMCaps.Flags)
	a.tm_max_ops = C.uint32_t(x.TMCaps.MaxOps)
	a.tm_max_sge = C.uint32_t(x.TMCaps.MaxSGE)
	a.max_tso = C.uint32_t(x.TSOCaps.MaxTSO)
	a.tso_supported_qpts = C.uint32_t(x.TSOCaps.SupportedQPTs)
	a.odp_general_caps = C.uint64_t(x.ODPCaps.GeneralCaps)
	a.odp_rc_caps = C.uint32_t(x.ODPCaps.RCODPCaps)
	a.odp_uc_caps = C.uint32_t(x.ODPCaps.UCODPCaps)
	a.odp_ud_caps = C.uint32_t(x.ODPCaps.UDODPCaps)
	// XRC runs RC's transport over the same MRs, every one of them
	// on-demand (verbs' odp_caps): what RC may do with them, XRC may.
	a.odp_xrc_caps = a.odp_rc_caps
	a.max_wq_type_rq = C.uint32_t(x.MaxWQTypeRQ)
	a.completion_timestamp_mask = C.uint64_t(x.CompletionTimestampMask)
	a.hca_core_clock = C.uint64_t(x.HCACoreClock)
	a.max_cq_count = C.uint16_t(x.CQModCaps.MaxCQCount)
	a.max_cq_period = C.uint16_t(x.CQModCaps.MaxCQPeriod)
	return 0
}

//export sne_query_port
func sne_query_port(h C.sn_handle, port C.uint8_t, a *C.struct_sn_port_attr) C.int {
	c, ok := ctxs.get(handle(h))
	if !ok {
		return einval
	}
	p, err := c.d.dev.QueryPort(uint8(port))
	if err != nil {
		return fail(err, "query port")
	}
	a.state = C.uint32_t(p.State)
	a.max_mtu = C.uint32_t(p.MaxMTU)
	a.active_mtu = C.uint32_t(p.ActiveMTU)
	a.port_cap_flags = C.uint32_t(p.PortCapFlags)
	a.max_msg_sz = C.uint32_t(min(p.MaxMsgSz, 1<<32-1))
	a.pkey_tbl_len = C.uint16_t(p.PKeyTblLen)
	a.lid = C.uint16_t(p.LID)
	a.sm_lid = C.uint16_t(p.SMLID)
	a.lmc = C.uint8_t(p.LMC)
	a.max_vl_num = C.uint8_t(p.MaxVLNum)
	a.active_width = C.uint8_t(p.ActiveWidth)
	a.active_speed = C.uint8_t(p.ActiveSpeed)
	a.phys_state = C.uint8_t(p.PhysState)
	a.link_layer = C.uint8_t(p.LinkLayer)
	return 0
}

//export sne_get_async_event
func sne_get_async_event(h C.sn_handle, ev *C.struct_sn_async_event) C.int {
	c, ok := ctxs.get(handle(h))
	if !ok {
		return einval
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		return eagain
	}
	*ev = c.events[0]
	c.events = c.events[1:]
	return 0
}
