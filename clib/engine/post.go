package main

// #include "softnic_engine.h"
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The posts read the program's work requests where they lie: a scatter
// list becomes a []ibv.SGE over the program's struct ibv_sge array (the
// same layout) and inline data a []byte over its buffer, which the engine
// copies before the post returns, as ibv_post_send(3) lets the program
// reuse both at once.

// sges returns a C scatter list as a slice over it.
func sges(p *C.struct_sn_sge, n C.int32_t) []ibv.SGE {
	if n <= 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*ibv.SGE)(unsafe.Pointer(p)), int(n))
}

// ptrAt returns address a of the program (an SGE's address, or a pointer
// in a union of struct ibv_send_wr) as a pointer.
func ptrAt(a uint64) unsafe.Pointer { return unsafe.Add(nil, uintptr(a)) }

// bytesAt returns n bytes at address a of the program.
func bytesAt(a uint64, n int) []byte {
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(ptrAt(a)), n)
}

// ahHandle, mwHandle and mrHandle read the handle the engine gave a C object (an ibv_ah, ibv_mw
// or ibv_mr a work request points to) from its struct.
func ahHandle(p uint64) handle {
	if p == 0 {
		return 0
	}
	return handle((*C.struct_sn_ah_head)(ptrAt(p)).handle)
}

func mwHandle(p uint64) handle {
	if p == 0 {
		return 0
	}
	return handle((*C.struct_sn_mw_head)(ptrAt(p)).handle)
}

func mrHandle(p uint64) handle {
	if p == 0 {
		return 0
	}
	return handle((*C.struct_sn_mr_head)(ptrAt(p)).handle)
}

// sendWR converts one C send work request into w, or returns EINVAL for
// one naming an AH, MW or MR the engine does not know.
func (q *qpObj) sendWR(c *C.struct_sn_send_wr, w *ibv.SendWR) syscall.Errno {
	*w = ibv.SendWR{WRID: uint64(c.wr_id), Opcode: ibv.WROpcode(c.opcode), Flags: ibv.SendFlags(c.send_flags),
		SGList: sges(c.sg_list, c.num_sge)}
	switch w.Opcode {
	case ibv.WRSendWithImm, ibv.WRRDMAWriteWithImm:
		w.Imm = bswap32(uint32(c.imm))
	case ibv.WRSendWithInv, ibv.WRLocalInv:
		w.InvRKey = uint32(c.imm)
	case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		w.RemoteAddr, w.CompareAdd, w.Swap, w.RKey = uint64(c.w0), uint64(c.w1), uint64(c.w2), uint32(c.w3)
	case ibv.WRBindMW:
		mw, ok := mws.get(mwHandle(uint64(c.b0)))
		if !ok {
			return syscall.EINVAL
		}
		info := verbs.MWBindInfo{Addr: uint64(c.b3), Length: uint64(c.b4), Access: ibv.Access(c.b5)}
		if c.b2 != 0 {
			mr, ok := mrs.get(mrHandle(uint64(c.b2)))
			if !ok {
				return syscall.EINVAL
			}
			info.MR = mr.mr
		}
		*w = verbs.BindMWWR(w.WRID, w.Flags, mw.mw, uint32(c.b1), info)
		return 0
	case ibv.WRTSO:
		w.TSOHeader = bytesAt(uint64(c.b0), int(uint16(c.b1)))
		w.MSS = uint16(c.b1 >> 16)
	}
	switch q.typ {
	case ibv.QPTypeUD:
		ah, ok := ahs.get(ahHandle(uint64(c.w0)))
		if !ok {
			return syscall.EINVAL
		}
		w.AH, w.RemoteQPN, w.RemoteQKey = ah.ah, uint32(c.w1), uint32(c.w1>>32)
	case ibv.QPTypeXRCSend:
		w.RemoteSRQN = uint32(c.remote_srqn)
		fallthrough
	default:
		if w.Opcode != ibv.WRAtomicCmpAndSwp && w.Opcode != ibv.WRAtomicFetchAndAdd {
			w.RemoteAddr, w.RKey = uint64(c.w0), uint32(c.w1)
		}
	}
	if w.Flags&ibv.SendInline != 0 {
		// The engine takes inline data from InlineData: an lkey need not
		// name an MR, as on hardware, which copies the bytes at post.
		switch len(w.SGList) {
		case 0:
			w.InlineData = []byte{}
		case 1:
			w.InlineData = bytesAt(w.SGList[0].Addr, int(w.SGList[0].Length))
		default:
			start := len(q.inline)
			for _, s := range w.SGList {
				q.inline = append(q.inline, bytesAt(s.Addr, int(s.Length))...)
			}
			w.InlineData = q.inline[start:]
		}
	}
	return 0
}

//export sne_post_send
func sne_post_send(h C.sn_handle, wr *C.struct_sn_send_wr, bad **C.struct_sn_send_wr) C.int {
	q, ok := qps.get(handle(h))
	if !ok {
		*bad = wr
		return einval
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wrs, q.bad, q.inline = q.wrs[:0], q.bad[:0], q.inline[:0]
	var cerr syscall.Errno
	for c := wr; c != nil; c = c.next {
		q.wrs = append(q.wrs, ibv.SendWR{})
		q.bad = append(q.bad, c)
		if cerr = q.sendWR(c, &q.wrs[len(q.wrs)-1]); cerr != 0 {
			q.wrs = q.wrs[:len(q.wrs)-1]
			break
		}
	}
	n, err := q.qp.PostSend(q.wrs...)
	clear(q.wrs)
	if err != nil {
		*bad = badWR(q.bad, n, wr)
		return fail(err, "post send")
	}
	if cerr != 0 {
		*bad = badWR(q.bad, n, wr)
		debugf("post send: WR %d names an AH, MW or MR softnic does not know", n)
		return C.int(cerr)
	}
	return 0
}

// sne_post_send_all posts the n work requests an ibv_wr_start batch built
// through verbs' QPEx, which posts all or none. The C library records
// them as struct ibv_send_wr with each inline payload and TSO header
// copied when it was set, and ibv_wr_atomic_write's 8 bytes in b0.
//
//export sne_post_send_all
func sne_post_send_all(h C.sn_handle, wrs *C.struct_sn_send_wr, n C.int32_t) C.int {
	q, ok := qps.get(handle(h))
	if !ok {
		return einval
	}
	x, err := q.qp.Ex()
	if err != nil {
		return fail(err, "wr_complete")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	x.WrStart()
	for _, c := range unsafe.Slice(wrs, int(n)) {
		if cerr := q.build(x, &c); cerr != 0 {
			x.WrAbort()
			return C.int(cerr)
		}
	}
	if err := x.WrComplete(); err != nil {
		return fail(err, "wr_complete")
	}
	return 0
}

// build replays one recorded WR on x: its builder, then its setters.
func (q *qpObj) build(x *verbs.QPEx, c *C.struct_sn_send_wr) syscall.Errno {
	x.WRID = uint64(c.wr_id)
	flags := ibv.SendFlags(c.send_flags)
	x.WRFlags = flags &^ ibv.SendInline
	rkey, addr := uint32(c.w1), uint64(c.w0)
	switch op := ibv.WROpcode(c.opcode); op {
	case ibv.WRSend:
		x.WrSend()
	case ibv.WRSendWithImm:
		x.WrSendImm(bswap32(uint32(c.imm)))
	case ibv.WRSendWithInv:
		x.WrSendInv(uint32(c.imm))
	case ibv.WRRDMAWrite:
		x.WrRDMAWrite(rkey, addr)
	case ibv.WRRDMAWriteWithImm:
		x.WrRDMAWriteImm(rkey, addr, bswap32(uint32(c.imm)))
	case ibv.WRRDMARead:
		x.WrRDMARead(rkey, addr)
	case ibv.WRAtomicCmpAndSwp:
		x.WrAtomicCmpSwp(uint32(c.w3), addr, uint64(c.w1), uint64(c.w2))
	case ibv.WRAtomicFetchAndAdd:
		x.WrAtomicFetchAdd(uint32(c.w3), addr, uint64(c.w1))
	case ibv.WRLocalInv:
		x.WrLocalInv(uint32(c.imm))
	case ibv.WRBindMW:
		mw, ok := mws.get(mwHandle(uint64(c.b0)))
		if !ok {
			return syscall.EINVAL
		}
		info := verbs.MWBindInfo{Addr: uint64(c.b3), Length: uint64(c.b4), Access: ibv.Access(c.b5)}
		if c.b2 != 0 {
			mr, ok := mrs.get(mrHandle(uint64(c.b2)))
			if !ok {
				return syscall.EINVAL
			}
			info.MR = mr.mr
		}
		x.WrBindMW(mw.mw, uint32(c.b1), info)
		return 0
	case ibv.WRTSO:
		x.WrSendTSO(bytesAt(uint64(c.b0), int(uint16(c.b1))), uint16(c.b1>>16))
	case ibv.WRAtomicWrite:
		x.WrAtomicWrite(rkey, addr, *(*[8]byte)(unsafe.Pointer(&c.b0)))
		return 0
	default:
		return syscall.EOPNOTSUPP
	}
	switch q.typ {
	case ibv.QPTypeUD:
		ah, ok := ahs.get(ahHandle(uint64(c.w0)))
		if !ok {
			return syscall.EINVAL
		}
		x.WrSetUDAddr(ah.ah, uint32(c.w1), uint32(c.w1>>32))
	case ibv.QPTypeXRCSend:
		x.WrSetXRCSRQN(uint32(c.remote_srqn))
	}
	sg := sges(c.sg_list, c.num_sge)
	if flags&ibv.SendInline != 0 {
		data := make([][]byte, 0, len(sg))
		for _, s := range sg {
			data = append(data, bytesAt(s.Addr, int(s.Length)))
		}
		x.WrSetInlineDataList(data)
	} else if len(sg) > 0 {
		x.WrSetSGEList(sg)
	}
	return 0
}

//export sne_post_recv
func sne_post_recv(h C.sn_handle, wr *C.struct_sn_recv_wr, bad **C.struct_sn_recv_wr) C.int {
	q, ok := qps.get(handle(h))
	if !ok {
		*bad = wr
		return einval
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.recv.post(wr, bad, "post recv", q.qp.PostRecv)
}

// recvScratch is a receive queue's reusable conversion of a C chain of
// receive work requests (a QP's, an SRQ's, a WQ's), guarded by its
// owner's mu: programs may post from several threads.
type recvScratch struct {
	wrs []ibv.RecvWR
	bad []*C.struct_sn_recv_wr // the C work request of each of wrs
}

// post converts the chain wr and posts it with post; when post refuses
// the WR at index n, *bad is its C work request (badWR), as
// ibv_post_recv(3) says.
func (r *recvScratch) post(wr *C.struct_sn_recv_wr, bad **C.struct_sn_recv_wr, what string,
	post func(...ibv.RecvWR) (int, error)) C.int {
	r.wrs, r.bad = recvWRs(r.wrs[:0], r.bad[:0], wr)
	n, err := post(r.wrs...)
	clear(r.wrs)
	if err != nil {
		*bad = badWR(r.bad, n, wr)
		return fail(err, what)
	}
	return 0
}

// badWR is the C work request a post's error points at: the n-th of the
// chain whose work requests are ptrs, or its first when a refusal comes
// before any (an empty chain, a QP already gone), so that no index out
// of range ends the host program.
func badWR[T any](ptrs []*T, n int, first *T) *T {
	if n >= 0 && n < len(ptrs) {
		return ptrs[n]
	}
	return first
}

// recvWRs appends a chain of C receive work requests to wrs, and each's
// C pointer to ptrs.
func recvWRs(wrs []ibv.RecvWR, ptrs []*C.struct_sn_recv_wr, wr *C.struct_sn_recv_wr) ([]ibv.RecvWR, []*C.struct_sn_recv_wr) {
	for c := wr; c != nil; c = c.next {
		wrs = append(wrs, ibv.RecvWR{WRID: uint64(c.wr_id), SGList: sges(c.sg_list, c.num_sge)})
		ptrs = append(ptrs, c)
	}
	return wrs, ptrs
}
