package main

// #include "softnic_engine.h"
import "C"

import (
	"context"
	"sync"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// cqObj is a CQ: its completion events go to its channel's queue as its
// C object (cookie). An extended CQ (ibv_create_cq_ex) is a verbs.CQEx,
// read through it so that its completions carry their timestamps.
type cqObj struct {
	ctx    *devCtx
	cq     *verbs.CQ
	ch     *channelObj // or nil
	cookie uint64      // the struct ibv_cq *

	x   *verbs.CQEx // or nil
	xmu sync.Mutex  // one poll of x at a time (its StartPoll..EndPoll)
}

// channelObj is a completion channel. Its goroutine waits for the
// channel's events, acknowledges them to verbs at once (the C library
// counts the program's acknowledgements itself, as libibverbs does) and
// queues them for ibv_get_cq_event, signalling the C library's eventfd
// once per event.
type channelObj struct {
	ctx *devCtx
	ch  *verbs.CompChannel
	efd int

	// mu orders taking an event (and acknowledging it) before a CQ of
	// the channel is destroyed: a CQ destroyed with an event taken and
	// not yet acknowledged would be refused (EBUSY).
	mu     sync.Mutex
	events []chanEvent // guarded by mu

	stop context.CancelFunc
	done chan struct{}
}

type chanEvent struct {
	cq     *verbs.CQ
	cookie uint64
}

var (
	cqs      table[*cqObj]
	channels table[*channelObj]

	cqsByVerbs sync.Map // *verbs.CQ -> *cqObj, for the channel's events
)

func (ch *channelObj) loop(ctx context.Context) {
	defer close(ch.done)
	for {
		select {
		case <-ch.ch.Ready():
		case <-ctx.Done():
			return
		}
		// One event a wake-up: the channel signals Ready again while
		// more are queued, so a take never finds the queue empty (and
		// never busy-polls the link, on a device with BusyPoll, with the
		// lock held).
		ch.mu.Lock()
		if cq, err := ch.ch.GetEventTimeout(ctx, 0); err == nil {
			_ = cq.AckEvents(1)
			if o, ok := cqsByVerbs.Load(cq); ok {
				ch.events = append(ch.events, chanEvent{cq, o.(*cqObj).cookie})
				signalFD(ch.efd)
			}
		}
		ch.mu.Unlock()
	}
}

//export sne_create_channel
func sne_create_channel(ctx C.sn_handle, efd C.int, h *C.sn_handle) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	cx, stop := context.WithCancel(context.Background())
	ch := &channelObj{ctx: c, ch: c.d.dev.CreateCompChannel(), efd: int(efd), stop: stop, done: make(chan struct{})}
	go ch.loop(cx)
	*h = C.sn_handle(channels.add(ch))
	return 0
}

//export sne_destroy_channel
func sne_destroy_channel(h C.sn_handle) C.int {
	ch, ok := channels.get(handle(h))
	if !ok {
		return einval
	}
	if err := ch.ch.Close(); err != nil {
		return fail(err, "destroy completion channel")
	}
	ch.stop()
	<-ch.done
	channels.del(handle(h))
	return 0
}

//export sne_get_cq_event
func sne_get_cq_event(h C.sn_handle, cookie *C.uint64_t) C.int {
	ch, ok := channels.get(handle(h))
	if !ok {
		return einval
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.events) == 0 {
		return eagain
	}
	*cookie = C.uint64_t(ch.events[0].cookie)
	ch.events = ch.events[1:]
	return 0
}

//export sne_create_cq
func sne_create_cq(ctx C.sn_handle, in *C.struct_sn_cq_init, h *C.sn_handle, cp *C.int32_t) C.int {
	c, ok := ctxs.get(handle(ctx))
	if !ok {
		return einval
	}
	var ch *channelObj
	var vch *verbs.CompChannel
	if in.channel != 0 {
		if ch, ok = channels.get(handle(in.channel)); !ok {
			return einval
		}
		vch = ch.ch
	}
	o := &cqObj{ctx: c, ch: ch, cookie: uint64(in.cookie)}
	if in.wc_flags == 0 && in.flags == 0 && in.parent_domain == 0 && in.comp_vector == 0 {
		cq, err := c.d.dev.CreateCQ(int(in.cqe), vch)
		if err != nil {
			return fail(err, "create CQ")
		}
		o.cq = cq
	} else {
		attr := verbs.CQInitAttrEx{CQE: int(in.cqe), Channel: vch, CompVector: uint32(in.comp_vector),
			WCFlags: ibv.CreateCQWCFlags(in.wc_flags), Flags: uint32(in.flags)}
		if in.parent_domain != 0 {
			p, ok := pds.get(handle(in.parent_domain))
			if !ok {
				return einval
			}
			attr.ParentDomain = p.pd
		}
		x, err := c.d.dev.CreateCQEx(attr)
		if err != nil {
			return fail(err, "create CQ")
		}
		o.cq, o.x = x.CQ, x
	}
	cqsByVerbs.Store(o.cq, o)
	addOwner(o.cq, c, o.cookie)
	*h = C.sn_handle(cqs.add(o))
	*cp = C.int32_t(o.cq.Cap())
	return 0
}

//export sne_modify_cq
func sne_modify_cq(h C.sn_handle, mask C.uint32_t, count, period C.uint16_t) C.int {
	o, ok := cqs.get(handle(h))
	if !ok {
		return einval
	}
	attr := ibv.ModifyCQAttr{AttrMask: ibv.CQAttrMask(mask),
		Moderate: ibv.ModerateCQ{CQCount: uint16(count), CQPeriod: uint16(period)}}
	if err := o.cq.Modify(&attr); err != nil {
		return fail(err, "modify CQ")
	}
	return 0
}

//export sne_destroy_cq
func sne_destroy_cq(h C.sn_handle) C.int {
	o, ok := cqs.get(handle(h))
	if !ok {
		return einval
	}
	if o.ch != nil {
		o.ch.mu.Lock()
		defer o.ch.mu.Unlock()
	}
	if err := o.cq.Destroy(); err != nil {
		return fail(err, "destroy CQ")
	}
	if o.ch != nil {
		ev := o.ch.events[:0]
		for _, e := range o.ch.events {
			if e.cq != o.cq {
				ev = append(ev, e)
			}
		}
		o.ch.events = ev
	}
	cqsByVerbs.Delete(o.cq)
	dropOwner(o.cq)
	cqs.del(handle(h))
	return 0
}

//export sne_resize_cq
func sne_resize_cq(h C.sn_handle, cqe C.int32_t, cp *C.int32_t) C.int {
	o, ok := cqs.get(handle(h))
	if !ok {
		return einval
	}
	if err := o.cq.Resize(int(cqe)); err != nil {
		return fail(err, "resize CQ")
	}
	*cp = C.int32_t(o.cq.Cap())
	return 0
}

//export sne_req_notify_cq
func sne_req_notify_cq(h C.sn_handle, solicited C.int32_t) C.int {
	o, ok := cqs.get(handle(h))
	if !ok {
		return einval
	}
	if err := o.cq.ReqNotify(solicited != 0); err != nil {
		return fail(err, "req notify CQ")
	}
	return 0
}

// pollBatch is how many completions one verbs poll takes at most: the
// array lives on the stack, so a poll does not allocate.
const pollBatch = 32

//export sne_poll_cq
func sne_poll_cq(h C.sn_handle, n C.int32_t, out unsafe.Pointer, stride C.int32_t) C.int {
	o, ok := cqs.get(handle(h))
	if !ok || n <= 0 {
		return 0
	}
	ex := uintptr(stride) >= unsafe.Sizeof(C.struct_sn_wc_ex{})
	if ex && o.x != nil {
		return o.pollEx(int(n), out, int(stride))
	}
	var buf [pollBatch]ibv.WorkCompletion
	done := 0
	for done < int(n) {
		want := min(int(n)-done, pollBatch)
		k := o.cq.Poll(buf[:want])
		for i := range k {
			p := unsafe.Add(out, (done+i)*int(stride))
			putWC((*C.struct_sn_wc)(p), &buf[i])
			if ex {
				x := (*C.struct_sn_wc_ex)(p)
				x.tm_tag = C.uint64_t(buf[i].TMTag)
				x.tm_priv = C.uint32_t(buf[i].TMPriv)
			}
		}
		done += k
		if k < want {
			break
		}
	}
	return C.int(done)
}

// pollEx reads up to n completions of an extended CQ with their
// timestamps, as struct sn_wc_ex stride bytes apart.
func (o *cqObj) pollEx(n int, out unsafe.Pointer, stride int) C.int {
	o.xmu.Lock()
	defer o.xmu.Unlock()
	x := o.x
	if x.StartPoll() != nil {
		return 0
	}
	defer x.EndPoll()
	done := 0
	for {
		p := (*C.struct_sn_wc_ex)(unsafe.Add(out, done*stride))
		wc := ibv.WorkCompletion{WRID: x.WRID, Status: x.Status, Opcode: x.ReadOpcode(),
			VendorErr: x.ReadVendorErr(), ByteLen: x.ReadByteLen(), QPNum: x.ReadQPNum(),
			SrcQP: x.ReadSrcQP(), Flags: x.ReadWCFlags(), SLID: uint16(x.ReadSLID()),
			SL: x.ReadSL(), DLIDPathBits: x.ReadDLIDPathBits()}
		wc.Imm = x.ReadImmData()
		if wc.Flags&ibv.WCWithInv != 0 {
			wc.Imm = x.ReadInvalidatedRKey()
		}
		putWC(&p.wc, &wc)
		tag, priv := x.ReadTMInfo()
		p.tm_tag, p.tm_priv = C.uint64_t(tag), C.uint32_t(priv)
		p.ts = C.uint64_t(max(x.ReadCompletionTS(), x.ReadCompletionWallclockNS()))
		done++
		if done == n || x.NextPoll() != nil {
			return C.int(done)
		}
	}
}

// putWC writes a completion as struct ibv_wc.
func putWC(w *C.struct_sn_wc, c *ibv.WorkCompletion) {
	w.wr_id = C.uint64_t(c.WRID)
	w.status = C.uint32_t(c.Status)
	w.opcode = C.uint32_t(c.Opcode)
	w.vendor_err = C.uint32_t(c.VendorErr)
	w.byte_len = C.uint32_t(c.ByteLen)
	imm := c.Imm
	if c.Flags&ibv.WCWithImm != 0 {
		imm = bswap32(imm) // imm_data is in network order
	}
	w.imm = C.uint32_t(imm)
	w.qp_num = C.uint32_t(c.QPNum)
	w.src_qp = C.uint32_t(c.SrcQP)
	w.wc_flags = C.uint32_t(c.Flags)
	w.pkey_index = C.uint16_t(c.PKeyIndex)
	w.slid = C.uint16_t(c.SLID)
	w.sl = C.uint8_t(c.SL)
	w.dlid_path_bits = C.uint8_t(c.DLIDPathBits)
}

// bswap32 turns a value into its network-order representation in a
// little-endian uint32, and back.
func bswap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }
