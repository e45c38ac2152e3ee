package perftest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// res are a run's verbs resources (struct pingpong_context).
type res struct {
	cfg *Config
	dev *verbs.Device

	pd             *verbs.PD
	buf            []byte // the registered buffer, aligned to the page size
	mr             *verbs.MR
	sendCh, recvCh *verbs.CompChannel
	sendCQ, recvCQ *verbs.CQ
	qps            []*verbs.QP
	ahs            []*verbs.AH
	// udPeers, with -R over UD, are each QP's peer as the CM gave it (the
	// SIDR REP's QPN and Q_Key, or the first datagram's sender): perftest
	// sends to the CM node's remote_qpn and remote_qkey then, not the
	// exchanged QPN and DEF_QKEY (ctx_set_send_reg_wqes).
	udPeers []udPeer

	cycle     int // the page size both sides agreed on ("cycle buffer")
	cacheLine int
	size      int // ctx->size: the message size resources were made for
	buffSize  int // ctx->buff_size
	mtu       ibv.MTU
	outReads  int
	inline    int
	// askInline is the inline size each QP asks for (inline is the
	// smallest any QP was given).
	askInline int
	sgid      int
}

// buffSz is BUFF_SIZE(ctx->size, cycle_buffer).
func (r *res) buffSz() int { return max(r.size, r.cycle) }

// inc is INC(size, cache_line_size): the step between consecutive
// messages in the cycling buffer.
func inc(size, cacheLine int) int {
	if size > cacheLine {
		return roundUp(size, cacheLine)
	}
	return cacheLine
}

// localBase is QP i's send area (ctx->buf[i]).
func (r *res) localBase(i int) int { return i * r.buffSz() }

// remoteBase is the offset of QP i's peer-writable area, what its key
// message advertises (set_up_connection: buf + (num_qps+i)*BUFF_SIZE).
func (r *res) remoteBase(i int) int { return (r.cfg.NumQP + i) * r.buffSz() }

// recvBase is QP i's receive area (ctx_set_recv_wqes).
func (r *res) recvBase(i int) int {
	off := (r.cfg.NumQP + i) * (r.buffSize / r.cfg.NumQP / 2)
	if r.cfg.Conn == UD {
		off += r.cacheLine - UDAddition
	}
	return off
}

func (r *res) addr(off int) uint64 { return r.mr.Addr() + uint64(off) }

// alloc allocates and registers the buffer and makes the CQs and QPs
// (alloc_ctx, ctx_init), and moves the QPs to INIT.
//
// With ids (-R) QP i is made on ids[i] (rdma_create_qp), and the CM moves
// it through its states; a server adds the QPs of later requests with
// addQP as they come.
func newRes(cfg *Config, dev *verbs.Device, cycle, cacheLine int, mtu ibv.MTU, outReads, inline int, ids []*cm.ID) (*res, error) {
	r := &res{cfg: cfg, dev: dev, cycle: cycle, cacheLine: cacheLine, size: int(cfg.Size), mtu: mtu,
		outReads: outReads, inline: inline, askInline: inline}
	ok := false
	defer func() {
		if !ok {
			r.close()
		}
	}()
	r.buffSize = inc(r.buffSz(), cacheLine) * 2 * cfg.NumQP
	n := r.buffSize
	if cfg.Conn == UD {
		n += cacheLine
	}
	raw := make([]byte, n+cycle)
	pad := (cycle - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(cycle))) % cycle
	r.buf = raw[pad : pad+n : pad+n]
	if !(cfg.Verb == Write && cfg.Test == Lat) { // write_lat polls a zeroed buffer
		var sd [32]byte
		binary.LittleEndian.PutUint64(sd[:], rand.Uint64())
		rand.NewChaCha8(sd).Read(r.buf) // srand(time(NULL)); rand() per byte
	}
	var err error
	if r.pd, err = dev.AllocPD(); err != nil {
		return nil, fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	access := ibv.AccessLocalWrite
	switch cfg.Verb {
	case Write:
		access |= ibv.AccessRemoteWrite
	case Read:
		access |= ibv.AccessRemoteRead
	case Atomic:
		access |= ibv.AccessRemoteAtomic
	}
	if r.mr, err = r.pd.RegMR(r.buf, access); err != nil {
		return nil, fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	r.sendCh = dev.CreateCompChannel()
	if r.sendCQ, err = dev.CreateCQ(cfg.TxDepth*cfg.NumQP, r.sendCh); err != nil {
		return nil, fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if cfg.Verb == Send {
		r.recvCh = dev.CreateCompChannel()
		if r.recvCQ, err = dev.CreateCQ(cfg.RxDepth*cfg.NumQP, r.recvCh); err != nil {
			return nil, fmt.Errorf("Couldn't create a receiver CQ: %w", err)
		}
	}
	if ids == nil {
		for range cfg.NumQP {
			if err := r.addQP(nil); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range ids {
		if err := r.addQP(id); err != nil {
			return nil, err
		}
	}
	ok = true
	return r, nil
}

// addQP makes the run's next QP: on id (rdma_create_qp, which moves it to
// INIT) or, without one, on the PD and moved to INIT here.
func (r *res) addQP(id *cm.ID) error {
	cfg := r.cfg
	recvCQ := r.sendCQ
	if r.recvCQ != nil {
		recvCQ = r.recvCQ
	}
	typ := map[Conn]ibv.QPType{RC: ibv.QPTypeRC, UC: ibv.QPTypeUC, UD: ibv.QPTypeUD}[cfg.Conn]
	init := verbs.QPInitAttr{Type: typ, SendCQ: r.sendCQ, RecvCQ: recvCQ,
		Cap: ibv.QPCap{MaxSendWR: uint32(cfg.TxDepth), MaxRecvWR: uint32(cfg.RxDepth), MaxSendSGE: 1,
			MaxRecvSGE: 1, MaxInlineData: uint32(r.askInline)}}
	var qp *verbs.QP
	var err error
	if id != nil {
		qp, err = id.CreateQP(r.pd, init)
	} else {
		qp, err = r.pd.CreateQP(init)
	}
	if err != nil {
		return fmt.Errorf("Couldn't create QP: %w", err)
	}
	r.qps = append(r.qps, qp)
	if _, got := qp.Query(); r.inline > int(got.Cap.MaxInlineData) {
		r.inline = int(got.Cap.MaxInlineData)
	}
	if id != nil {
		return nil // rdma_create_qp moved it to INIT
	}
	attr := ibv.QPAttr{State: ibv.QPStateInit, PortNum: uint8(cfg.IBPort)}
	mask := ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort
	if cfg.Conn == UD {
		attr.QKey = DefQKey
		mask |= ibv.QPAttrQKey
	} else {
		switch cfg.Verb {
		case Atomic:
			attr.AccessFlags = ibv.AccessRemoteAtomic
		case Read:
			attr.AccessFlags = ibv.AccessRemoteRead
		case Write:
			attr.AccessFlags = ibv.AccessRemoteWrite
		case Send:
			attr.AccessFlags = ibv.AccessRemoteWrite | ibv.AccessLocalWrite
		}
		mask |= ibv.QPAttrAccessFlags
	}
	if err := qp.Modify(&attr, mask); err != nil {
		return fmt.Errorf("Failed to modify QP to INIT, ret=%w", err)
	}
	return nil
}

// cqs returns the CQs of the run (the receive CQ only when it is one of
// its own).
func (r *res) cqs() []*verbs.CQ {
	if r.recvCQ != nil {
		return []*verbs.CQ{r.sendCQ, r.recvCQ}
	}
	return []*verbs.CQ{r.sendCQ}
}

// retryBound is the longest any QP of the run can take to declare its
// peer dead after its last progress (toolnic.RetryBound); 0 without RC.
func (r *res) retryBound() time.Duration {
	var b time.Duration
	for _, qp := range r.qps {
		b = max(b, toolnic.RetryBound(qp))
	}
	return b
}

func (r *res) close() {
	for _, ah := range r.ahs {
		ah.Destroy()
	}
	for _, qp := range r.qps {
		qp.Destroy()
	}
	for _, cq := range []*verbs.CQ{r.sendCQ, r.recvCQ} {
		if cq != nil {
			cq.Destroy()
		}
	}
	if r.mr != nil {
		r.mr.Dereg()
	}
	if r.pd != nil {
		r.pd.Dealloc()
	}
	for _, ch := range []*verbs.CompChannel{r.sendCh, r.recvCh} {
		if ch != nil {
			ch.Close()
		}
	}
}

// dests returns this side's key messages (set_up_connection).
func (r *res) dests(lid uint16, gid verbs.GID, psn func() uint32) []Dest {
	d := make([]Dest, len(r.qps))
	for i, qp := range r.qps {
		d[i] = Dest{LID: lid, OutReads: uint32(r.outReads), QPN: qp.QPN(), PSN: psn(), RKey: r.mr.RKey(),
			VAddr: r.addr(r.remoteBase(i)), GID: gid}
		if r.cfg.Verb != Read && r.cfg.Verb != Atomic {
			d[i].OutReads = 1
		}
	}
	return d
}

// connect moves the QPs to RTR, and to RTS on a side that sends
// (ctx_connect), and makes UD address handles.
func (r *res) connect(my, rem []Dest) error {
	cfg := r.cfg
	sends := cfg.Test == Lat || !cfg.Server()
	for i, qp := range r.qps {
		ah := ibv.AHAttr{DLID: rem[i].LID, SL: uint8(cfg.SL), PortNum: uint8(cfg.IBPort), IsGlobal: true,
			GRH: ibv.GlobalRoute{DGID: rem[i].GID.Addr(), SGIDIndex: uint8(r.sgid), HopLimit: 0xFF, TrafficClass: cfg.TClass}}
		attr := ibv.QPAttr{State: ibv.QPStateRTR, AHAttr: ah}
		mask := ibv.QPAttrState
		if cfg.Conn != UD {
			attr.PathMTU, attr.DestQPN, attr.RQPSN = r.mtu, rem[i].QPN, rem[i].PSN
			mask |= ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
			if cfg.Conn == RC {
				attr.MaxDestRdAtomic, attr.MinRNRTimer = uint8(my[i].OutReads), minRNRTimer
				mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
			}
		}
		if err := qp.Modify(&attr, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", qp.QPN(), err)
		}
		if sends {
			attr.State, attr.SQPSN = ibv.QPStateRTS, my[i].PSN
			mask = ibv.QPAttrState | ibv.QPAttrSQPSN
			if cfg.Conn == RC {
				attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = cfg.QPTimeout, 7, 7, uint8(rem[i].OutReads)
				mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
			}
			if err := qp.Modify(&attr, mask); err != nil {
				return fmt.Errorf("Failed to modify QP to RTS: %w", err)
			}
			if cfg.Conn == UD {
				h, err := r.pd.CreateAH(ah)
				if err != nil {
					return fmt.Errorf("Failed to create AH: %w", err)
				}
				r.ahs = append(r.ahs, h)
			}
		}
	}
	return nil
}

// wqe is one QP's send work request template (ctx->wr[i]): its SGE and
// remote address move through the cycle buffer as it is posted.
type wqe struct {
	idx        int // the QP's index: the WRs' wr_id
	qp         *verbs.QP
	sge        [1]ibv.SGE
	remoteAddr uint64
	flags      ibv.SendFlags
	localBase  uint64 // ctx->my_addr[i]
	remBase    uint64 // ctx->rem_addr[i]
	rkey       uint32
	ah         *verbs.AH
	remQPN     uint32
	qkey       uint32 // the UD destination's Q_Key
}

// udPeer is a UD QP's destination learnt through the CM.
type udPeer struct {
	ah        *verbs.AH
	qpn, qkey uint32
}

// sendWQEs sets up the send work requests (ctx_set_send_reg_wqes).
func (r *res) sendWQEs(rem []Dest) []*wqe {
	cfg := r.cfg
	w := make([]*wqe, len(r.qps))
	for i, qp := range r.qps {
		x := &wqe{idx: i, qp: qp, localBase: r.addr(r.localBase(i)), remBase: rem[i].VAddr, remoteAddr: rem[i].VAddr, rkey: rem[i].RKey}
		x.sge[0] = ibv.SGE{Addr: x.localBase, Length: uint32(cfg.Size), LKey: r.mr.LKey()}
		if cfg.CQMod == 1 {
			x.flags = ibv.SendSignaled // (j+1) % cq_mod == 0 for j = 0
		}
		if (cfg.Verb == Send || cfg.Verb == Write) && int(cfg.Size) <= r.inline {
			x.flags |= ibv.SendInline
		}
		x.qkey = DefQKey
		switch {
		case cfg.Conn == UD && len(r.udPeers) > i && r.udPeers[i].ah != nil:
			p := r.udPeers[i]
			x.ah, x.remQPN, x.qkey = p.ah, p.qpn, p.qkey
		case cfg.Conn == UD && len(r.ahs) > i:
			x.ah, x.remQPN = r.ahs[i], rem[i].QPN
		}
		w[i] = x
	}
	return w
}

// post posts x once.
func (r *res) post(x *wqe) error {
	cfg := r.cfg
	wr := ibv.SendWR{WRID: uint64(x.idx), Flags: x.flags, SGList: x.sge[:]}
	switch cfg.Verb {
	case Send:
		wr.Opcode = ibv.WRSend
		if cfg.Conn == UD {
			wr.AH, wr.RemoteQPN, wr.RemoteQKey = x.ah, x.remQPN, x.qkey
		}
	case Write:
		wr.Opcode, wr.RemoteAddr, wr.RKey = ibv.WRRDMAWrite, x.remoteAddr, x.rkey
	case Read:
		wr.Opcode, wr.RemoteAddr, wr.RKey = ibv.WRRDMARead, x.remoteAddr, x.rkey
	case Atomic:
		wr.RemoteAddr, wr.RKey = x.remoteAddr, x.rkey
		if cfg.Atomic == FetchAndAdd {
			wr.Opcode, wr.CompareAdd = ibv.WRAtomicFetchAndAdd, atomicAdd
		} else {
			wr.Opcode, wr.Swap = ibv.WRAtomicCmpAndSwp, atomicSwap
		}
	}
	_, err := x.qp.PostSend(wr)
	return err
}

// advance moves x to the next message of the cycle buffer after post
// number scnt (increase_loc_addr, increase_rem_addr).
func (r *res) advance(x *wqe, scnt uint64, size int) {
	step := inc(size, r.cacheLine)
	period := uint64(r.cycle / step)
	x.sge[0].Addr += uint64(step)
	if (scnt+1)%period == 0 {
		x.sge[0].Addr = x.localBase
	}
	if r.cfg.Verb != Send {
		x.remoteAddr += uint64(step)
		if (scnt+1)%period == 0 {
			x.remoteAddr = x.remBase
		}
	}
}

// rwqe is one QP's receive template (ctx->rwr[i]).
type rwqe struct {
	qp   *verbs.QP
	sge  [1]ibv.SGE
	base uint64
}

// postRecvs posts each QP's first receives (ctx_set_recv_wqes) and
// returns the templates, advanced past them.
func (r *res) postRecvs(size int) ([]*rwqe, error) {
	cfg := r.cfg
	w := make([]*rwqe, len(r.qps))
	for i, qp := range r.qps {
		x := &rwqe{qp: qp, base: r.addr(r.recvBase(i))}
		n := size
		if cfg.Conn == UD {
			n += UDAddition
		}
		x.sge[0] = ibv.SGE{Addr: x.base, Length: uint32(n), LKey: r.mr.LKey()}
		for j := 0; j < cfg.RxDepth; j++ {
			if err := r.postRecv(x, i); err != nil {
				return nil, fmt.Errorf("Couldn't post recv Qp = %d: counter=%d: %w", i, j, err)
			}
			if cfg.Test == BW && size <= r.cycle/2 {
				r.advanceRecv(x, uint64(j), size)
			}
		}
		x.sge[0].Addr = x.base
		w[i] = x
	}
	return w, nil
}

func (r *res) postRecv(x *rwqe, i int) error {
	_, err := x.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: x.sge[:]})
	return err
}

func (r *res) advanceRecv(x *rwqe, n uint64, size int) {
	step := inc(size, r.cacheLine)
	x.sge[0].Addr += uint64(step)
	if (n+1)%uint64(r.cycle/step) == 0 {
		x.sge[0].Addr = x.base
	}
}

// maxQPStates is how many QPs printQPStates shows.
const maxQPStates = 4

// printQPStates shows, after a failed run, the state of the first QPs
// and where their PSNs stand, as rdma-core's "rdma resource show qp"
// shows a kernel QP's (state, sq-psn, rq-psn): a run that stopped with
// its QP in RTS and its peer still sending is told from one whose QP
// went to ERR.
func (r *res) printQPStates(w io.Writer) {
	for i, qp := range r.qps {
		if i == maxQPStates {
			fmt.Fprintf(w, " ... and %d more QPs\n", len(r.qps)-i)
			return
		}
		a, _ := qp.Query()
		fmt.Fprintf(w, " QP 0x%04x: state %v, sq_psn 0x%06x, rq_psn 0x%06x\n", qp.QPN(), a.State, a.SQPSN, a.RQPSN)
	}
}
