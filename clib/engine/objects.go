package main

// #include "softnic_engine.h"
import "C"

import (
	"net/netip"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The tables of the engine's objects, one per kind. Every object knows
// the context that made it, for ibv_close_device's cleanup.
type (
	pdObj struct {
		ctx    *devCtx
		pd     *verbs.PD
		parent bool // a parent domain
	}
	mrObj struct {
		ctx *devCtx
		mr  *verbs.MR
	}
	mwObj struct {
		ctx *devCtx
		mw  *verbs.MW
	}
	ahObj struct {
		ctx *devCtx
		ah  *verbs.AH
	}
	xrcdObj struct {
		ctx  *devCtx
		xrcd *verbs.XRCD
	}
	tdObj struct {
		ctx *devCtx
		td  *verbs.TD
	}
)

var (
	pds   table[*pdObj]
	mrs   table[*mrObj]
	mws   table[*mwObj]
	ahs   table[*ahObj]
	xrcds table[*xrcdObj]
	tds   table[*tdObj]
)

// destroyAll destroys what the context still holds, users before what
// they use, as the kernel cleans up a closed uverbs file
// (ib_uverbs_cleanup_ufile).
func (c *devCtx) destroyAll() {
	mine := func(o *devCtx) bool { return o == c }
	hs, _ := qps.all(func(q *qpObj) bool { return mine(q.ctx) })
	for _, h := range hs {
		sne_destroy_qp(C.sn_handle(h))
	}
	hs, _ = ahs.all(func(a *ahObj) bool { return mine(a.ctx) })
	for _, h := range hs {
		sne_destroy_ah(C.sn_handle(h))
	}
	hs, _ = mws.all(func(m *mwObj) bool { return mine(m.ctx) })
	for _, h := range hs {
		sne_dealloc_mw(C.sn_handle(h))
	}
	hs, _ = srqs.all(func(s *srqObj) bool { return mine(s.ctx) })
	for _, h := range hs {
		sne_destroy_srq(C.sn_handle(h))
	}
	hs, _ = wqs.all(func(w *wqObj) bool { return mine(w.ctx) })
	for _, h := range hs {
		sne_destroy_wq(C.sn_handle(h))
	}
	hs, _ = mrs.all(func(m *mrObj) bool { return mine(m.ctx) })
	for _, h := range hs {
		sne_dereg_mr(C.sn_handle(h))
	}
	hs, _ = cqs.all(func(q *cqObj) bool { return mine(q.ctx) })
	for _, h := range hs {
		sne_destroy_cq(C.sn_handle(h))
	}
	hs, _ = channels.all(func(ch *channelObj) bool { return mine(ch.ctx) })
	for _, h := range hs {
		sne_destroy_channel(C.sn_handle(h))
	}
	hs, _ = xrcds.all(func(x *xrcdObj) bool { return mine(x.ctx) })
	for _, h := range hs {
		sne_close_xrcd(C.sn_handle(h))
	}
	// Parent domains before the PDs and TDs they hold.
	hs, _ = pds.all(func(p *pdObj) bool { return mine(p.ctx) && p.parent })
	for _, h := range hs {
		sne_dealloc_pd(C.sn_handle(h))
	}
	hs, _ = pds.all(func(p *pdObj) bool { return mine(p.ctx) })
	for _, h := range hs {
		sne_dealloc_pd(C.sn_handle(h))
	}
	hs, _ = tds.all(func(t *tdObj) bool { return mine(t.ctx) })
	for _, h := range hs {
		sne_dealloc_td(C.sn_handle(h))
	}
}

//export sne_alloc_pd
func sne_alloc_pd(ctx C.sn_handle, h *C.sn_handle) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	pd, err := c.d.dev.AllocPD()
	if err != nil {
		return fail(err, "alloc PD")
	}
	*h = C.sn_handle(pds.add(&pdObj{ctx: c, pd: pd}))
	return 0
}

//export sne_dealloc_pd
func sne_dealloc_pd(h C.sn_handle) C.int {
	p, ok := pds.get(handle(h))
	if !ok {
		return einval
	}
	if err := p.pd.Dealloc(); err != nil {
		return fail(err, "dealloc PD")
	}
	pds.del(handle(h))
	return 0
}

//export sne_alloc_td
func sne_alloc_td(ctx C.sn_handle, h *C.sn_handle) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	td, err := c.d.dev.AllocTD()
	if err != nil {
		return fail(err, "alloc TD")
	}
	*h = C.sn_handle(tds.add(&tdObj{ctx: c, td: td}))
	return 0
}

//export sne_dealloc_td
func sne_dealloc_td(h C.sn_handle) C.int {
	t, ok := tds.get(handle(h))
	if !ok {
		return einval
	}
	if err := t.td.Dealloc(); err != nil {
		return fail(err, "dealloc TD")
	}
	tds.del(handle(h))
	return 0
}

// sne_alloc_parent_domain allocates a parent domain, which the C library
// and the engine treat as a PD: its handle is in the PD table, so every
// call that takes a PD takes it.
//
//export sne_alloc_parent_domain
func sne_alloc_parent_domain(ctx, pd, td C.sn_handle, h *C.sn_handle) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	var attr verbs.ParentDomainInitAttr
	if pd != 0 {
		p, ok := pds.get(handle(pd))
		if !ok {
			return einval
		}
		attr.PD = p.pd
	}
	if td != 0 {
		t, ok := tds.get(handle(td))
		if !ok {
			return einval
		}
		attr.TD = t.td
	}
	par, err := c.d.dev.AllocParentDomain(attr)
	if err != nil {
		return fail(err, "alloc parent domain")
	}
	*h = C.sn_handle(pds.add(&pdObj{ctx: c, pd: par, parent: true}))
	return 0
}

//export sne_query_pkey
func sne_query_pkey(ctx C.sn_handle, port C.uint8_t, index C.int32_t, pkey *C.uint16_t) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	k, err := c.d.dev.QueryPKey(uint8(port), int(index))
	if err != nil {
		return fail(err, "query P_Key")
	}
	*pkey = C.uint16_t(k)
	return 0
}

//export sne_query_rt_values
func sne_query_rt_values(ctx C.sn_handle, ns *C.uint64_t) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	v := ibv.ValuesEx{CompMask: ibv.ValuesMaskRawClock}
	if err := c.d.dev.QueryRTValuesEx(&v); err != nil {
		return fail(err, "query real-time values")
	}
	*ns = C.uint64_t(v.RawClock.Sec*1e9 + v.RawClock.Nsec)
	return 0
}

//export sne_reg_mr
func sne_reg_mr(pd C.sn_handle, addr unsafe.Pointer, length, iova C.uint64_t, access C.uint32_t, h *C.sn_handle, lkey *C.uint32_t) C.int {
	p, ok := pds.get(handle(pd))
	if !ok {
		return einval
	}
	// The program's memory, which the engine reads and writes in place
	// (a registered region is the application's own buffer).
	var buf []byte
	if length > 0 {
		buf = unsafe.Slice((*byte)(addr), int(length))
	}
	var mr *verbs.MR
	var err error
	if uint64(iova) == uint64(uintptr(addr)) {
		mr, err = p.pd.RegMR(buf, ibv.Access(access))
	} else {
		mr, err = p.pd.RegMRIOVA(buf, uint64(iova), ibv.Access(access))
	}
	if err != nil {
		return fail(err, "reg MR")
	}
	*h = C.sn_handle(mrs.add(&mrObj{ctx: p.ctx, mr: mr}))
	*lkey = C.uint32_t(mr.LKey())
	return 0
}

//export sne_dereg_mr
func sne_dereg_mr(h C.sn_handle) C.int {
	m, ok := mrs.get(handle(h))
	if !ok {
		return einval
	}
	if err := m.mr.Dereg(); err != nil {
		return fail(err, "dereg MR")
	}
	mrs.del(handle(h))
	return 0
}

//export sne_rereg_mr
func sne_rereg_mr(h C.sn_handle, flags C.uint32_t, pd C.sn_handle, addr unsafe.Pointer, length C.uint64_t, access C.uint32_t) C.int {
	m, ok := mrs.get(handle(h))
	if !ok {
		return einval
	}
	f := ibv.ReregMRFlags(flags)
	var p *verbs.PD
	if f&ibv.ReregMRChangePD != 0 {
		o, ok := pds.get(handle(pd))
		if !ok {
			return einval
		}
		p = o.pd
	}
	var buf []byte
	if f&ibv.ReregMRChangeTranslation != 0 && length > 0 && addr != nil {
		buf = unsafe.Slice((*byte)(addr), int(length))
	}
	if err := m.mr.Rereg(f, p, buf, ibv.Access(access)); err != nil {
		return fail(err, "rereg MR")
	}
	return 0
}

//export sne_advise_mr
func sne_advise_mr(pd C.sn_handle, advice, flags C.uint32_t, sg *C.struct_sn_sge, n C.uint32_t) C.int {
	p, ok := pds.get(handle(pd))
	if !ok {
		return einval
	}
	if err := p.pd.AdviseMR(ibv.AdviseMRAdvice(advice), uint32(flags), sges(sg, C.int32_t(n))); err != nil {
		return fail(err, "advise MR")
	}
	return 0
}

//export sne_alloc_mw
func sne_alloc_mw(pd C.sn_handle, typ C.uint32_t, h *C.sn_handle, rkey *C.uint32_t) C.int {
	p, ok := pds.get(handle(pd))
	if !ok {
		return einval
	}
	mw, err := p.pd.AllocMW(verbs.MWType(typ))
	if err != nil {
		return fail(err, "alloc MW")
	}
	*h = C.sn_handle(mws.add(&mwObj{ctx: p.ctx, mw: mw}))
	*rkey = C.uint32_t(mw.RKey())
	return 0
}

//export sne_dealloc_mw
func sne_dealloc_mw(h C.sn_handle) C.int {
	m, ok := mws.get(handle(h))
	if !ok {
		return einval
	}
	if err := m.mw.Dealloc(); err != nil {
		return fail(err, "dealloc MW")
	}
	mws.del(handle(h))
	return 0
}

//export sne_bind_mw
func sne_bind_mw(qp, mw C.sn_handle, b *C.struct_sn_mw_bind, rkey *C.uint32_t) C.int {
	q, ok := qps.get(handle(qp))
	if !ok {
		return einval
	}
	m, ok := mws.get(handle(mw))
	if !ok {
		return einval
	}
	info := verbs.MWBindInfo{Addr: uint64(b.addr), Length: uint64(b.length), Access: ibv.Access(b.access)}
	if b.mr != 0 {
		r, ok := mrs.get(handle(b.mr))
		if !ok {
			return einval
		}
		info.MR = r.mr
	}
	k, err := q.qp.BindMW(m.mw, verbs.MWBind{WRID: uint64(b.wr_id), SendFlags: ibv.SendFlags(b.send_flags), BindInfo: info})
	if err != nil {
		return fail(err, "bind MW")
	}
	*rkey = C.uint32_t(k)
	return 0
}

// ahAttr converts an address vector from C.
func ahAttr(a *C.struct_sn_ah_attr) ibv.AHAttr {
	return ibv.AHAttr{
		GRH: ibv.GlobalRoute{
			DGID:         netip.AddrFrom16(*(*[16]byte)(unsafe.Pointer(&a.dgid[0]))),
			FlowLabel:    uint32(a.flow_label),
			SGIDIndex:    uint8(a.sgid_index),
			HopLimit:     uint8(a.hop_limit),
			TrafficClass: uint8(a.traffic_class),
		},
		DLID: uint16(a.dlid), SL: uint8(a.sl), SrcPathBits: uint8(a.src_path_bits),
		StaticRate: uint8(a.static_rate), IsGlobal: a.is_global != 0, PortNum: uint8(a.port_num),
	}
}

// putAHAttr converts an address vector to C.
func putAHAttr(a *C.struct_sn_ah_attr, v *ibv.AHAttr) {
	g := v.GRH.DGID.As16()
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&a.dgid[0])), 16), g[:])
	a.flow_label = C.uint32_t(v.GRH.FlowLabel)
	a.sgid_index = C.uint8_t(v.GRH.SGIDIndex)
	a.hop_limit = C.uint8_t(v.GRH.HopLimit)
	a.traffic_class = C.uint8_t(v.GRH.TrafficClass)
	a.dlid = C.uint16_t(v.DLID)
	a.sl = C.uint8_t(v.SL)
	a.src_path_bits = C.uint8_t(v.SrcPathBits)
	a.static_rate = C.uint8_t(v.StaticRate)
	a.is_global = 0
	if v.IsGlobal {
		a.is_global = 1
	}
	a.port_num = C.uint8_t(v.PortNum)
}

//export sne_create_ah
func sne_create_ah(pd C.sn_handle, a *C.struct_sn_ah_attr, h *C.sn_handle) C.int {
	p, ok := pds.get(handle(pd))
	if !ok {
		return einval
	}
	ah, err := p.pd.CreateAH(ahAttr(a))
	if err != nil {
		return fail(err, "create AH")
	}
	*h = C.sn_handle(ahs.add(&ahObj{ctx: p.ctx, ah: ah}))
	return 0
}

//export sne_destroy_ah
func sne_destroy_ah(h C.sn_handle) C.int {
	a, ok := ahs.get(handle(h))
	if !ok {
		return einval
	}
	if err := a.ah.Destroy(); err != nil {
		return fail(err, "destroy AH")
	}
	ahs.del(handle(h))
	return 0
}

//export sne_open_xrcd
func sne_open_xrcd(ctx C.sn_handle, key *C.char, h *C.sn_handle) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	x, err := c.d.dev.OpenXRCD(C.GoString(key))
	if err != nil {
		return fail(err, "open XRCD")
	}
	*h = C.sn_handle(xrcds.add(&xrcdObj{ctx: c, xrcd: x}))
	return 0
}

//export sne_close_xrcd
func sne_close_xrcd(h C.sn_handle) C.int {
	x, ok := xrcds.get(handle(h))
	if !ok {
		return einval
	}
	if err := x.xrcd.Close(); err != nil {
		return fail(err, "close XRCD")
	}
	xrcds.del(handle(h))
	return 0
}
