package main

// #include "softnic_engine.h"
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/softnic/softnic/ibv"
)

// recvStage is a QP's receive stage (struct sn_rstage, verbs.RecvStage):
// the C library's ibv_post_recv writes receives into it without calling
// the engine, and the QP's receive queue pulls them from here. The
// queue's lock serializes the calls; lock serializes them with the
// library's posts, from any of the program's threads.
type recvStage struct {
	st  *C.struct_sn_rstage
	ent []C.struct_sn_stage_ent // the ring, cap entries
	sge []ibv.SGE               // Pull's copies of the staged SGEs
}

func newRecvStage(st *C.struct_sn_rstage) *recvStage {
	c := int(st.cap)
	ents := unsafe.Slice((*C.struct_sn_stage_ent)(unsafe.Add(unsafe.Pointer(st), unsafe.Sizeof(*st))), c)
	return &recvStage{st: st, ent: ents, sge: make([]ibv.SGE, c*C.SN_STAGE_SGE)}
}

func (s *recvStage) lockWord() *uint32 { return (*uint32)(unsafe.Pointer(&s.st.lock)) }

// lock takes the stage's lock, which the library holds only while it
// copies a WR in.
func (s *recvStage) lock() {
	for !atomic.CompareAndSwapUint32(s.lockWord(), 0, 1) {
		runtime.Gosched()
	}
}

func (s *recvStage) unlock() { atomic.StoreUint32(s.lockWord(), 0) }

// Pull implements verbs.RecvStage.
func (s *recvStage) Pull(buf []ibv.RecvWR, close bool) []ibv.RecvWR {
	s.lock()
	head, tail := uint64(s.st.head), uint64(s.st.tail)
	// The library stages no more than the ring holds (Reserve's count);
	// k stops at the ring's size whatever its memory says.
	for k := 0; head < tail && k < len(s.ent); head, k = head+1, k+1 {
		e := &s.ent[head%uint64(len(s.ent))]
		n := min(int(e.num_sge), C.SN_STAGE_SGE)
		sg := s.sge[k*C.SN_STAGE_SGE : k*C.SN_STAGE_SGE+n]
		copy(sg, unsafe.Slice((*ibv.SGE)(unsafe.Pointer(&e.sge[0])), n))
		buf = append(buf, ibv.RecvWR{WRID: uint64(e.wr_id), SGList: sg})
	}
	s.st.head = C.uint64_t(head)
	if close {
		s.st.open = 0
	}
	s.unlock()
	return buf
}

// Reopen implements verbs.RecvStage.
func (s *recvStage) Reopen() {
	s.lock()
	s.st.open = 1
	s.unlock()
}

// Removed implements verbs.RecvStage.
func (s *recvStage) Removed() {
	atomic.AddUint64((*uint64)(unsafe.Pointer(&s.st.removed)), 1)
}

// Reserve implements verbs.RecvStage.
func (s *recvStage) Reserve() bool {
	s.lock()
	defer s.unlock()
	p := (*uint64)(unsafe.Pointer(&s.st.posted))
	if *p-atomic.LoadUint64((*uint64)(unsafe.Pointer(&s.st.removed))) >= uint64(s.st.cap) {
		return false
	}
	atomic.StoreUint64(p, *p+1)
	return true
}

//export sne_qp_stage
func sne_qp_stage(h C.sn_handle, st *C.struct_sn_rstage) C.int {
	q, ok := qps.get(handle(h))
	if !ok || st == nil {
		return einval
	}
	attr, _ := q.qp.Query()
	if st.cap == 0 || uint32(st.cap) != attr.Cap.MaxRecvWR || uint32(st.max_sge) != attr.Cap.MaxRecvSGE {
		debugf("receive stage: cap %d, max_sge %d; the queue's %d, %d", st.cap, st.max_sge,
			attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE)
		return einval
	}
	if err := q.qp.StageRecvs(newRecvStage(st)); err != nil {
		return fail(err, "receive stage")
	}
	return 0
}
