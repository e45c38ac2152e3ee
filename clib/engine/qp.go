package main

// #include "softnic_engine.h"
import "C"

import (
	"sync"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// qpObj is a QP with the scratch its posts convert work requests into.
type qpObj struct {
	ctx    *devCtx
	qp     *verbs.QP
	typ    ibv.QPType
	cookie uint64 // the struct ibv_qp *

	// mu guards the scratch: programs may post to one QP from several
	// threads.
	mu     sync.Mutex
	wrs    []ibv.SendWR
	bad    []*C.struct_sn_send_wr // the C work request of each of wrs
	recv   recvScratch
	inline []byte
}

var qps table[*qpObj]

// sgeSize is sizeof(struct ib_sge), the unit of rxe's send WQE.
const sgeSize = 16

//export sne_create_qp
func sne_create_qp(ctx C.sn_handle, in *C.struct_sn_qp_init, h *C.sn_handle, qpn *C.uint32_t, cp *C.struct_sn_qp_cap) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	attr := verbs.QPInitAttr{
		Type:         ibv.QPType(in.qp_type),
		Cap:          qpCap(&in.cap),
		SigAll:       in.sq_sig_all != 0,
		SendOpsFlags: verbs.SendOpsFlags(in.send_ops_flags),
		MaxTSOHeader: int(in.max_tso_header),
	}
	// rxe_qp.c rxe_qp_init_req: a send WQE holds max_send_sge SGEs or
	// max_inline_data bytes, whichever is larger, and the QP inlines as
	// many bytes as its WQE holds; programs count on it (rdma_xclient
	// inlines 16 bytes on a QP that asked for one SGE and no inline data).
	attr.Cap.MaxInlineData = max(attr.Cap.MaxInlineData, attr.Cap.MaxSendSGE*sgeSize)
	for _, x := range []struct {
		h   C.sn_handle
		dst **verbs.CQ
	}{{in.send_cq, &attr.SendCQ}, {in.recv_cq, &attr.RecvCQ}} {
		if x.h == 0 {
			continue
		}
		o, ok := cqs.get(handle(x.h))
		if !ok {
			return einval
		}
		*x.dst = o.cq
	}
	if in.srq != 0 {
		s, ok := srqs.get(handle(in.srq))
		if !ok {
			return einval
		}
		attr.SRQ = s.srq
	}
	if in.wq != 0 {
		w, ok := wqs.get(handle(in.wq))
		if !ok {
			return einval
		}
		attr.WQ = w.wq
	}
	var qp *verbs.QP
	var err error
	if attr.Type == ibv.QPTypeXRCRecv {
		x, ok := xrcds.get(handle(in.xrcd))
		if !ok {
			return einval
		}
		// uverbs_cmd.c create_qp: an XRC_TGT QP takes its XRC domain
		// only; the CQs and SRQ a program passes are not looked at
		// (librdmacm's rdma_create_qp passes the ID's CQs).
		attr.SendCQ, attr.RecvCQ, attr.SRQ = nil, nil, nil
		qp, err = x.xrcd.CreateQP(attr)
	} else {
		p, ok := pds.get(handle(in.pd))
		if !ok {
			return einval
		}
		qp, err = p.pd.CreateQP(attr)
	}
	if err != nil {
		return fail(err, "create QP")
	}
	o := &qpObj{ctx: c, qp: qp, typ: attr.Type, cookie: uint64(in.cookie)}
	addOwner(qp, c, o.cookie)
	*h = C.sn_handle(qps.add(o))
	*qpn = C.uint32_t(qp.QPN())
	_, got := qp.Query()
	putQPCap(cp, &got.Cap)
	return 0
}

//export sne_open_qp
func sne_open_qp(xh C.sn_handle, qpn C.uint32_t, cookie C.uint64_t, h *C.sn_handle) C.int {
	x, ok := xrcds.get(handle(xh))
	if !ok {
		return einval
	}
	qp, err := x.xrcd.OpenQP(uint32(qpn))
	if err != nil {
		return fail(err, "open QP")
	}
	o := &qpObj{ctx: x.ctx, qp: qp, typ: ibv.QPTypeXRCRecv, cookie: uint64(cookie)}
	addOwner(qp, x.ctx, o.cookie)
	*h = C.sn_handle(qps.add(o))
	return 0
}

//export sne_destroy_qp
func sne_destroy_qp(h C.sn_handle) C.int {
	o, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	if err := o.qp.Destroy(); err != nil {
		return fail(err, "destroy QP")
	}
	dropOwner(o.qp)
	qps.del(handle(h))
	return 0
}

//export sne_modify_qp
func sne_modify_qp(h C.sn_handle, a *C.struct_sn_qp_attr, mask C.uint32_t) C.int {
	o, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	attr := ibv.QPAttr{
		State: ibv.QPState(a.qp_state), CurState: ibv.QPState(a.cur_qp_state),
		PathMTU: ibv.MTU(a.path_mtu), PathMigState: uint8(a.path_mig_state),
		QKey: uint32(a.qkey), RQPSN: uint32(a.rq_psn), SQPSN: uint32(a.sq_psn),
		DestQPN: uint32(a.dest_qp_num), AccessFlags: ibv.Access(a.qp_access_flags),
		Cap: qpCap(&a.cap), AHAttr: ahAttr(&a.ah_attr), AltAHAttr: ahAttr(&a.alt_ah_attr),
		PKeyIndex: uint16(a.pkey_index), AltPKeyIndex: uint16(a.alt_pkey_index),
		EnSQDAsyncNotify: a.en_sqd_async_notify != 0, MaxRdAtomic: uint8(a.max_rd_atomic),
		MaxDestRdAtomic: uint8(a.max_dest_rd_atomic), MinRNRTimer: uint8(a.min_rnr_timer),
		PortNum: uint8(a.port_num), Timeout: uint8(a.timeout), RetryCnt: uint8(a.retry_cnt),
		RNRRetry: uint8(a.rnr_retry), AltPortNum: uint8(a.alt_port_num), AltTimeout: uint8(a.alt_timeout),
		RateLimit: uint32(a.rate_limit),
	}
	if err := o.qp.Modify(&attr, ibv.AttrMask(mask)); err != nil {
		return fail(err, "modify QP")
	}
	return 0
}

//export sne_query_qp
func sne_query_qp(h C.sn_handle, a *C.struct_sn_qp_attr, in *C.struct_sn_qp_init) C.int {
	o, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	q, init := o.qp.Query()
	putQPAttr(a, &q)
	in.qp_type = C.uint32_t(init.Type)
	in.sq_sig_all = C.uint32_t(b2c(init.SigAll))
	in.send_ops_flags = C.uint64_t(init.SendOpsFlags)
	in.max_tso_header = C.uint32_t(init.MaxTSOHeader)
	putQPCap(&in.cap, &init.Cap)
	return 0
}

// putQPAttr converts QP attributes to C.
func putQPAttr(a *C.struct_sn_qp_attr, q *ibv.QPAttr) {
	a.qp_state = C.uint32_t(q.State)
	a.cur_qp_state = C.uint32_t(q.CurState)
	a.path_mtu = C.uint32_t(q.PathMTU)
	a.path_mig_state = C.uint32_t(q.PathMigState)
	a.qkey = C.uint32_t(q.QKey)
	a.rq_psn = C.uint32_t(q.RQPSN)
	a.sq_psn = C.uint32_t(q.SQPSN)
	a.dest_qp_num = C.uint32_t(q.DestQPN)
	a.qp_access_flags = C.uint32_t(q.AccessFlags)
	a.rate_limit = C.uint32_t(q.RateLimit)
	putQPCap(&a.cap, &q.Cap)
	putAHAttr(&a.ah_attr, &q.AHAttr)
	putAHAttr(&a.alt_ah_attr, &q.AltAHAttr)
	a.pkey_index = C.uint16_t(q.PKeyIndex)
	a.alt_pkey_index = C.uint16_t(q.AltPKeyIndex)
	a.en_sqd_async_notify = b2c(q.EnSQDAsyncNotify)
	a.sq_draining = b2c(q.SQDraining)
	a.max_rd_atomic = C.uint8_t(q.MaxRdAtomic)
	a.max_dest_rd_atomic = C.uint8_t(q.MaxDestRdAtomic)
	a.min_rnr_timer = C.uint8_t(q.MinRNRTimer)
	a.port_num = C.uint8_t(q.PortNum)
	a.timeout = C.uint8_t(q.Timeout)
	a.retry_cnt = C.uint8_t(q.RetryCnt)
	a.rnr_retry = C.uint8_t(q.RNRRetry)
	a.alt_port_num = C.uint8_t(q.AltPortNum)
	a.alt_timeout = C.uint8_t(q.AltTimeout)
}

//export sne_attach_mcast
func sne_attach_mcast(h C.sn_handle, gid *C.uint8_t) C.int {
	o, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	if err := o.qp.AttachMcast(verbs.GID(unsafe.Slice((*byte)(gid), 16)), 0); err != nil {
		return fail(err, "attach mcast")
	}
	return 0
}

//export sne_detach_mcast
func sne_detach_mcast(h C.sn_handle, gid *C.uint8_t) C.int {
	o, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	if err := o.qp.DetachMcast(verbs.GID(unsafe.Slice((*byte)(gid), 16)), 0); err != nil {
		return fail(err, "detach mcast")
	}
	return 0
}

func qpCap(c *C.struct_sn_qp_cap) ibv.QPCap {
	return ibv.QPCap{MaxSendWR: uint32(c.max_send_wr), MaxRecvWR: uint32(c.max_recv_wr),
		MaxSendSGE: uint32(c.max_send_sge), MaxRecvSGE: uint32(c.max_recv_sge), MaxInlineData: uint32(c.max_inline_data)}
}

func putQPCap(c *C.struct_sn_qp_cap, v *ibv.QPCap) {
	c.max_send_wr = C.uint32_t(v.MaxSendWR)
	c.max_recv_wr = C.uint32_t(v.MaxRecvWR)
	c.max_send_sge = C.uint32_t(v.MaxSendSGE)
	c.max_recv_sge = C.uint32_t(v.MaxRecvSGE)
	c.max_inline_data = C.uint32_t(v.MaxInlineData)
}

func b2c(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}
