package main

// #include "softnic_engine.h"
import "C"

import (
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

type srqObj struct {
	ctx *devCtx
	srq *verbs.SRQ

	mu   sync.Mutex // the post scratch
	recv recvScratch
	ops  []ibv.OpsWR
}

type wqObj struct {
	ctx *devCtx
	wq  *verbs.WQ

	mu   sync.Mutex // the post scratch
	recv recvScratch
}

var (
	srqs table[*srqObj]
	wqs  table[*wqObj]
)

//export sne_create_srq
func sne_create_srq(ctx C.sn_handle, in *C.struct_sn_srq_init, h *C.sn_handle, a *C.struct_sn_srq_attr, num *C.uint32_t) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	p, ok := pds.get(handle(in.pd))
	if !ok {
		return einval
	}
	attr := verbs.SRQInitAttrEx{
		SRQInitAttr: verbs.SRQInitAttr{MaxWR: uint32(in.max_wr), MaxSGE: uint32(in.max_sge), SRQLimit: uint32(in.srq_limit)},
		Type:        ibv.SRQType(in.srq_type),
		TM:          ibv.TMCap{MaxNumTags: uint32(in.max_num_tags), MaxOps: uint32(in.max_ops)},
	}
	if in.cq != 0 {
		o, ok := cqs.get(handle(in.cq))
		if !ok {
			return einval
		}
		attr.CQ = o.cq
	}
	if in.xrcd != 0 {
		x, ok := xrcds.get(handle(in.xrcd))
		if !ok {
			return einval
		}
		attr.XRCD = x.xrcd
	}
	s, err := p.pd.CreateSRQEx(attr)
	if err != nil {
		return fail(err, "create SRQ")
	}
	addOwner(s, c, uint64(in.cookie))
	*h = C.sn_handle(srqs.add(&srqObj{ctx: c, srq: s}))
	q, _ := s.Query()
	a.max_wr, a.max_sge, a.srq_limit = C.uint32_t(q.MaxWR), C.uint32_t(q.MaxSGE), C.uint32_t(q.SRQLimit)
	if n, err := s.Num(); err == nil {
		*num = C.uint32_t(n)
	}
	return 0
}

//export sne_modify_srq
func sne_modify_srq(h C.sn_handle, a *C.struct_sn_srq_attr, mask C.uint32_t) C.int {
	s, ok := srqs.get(handle(h))
	if !ok {
		return einval
	}
	attr := ibv.SRQAttr{MaxWR: uint32(a.max_wr), MaxSGE: uint32(a.max_sge), SRQLimit: uint32(a.srq_limit)}
	if err := s.srq.Modify(&attr, ibv.SRQAttrMask(mask)); err != nil {
		return fail(err, "modify SRQ")
	}
	return 0
}

//export sne_query_srq
func sne_query_srq(h C.sn_handle, a *C.struct_sn_srq_attr) C.int {
	s, ok := srqs.get(handle(h))
	if !ok {
		return einval
	}
	q, err := s.srq.Query()
	if err != nil {
		return fail(err, "query SRQ")
	}
	a.max_wr, a.max_sge, a.srq_limit = C.uint32_t(q.MaxWR), C.uint32_t(q.MaxSGE), C.uint32_t(q.SRQLimit)
	return 0
}

//export sne_destroy_srq
func sne_destroy_srq(h C.sn_handle) C.int {
	s, ok := srqs.get(handle(h))
	if !ok {
		return einval
	}
	if err := s.srq.Destroy(); err != nil {
		return fail(err, "destroy SRQ")
	}
	dropOwner(s.srq)
	srqs.del(handle(h))
	return 0
}

//export sne_post_srq_recv
func sne_post_srq_recv(h C.sn_handle, wr *C.struct_sn_recv_wr, bad **C.struct_sn_recv_wr) C.int {
	s, ok := srqs.get(handle(h))
	if !ok {
		*bad = wr
		return einval
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recv.post(wr, bad, "post SRQ recv", s.srq.PostRecv)
}

//export sne_post_srq_ops
func sne_post_srq_ops(h C.sn_handle, op *C.struct_sn_ops_wr, bad **C.struct_sn_ops_wr) C.int {
	s, ok := srqs.get(handle(h))
	if !ok {
		*bad = op
		return einval
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = s.ops[:0]
	var ptrs []*C.struct_sn_ops_wr
	for c := op; c != nil; c = c.next {
		s.ops = append(s.ops, ibv.OpsWR{
			WRID: uint64(c.wr_id), Opcode: ibv.OpsOpcode(c.opcode), Flags: ibv.OpsFlags(c.flags),
			UnexpectedCnt: uint32(c.unexpected_cnt), Handle: uint32(c.handle),
			RecvWRID: uint64(c.recv_wr_id), SGList: sges(c.sg_list, c.num_sge), Tag: uint64(c.tag), Mask: uint64(c.mask),
		})
		ptrs = append(ptrs, c)
	}
	n, err := s.srq.PostOps(s.ops)
	for i := range n {
		if s.ops[i].Opcode == ibv.WRTagAdd {
			ptrs[i].handle = C.uint32_t(s.ops[i].Handle)
		}
	}
	clear(s.ops)
	if err != nil {
		*bad = badWR(ptrs, n, op)
		return fail(err, "post SRQ ops")
	}
	return 0
}

//export sne_create_wq
func sne_create_wq(ctx C.sn_handle, in *C.struct_sn_wq_init, h *C.sn_handle, num, maxWR, maxSGE *C.uint32_t) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	p, ok := pds.get(handle(in.pd))
	if !ok {
		return einval
	}
	cq, ok := cqs.get(handle(in.cq))
	if !ok {
		return einval
	}
	w, err := c.d.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQType(in.wq_type), MaxWR: uint32(in.max_wr),
		MaxSGE: uint32(in.max_sge), PD: p.pd, CQ: cq.cq, CreateFlags: uint32(in.create_flags)})
	if err != nil {
		return fail(err, "create WQ")
	}
	addOwner(w, c, uint64(in.cookie))
	*h = C.sn_handle(wqs.add(&wqObj{ctx: c, wq: w}))
	*num = C.uint32_t(w.Num())
	*maxWR, *maxSGE = in.max_wr, in.max_sge
	return 0
}

//export sne_modify_wq
func sne_modify_wq(h C.sn_handle, a *C.struct_sn_wq_attr, state *C.uint32_t) C.int {
	w, ok := wqs.get(handle(h))
	if !ok {
		return einval
	}
	attr := ibv.WQAttr{State: ibv.WQState(a.wq_state), CurrState: ibv.WQState(a.curr_wq_state),
		Flags: uint32(a.flags), FlagsMask: uint32(a.flags_mask)}
	if err := w.wq.Modify(&attr, ibv.WQAttrMask(a.attr_mask)); err != nil {
		return fail(err, "modify WQ")
	}
	*state = C.uint32_t(w.wq.State())
	return 0
}

//export sne_destroy_wq
func sne_destroy_wq(h C.sn_handle) C.int {
	w, ok := wqs.get(handle(h))
	if !ok {
		return einval
	}
	if err := w.wq.Destroy(); err != nil {
		return fail(err, "destroy WQ")
	}
	dropOwner(w.wq)
	wqs.del(handle(h))
	return 0
}

//export sne_post_wq_recv
func sne_post_wq_recv(h C.sn_handle, wr *C.struct_sn_recv_wr, bad **C.struct_sn_recv_wr) C.int {
	w, ok := wqs.get(handle(h))
	if !ok {
		*bad = wr
		return einval
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recv.post(wr, bad, "post WQ recv", w.wq.PostRecv)
}
