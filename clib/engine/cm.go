package main

// #include "softnic_engine.h"
import "C"

import (
	"context"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"golang.org/x/sys/unix"
)

// The RDMA connection manager of softnic's librdmacm.so.1
// (clib/librdmacm): the process's CM (package verbs/cm) over its NIC,
// with the channels and IDs of the C library in tables. The CM here is
// what the kernel's rdma_cm is to rdma-core's librdmacm: the C library
// does librdmacm's own part (the QP's states from sne_cm_init_qp_attr,
// the RTU through sne_cm_accept once a REP came, multicast attaches), so
// the CM's IDs never hold a QP.

// procCM is the process's CM, between sne_cm_open and sne_cm_close, and
// the device it holds open.
type procCM struct {
	c *cm.CM
	d *device
}

var (
	cmMu       sync.Mutex
	theCM      *procCM              // guarded by cmMu
	preferAddr netip.Addr           // sne_cm_prefer_addr's; guarded by devMu
	byID       = map[*cm.ID]*cmID{} // guarded by cmMu
)

// cmChan is an event channel: the CM's, and the eventfd the C library
// gave it, readable while an event waits.
type cmChan struct {
	ch       *cm.EventChannel
	efd      int
	signaled bool // the eventfd holds 1; guarded by the CM's lock (SetNotify)
}

// cmID is an ID: the CM's, the C library's struct (its cookie), and the
// events the channel has handed out about it and about each of its
// multicast joins (ucma.c's events_reported), which librdmacm waits to
// see acknowledged before it frees the ID or the join.
type cmID struct {
	id       *cm.ID
	cookie   uint64
	reported int32                  // guarded by cmMu
	joins    map[netip.Addr]*cmJoin // guarded by cmMu
	orphan   int                    // its orphan slot + 1, 0 for none (cm_orphan.go); guarded by cmMu
}

type cmJoin struct {
	cookie   uint64
	reported int32
}

var (
	cmChans table[*cmChan]
	cmIDs   table[*cmID]
)

// goAddr converts a socket address from C; family 0 is the zero AddrPort.
func goAddr(a *C.struct_sn_addr) (netip.AddrPort, bool) {
	if a == nil || a.family == 0 {
		return netip.AddrPort{}, true
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&a.addr[0])), 16)
	var ip netip.Addr
	switch a.family {
	case C.uint16_t(syscall.AF_INET):
		ip = netip.AddrFrom4([4]byte(b[:4]))
	case C.uint16_t(syscall.AF_INET6):
		ip = netip.AddrFrom16([16]byte(b)).Unmap()
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, uint16(a.port)), true
}

// putAddr converts a socket address to C: the zero AddrPort is family 0.
func putAddr(a *C.struct_sn_addr, ap netip.AddrPort) {
	*a = C.struct_sn_addr{}
	ip := ap.Addr()
	if !ip.IsValid() {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&a.addr[0])), 16)
	if ip.Is4() {
		a.family = C.uint16_t(syscall.AF_INET)
		v := ip.As4()
		copy(b, v[:])
	} else {
		a.family = C.uint16_t(syscall.AF_INET6)
		v := ip.As16()
		copy(b, v[:])
	}
	a.port = C.uint16_t(ap.Port())
}

func putGID(dst *C.uint8_t, ip netip.Addr) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), 16)
	clear(b)
	if ip.IsValid() {
		v := ip.As16()
		copy(b, v[:])
	}
}

//export sne_cm_prefer_addr
func sne_cm_prefer_addr(a *C.struct_sn_addr) C.int {
	ap, ok := goAddr(a)
	if !ok {
		return einval
	}
	devMu.Lock()
	preferAddr = ap.Addr()
	devMu.Unlock()
	return 0
}

//export sne_cm_open
func sne_cm_open() C.int {
	cmMu.Lock()
	defer cmMu.Unlock()
	if theCM != nil {
		return 0
	}
	devMu.Lock()
	d := dev
	if d != nil {
		d.refs++
	}
	devMu.Unlock()
	if d == nil {
		debugf("CM: no device open")
		return C.int(syscall.ENODEV)
	}
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{d.dev}})
	if err != nil {
		d.release()
		return fail(err, "start the CM")
	}
	theCM = &procCM{c: c, d: d}
	return 0
}

//export sne_cm_close
func sne_cm_close() C.int {
	cmMu.Lock()
	p := theCM
	theCM = nil
	clear(byID)
	orphans, orphanFree = nil, nil
	cmMu.Unlock()
	if p == nil {
		return 0
	}
	err := p.c.Close()
	if rerr := p.d.release(); err == nil {
		err = rerr
	}
	if err != nil {
		return fail(err, "close the CM")
	}
	return 0
}

// theCMNow returns the process's CM, nil when it is not open.
func theCMNow() *cm.CM {
	cmMu.Lock()
	defer cmMu.Unlock()
	if theCM == nil {
		return nil
	}
	return theCM.c
}

//export sne_cm_create_channel
func sne_cm_create_channel(efd C.int, h *C.sn_handle) C.int {
	c := theCMNow()
	if c == nil {
		return C.int(syscall.ENODEV)
	}
	o := &cmChan{ch: c.CreateEventChannel(), efd: int(efd)}
	// The eventfd holds 1 while an event waits, 0 otherwise: readable
	// exactly when rdma_get_cm_event would not block.
	o.ch.SetNotify(func(ready bool) {
		if ready == o.signaled {
			return
		}
		o.signaled = ready
		if ready {
			signalFD(o.efd)
		} else {
			var b [8]byte
			for {
				if _, err := unix.Read(o.efd, b[:]); err != unix.EINTR {
					break
				}
			}
		}
	})
	*h = C.sn_handle(cmChans.add(o))
	if *h == 0 {
		o.ch.SetNotify(nil)
		o.ch.Close()
		return enomem
	}
	return 0
}

//export sne_cm_destroy_channel
func sne_cm_destroy_channel(h C.sn_handle) C.int {
	o, ok := cmChans.get(handle(h))
	if !ok {
		return einval
	}
	err := o.ch.Close()
	// The C library closes the fd when this returns, whatever it
	// returns (rdma_destroy_event_channel cannot fail): no event may
	// signal it after, even on a channel that keeps IDs (EBUSY), whose
	// events then go unread.
	o.ch.SetNotify(nil)
	cmChans.del(handle(h))
	if err != nil {
		return fail(err, "destroy event channel")
	}
	return 0
}

// done is a context already cancelled: GetEvent with it does not wait.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

//export sne_cm_get_event
func sne_cm_get_event(h C.sn_handle, newCookie C.uint64_t, out *C.struct_sn_cm_event) C.int {
	o, ok := cmChans.get(handle(h))
	if !ok {
		return einval
	}
	cmMu.Lock()
	defer cmMu.Unlock()
	for {
		ev, err := o.ch.GetEvent(done)
		if err != nil {
			if err == context.Canceled {
				return eagain
			}
			return fail(err, "get CM event")
		}
		ok := putEvent(ev, uint64(newCookie), out)
		ev.Ack()
		if ok {
			return 0
		}
	}
}

// putEvent converts ev for the C library and counts it as handed out
// (ucma.c ucma_get_event); false for an event of an ID the C library no
// longer has. cmMu held.
func putEvent(ev *cm.Event, newCookie uint64, out *C.struct_sn_cm_event) bool {
	*out = C.struct_sn_cm_event{}
	switch ev.Type {
	case cm.EventConnectRequest:
		l := byID[ev.ListenID]
		if l == nil {
			ev.ID.Destroy()
			return false
		}
		child := &cmID{id: ev.ID, cookie: newCookie}
		hc := cmIDs.add(child)
		if hc == 0 {
			ev.ID.Destroy()
			return false
		}
		byID[ev.ID] = child
		l.reported++
		out.cookie = C.uint64_t(l.cookie)
		out.id = C.sn_handle(hc)
	case cm.EventMulticastJoin, cm.EventMulticastError:
		e := byID[ev.ID]
		if e == nil {
			return false
		}
		e.reported++
		mc, _ := ev.McastContext.(uint64)
		for _, j := range e.joins {
			if j.cookie == mc {
				j.reported++
			}
		}
		out.cookie = C.uint64_t(e.cookie)
		out.mc_cookie = C.uint64_t(mc)
	default:
		e := byID[ev.ID]
		if e == nil {
			return false
		}
		e.reported++
		out.cookie = C.uint64_t(e.cookie)
		switch ev.Type {
		case cm.EventEstablished:
			keepOrphan(e)
		case cm.EventDisconnected, cm.EventRejected, cm.EventConnectError, cm.EventUnreachable:
			dropOrphan(e)
		}
	}
	out.event = C.uint32_t(ev.Type)
	out.status = C.int32_t(ev.Status)
	if ev.Err != nil {
		debugf("%v, status %d: %v", ev.Type, ev.Status, ev.Err)
	}
	p := ev.Conn
	out.responder_resources = C.uint8_t(p.ResponderResources)
	out.initiator_depth = C.uint8_t(p.InitiatorDepth)
	out.flow_control = C.uint8_t(p.FlowControl)
	out.retry_count = C.uint8_t(p.RetryCount)
	out.rnr_retry_count = C.uint8_t(p.RNRRetryCount)
	out.srq = b2c(p.SRQ)
	out.qp_num = C.uint32_t(p.QPNum)
	data := p.PrivateData
	if ev.UD.AHAttr.IsGlobal || ev.UD.QPNum != 0 || ev.UD.PrivateData != nil {
		out.qp_num = C.uint32_t(ev.UD.QPNum)
		out.qkey = C.uint32_t(ev.UD.QKey)
		putAHAttr(&out.ah_attr, &ev.UD.AHAttr)
		if data == nil {
			data = ev.UD.PrivateData
		}
	}
	n := min(len(data), C.SN_CM_MAX_PRIVATE_DATA, 255)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out.private_data[0])), n), data)
	out.private_data_len = C.uint8_t(n)
	return true
}

//export sne_cm_create_id
func sne_cm_create_id(ch C.sn_handle, cookie C.uint64_t, ps, qpType C.uint32_t, h *C.sn_handle) C.int {
	o, ok := cmChans.get(handle(ch))
	if !ok {
		return einval
	}
	c := theCMNow()
	if c == nil {
		return C.int(syscall.ENODEV)
	}
	id, err := c.CreateID(o.ch, nil, cm.PortSpace(ps), ibv.QPType(qpType))
	if err != nil {
		return fail(err, "create ID")
	}
	e := &cmID{id: id, cookie: uint64(cookie)}
	hid := cmIDs.add(e)
	if hid == 0 {
		id.Destroy()
		return enomem
	}
	cmMu.Lock()
	byID[id] = e
	cmMu.Unlock()
	*h = C.sn_handle(hid)
	return 0
}

//export sne_cm_destroy_id
func sne_cm_destroy_id(h C.sn_handle, reported *C.int32_t) C.int {
	e, ok := cmIDs.get(handle(h))
	if !ok {
		return einval
	}
	cmMu.Lock()
	defer cmMu.Unlock()
	// The CM drops the ID's events not handed out; those handed out are
	// acknowledged already (sne_cm_get_event), so this does not wait.
	err := e.id.Destroy()
	dropOrphan(e)
	delete(byID, e.id)
	cmIDs.del(handle(h))
	*reported = C.int32_t(e.reported)
	if err != nil {
		return fail(err, "destroy ID")
	}
	return 0
}

//export sne_cm_migrate_id
func sne_cm_migrate_id(h, ch C.sn_handle, reported *C.int32_t) C.int {
	e, ok := cmIDs.get(handle(h))
	if !ok {
		return einval
	}
	o, ok := cmChans.get(handle(ch))
	if !ok {
		return einval
	}
	cmMu.Lock()
	defer cmMu.Unlock()
	if err := e.id.Migrate(o.ch); err != nil {
		return fail(err, "migrate ID")
	}
	*reported = C.int32_t(e.reported)
	return 0
}

// getID returns the ID of handle h.
func getID(h C.sn_handle) (*cm.ID, bool) {
	e, ok := cmIDs.get(handle(h))
	if !ok {
		return nil, false
	}
	return e.id, true
}

// onID runs f on the ID h names, as the entry points that only pass
// their arguments on do: EINVAL for a handle that names no ID, f's error
// as fail reports it (what names the call), 0 on success.
func onID(h C.sn_handle, what string, f func(*cm.ID) error) C.int {
	id, ok := getID(h)
	if !ok {
		return einval
	}
	if err := f(id); err != nil {
		return fail(err, what)
	}
	return 0
}

//export sne_cm_bind
func sne_cm_bind(h C.sn_handle, a *C.struct_sn_addr) C.int {
	ap, ok := goAddr(a)
	if !ok {
		return einval
	}
	return onID(h, "bind", func(id *cm.ID) error { return id.BindAddr(ap) })
}

//export sne_cm_resolve_addr
func sne_cm_resolve_addr(h C.sn_handle, src, dst *C.struct_sn_addr, timeoutMS C.int32_t) C.int {
	s, sok := goAddr(src)
	d, dok := goAddr(dst)
	if !sok || !dok {
		return einval
	}
	return onID(h, "resolve address", func(id *cm.ID) error {
		return id.ResolveAddr(s, d, time.Duration(timeoutMS)*time.Millisecond)
	})
}

//export sne_cm_resolve_route
func sne_cm_resolve_route(h C.sn_handle, timeoutMS C.int32_t) C.int {
	return onID(h, "resolve route", func(id *cm.ID) error { return id.ResolveRoute(time.Duration(timeoutMS) * time.Millisecond) })
}

//export sne_cm_query_route
func sne_cm_query_route(h C.sn_handle, r *C.struct_sn_cm_route) C.int {
	id, ok := getID(h)
	if !ok {
		return einval
	}
	*r = C.struct_sn_cm_route{}
	src, dst := id.LocalAddr(), id.PeerAddr()
	putAddr(&r.src, src)
	putAddr(&r.dst, dst)
	if src.Addr().IsValid() && !src.Addr().IsUnspecified() {
		putGID(&r.sgid[0], src.Addr())
	}
	if dst.Addr().IsValid() {
		putGID(&r.dgid[0], dst.Addr())
	}
	r.bound = b2c(id.Device() != nil)
	r.pkey = 0xffff
	if rt := id.Route(); rt.Resolved {
		r.resolved = 1
		putGID(&r.sgid[0], rt.SGID)
		putGID(&r.dgid[0], rt.DGID)
		r.hop_limit = C.uint8_t(rt.HopLimit)
		r.traffic_class = C.uint8_t(rt.TrafficClass)
		r.sl = C.uint8_t(rt.SL)
		r.mtu = C.uint8_t(rt.MTU)
		r.packet_life_time = C.uint8_t(rt.PacketLifeTime)
		r.pkey = C.uint16_t(rt.PKey)
		r.flow_label = C.uint32_t(rt.FlowLabel)
	}
	return 0
}

//export sne_cm_init_qp_attr
func sne_cm_init_qp_attr(h C.sn_handle, state C.uint32_t, a *C.struct_sn_qp_attr, mask *C.uint32_t) C.int {
	id, ok := getID(h)
	if !ok {
		return einval
	}
	q, m, err := id.InitQPAttr(ibv.QPState(state))
	if err != nil {
		return fail(err, "CM QP attributes")
	}
	*a = C.struct_sn_qp_attr{}
	putQPAttr(a, &q)
	*mask = C.uint32_t(m)
	return 0
}

// connParam converts a struct rdma_conn_param from C.
func connParam(p *C.struct_sn_conn_param) *cm.ConnParam {
	if p == nil {
		return nil
	}
	var data []byte
	if p.private_data != nil && p.private_data_len > 0 {
		data = C.GoBytes(p.private_data, C.int(p.private_data_len))
	}
	return &cm.ConnParam{PrivateData: data, ResponderResources: uint8(p.responder_resources),
		InitiatorDepth: uint8(p.initiator_depth), FlowControl: uint8(p.flow_control),
		RetryCount: uint8(p.retry_count), RNRRetryCount: uint8(p.rnr_retry_count), SRQ: p.srq != 0,
		QPNum: uint32(p.qp_num)}
}

//export sne_cm_connect
func sne_cm_connect(h C.sn_handle, p *C.struct_sn_conn_param) C.int {
	return onID(h, "connect", func(id *cm.ID) error { return id.Connect(connParam(p)) })
}

//export sne_cm_listen
func sne_cm_listen(h C.sn_handle, backlog C.int32_t) C.int {
	return onID(h, "listen", func(id *cm.ID) error { return id.Listen(int(backlog)) })
}

//export sne_cm_accept
func sne_cm_accept(h C.sn_handle, p *C.struct_sn_conn_param) C.int {
	e, ok := cmIDs.get(handle(h))
	if !ok {
		return einval
	}
	if err := e.id.Accept(connParam(p)); err != nil {
		return fail(err, "accept")
	}
	if p == nil {
		// The active side's RTU: established without an event of the
		// CM's (the C library reports it).
		cmMu.Lock()
		keepOrphan(e)
		cmMu.Unlock()
	}
	return 0
}

//export sne_cm_reject
func sne_cm_reject(h C.sn_handle, data unsafe.Pointer, n, reason C.uint8_t) C.int {
	var b []byte
	if data != nil && n > 0 {
		b = C.GoBytes(data, C.int(n))
	}
	return onID(h, "reject", func(id *cm.ID) error { return id.Reject(b) })
}

// IBV_EVENT_COMM_EST, the one event rdma_notify passes on here
// (cm.c ib_cm_notify; path migration is not done).
const ibvEventCommEst = 9

//export sne_cm_notify
func sne_cm_notify(h C.sn_handle, event C.uint32_t) C.int {
	if event != ibvEventCommEst {
		return einval
	}
	return onID(h, "notify", func(id *cm.ID) error { return id.Establish() })
}

//export sne_cm_disconnect
func sne_cm_disconnect(h C.sn_handle) C.int {
	return onID(h, "disconnect", func(id *cm.ID) error { return id.Disconnect() })
}

//export sne_cm_join
func sne_cm_join(h C.sn_handle, a *C.struct_sn_addr, mc C.uint64_t, flags C.uint32_t) C.int {
	e, ok := cmIDs.get(handle(h))
	ap, aok := goAddr(a)
	if !ok || !aok {
		return einval
	}
	cmMu.Lock()
	defer cmMu.Unlock()
	addr := ap.Addr()
	if err := e.id.JoinMulticast(addr, uint64(mc)); err != nil {
		return fail(err, "join multicast")
	}
	if e.joins == nil {
		e.joins = map[netip.Addr]*cmJoin{}
	}
	e.joins[addr] = &cmJoin{cookie: uint64(mc)}
	return 0
}

//export sne_cm_leave
func sne_cm_leave(h C.sn_handle, a *C.struct_sn_addr, reported *C.int32_t) C.int {
	e, ok := cmIDs.get(handle(h))
	ap, aok := goAddr(a)
	if !ok || !aok {
		return einval
	}
	cmMu.Lock()
	defer cmMu.Unlock()
	addr := ap.Addr()
	if err := e.id.LeaveMulticast(addr); err != nil {
		return fail(err, "leave multicast")
	}
	if j := e.joins[addr]; j != nil {
		*reported = C.int32_t(j.reported)
		delete(e.joins, addr)
	}
	return 0
}

// rdma_set_option's levels and names (rdma_cma.h).
const (
	optionLevelID    = 0 // RDMA_OPTION_ID
	optionTOS        = 0 // uint8_t
	optionReuseAddr  = 1 // int
	optionAFOnly     = 2 // int
	optionAckTimeout = 3 // uint8_t
)

//export sne_cm_set_option
func sne_cm_set_option(h C.sn_handle, level, name C.int32_t, val unsafe.Pointer, n C.uint64_t) C.int {
	id, ok := getID(h)
	if !ok || val == nil {
		return einval
	}
	if level != optionLevelID {
		// RDMA_OPTION_IB_PATH: a path from ibacm, which RoCE over
		// softnic has no use for (ucma.c answers unknown ones ENOSYS).
		return C.int(syscall.ENOSYS)
	}
	b := unsafe.Slice((*byte)(val), int(n))
	var err error
	switch name {
	case optionTOS, optionAckTimeout:
		if n != 1 {
			return einval
		}
		if name == optionTOS {
			err = id.SetTOS(b[0])
		} else {
			err = id.SetAckTimeout(b[0])
		}
	case optionReuseAddr, optionAFOnly:
		if n != C.uint64_t(unsafe.Sizeof(C.int(0))) {
			return einval
		}
		on := *(*C.int)(val) != 0
		if name == optionReuseAddr {
			err = id.SetReuseAddr(on)
		} else {
			err = id.SetAFOnly(on)
		}
	default:
		return C.int(syscall.ENOSYS)
	}
	if err != nil {
		return fail(err, "set option")
	}
	return 0
}
