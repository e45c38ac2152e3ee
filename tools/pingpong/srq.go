package pingpong

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// srqCtx is srq_pingpong's context: NumQP RC QPs that take their
// receives from one SRQ.
//
// srq_pingpong sends from and receives into one buffer shared by all its
// QPs. softnic's QPs run on several goroutines, so that sharing would be
// a data race in Go; softnic sends from one area of its buffer and gives
// every posted receive its own slot after it (wr_id carries the slot),
// which changes nothing on the wire. When that would take more than
// maxSlotBytes it shares one slot, as the C tool does.
type srqCtx struct {
	pp
	qps      []*verbs.QP
	pending  []int
	free     []int  // receive slots not posted
	received []bool // slots that received a message
}

// maxSlotBytes bounds the memory srq_pingpong gives separate receive slots.
const maxSlotBytes = 64 << 20

// init is pp_init_ctx: buffer, PD, MR, CQ, SRQ, the QPs, INIT.
func (p *srqCtx) init() error {
	cfg, env := p.cfg, p.env
	dev := env.Dev
	slots := cfg.RxDepth
	if slots*cfg.Size > maxSlotBytes {
		slots = 1
	}
	p.received = make([]bool, slots)
	for i := slots - 1; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	// memset(ctx->buf, 0, size)
	if err := p.Open(dev, make([]byte, cfg.Size*(1+slots)), ibv.AccessLocalWrite, cfg.RxDepth+cfg.NumQP); err != nil {
		return err
	}
	var err error
	if p.SRQ, err = p.PD.CreateSRQ(verbs.SRQInitAttr{MaxWR: uint32(cfg.RxDepth), MaxSGE: 1}); err != nil {
		return fail(err, "Couldn't create SRQ")
	}
	for i := 0; i < cfg.NumQP; i++ {
		qp, err := p.PD.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: p.CQ, RecvCQ: p.CQ, SRQ: p.SRQ,
			Cap: ibv.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
		if err != nil {
			return fail(err, "Couldn't create QP[%d]", i)
		}
		p.qps = append(p.qps, qp)
		if _, got := qp.Query(); int(got.Cap.MaxInlineData) >= cfg.Size {
			p.sendFlags |= ibv.SendInline
		}
	}
	for i, qp := range p.qps {
		err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: uint8(cfg.IBPort)},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags)
		if err != nil {
			return fail(err, "Failed to modify QP[%d] to INIT", i)
		}
	}
	p.pending = make([]int, cfg.NumQP)
	return nil
}

func (p *srqCtx) close() { p.Close(p.qps...) }

// connect moves every QP to RTS towards its peer QP; like srq_pingpong it
// routes them all by the first remote GID.
func (p *srqCtx) connect(my, rem []Dest) error {
	cfg := p.cfg
	for i, qp := range p.qps {
		attr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: cfg.MTU, DestQPN: rem[i].QPN, RQPSN: rem[i].PSN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12, AHAttr: ahAttr(cfg, Dest{LID: rem[i].LID, GID: rem[0].GID}, p.sgid, 1)}
		if err := qp.Modify(&attr, ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|
			ibv.QPAttrRQPSN|ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer); err != nil {
			return fail(noGRHHint(rem[0], err), "Failed to modify QP[%d] to RTR", i)
		}
		attr.State, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.MaxRdAtomic = ibv.QPStateRTS, uint8(cfg.QPTimeout), 7, 7, my[i].PSN, 1
		if err := qp.Modify(&attr, ibv.QPAttrState|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|
			ibv.QPAttrSQPSN|ibv.QPAttrMaxQPRdAtomic); err != nil {
			return fail(err, "Failed to modify QP[%d] to RTS", i)
		}
	}
	return nil
}

// postRecv posts up to n receives, each into a free slot (or the one
// shared slot), and returns how many it posted.
func (p *srqCtx) postRecv(n int) int {
	for i := 0; i < n; i++ {
		slot := 0
		if len(p.received) > 1 {
			if len(p.free) == 0 {
				return i
			}
			slot = p.free[len(p.free)-1]
		}
		sge := p.MR.SGE(p.cfg.Size*(1+slot), p.cfg.Size)
		if _, err := p.SRQ.PostRecv(ibv.RecvWR{WRID: recvWRID | uint64(slot)<<8, SGList: []ibv.SGE{sge}}); err != nil {
			return i
		}
		if len(p.received) > 1 {
			p.free = p.free[:len(p.free)-1]
		}
	}
	return n
}

// slot returns receive slot k.
func (p *srqCtx) slot(k int) []byte { return p.Buf[p.cfg.Size*(1+k) : p.cfg.Size*(2+k)] }

func (p *srqCtx) postSend(i int) error {
	_, err := p.qps[i].PostSend(ibv.SendWR{WRID: sendWRID, Opcode: ibv.WRSend, Flags: p.sendFlags,
		SGList: []ibv.SGE{p.MR.SGE(0, p.cfg.Size)}})
	return err
}

func (p *srqCtx) run(ctx context.Context) (*Result, error) {
	cfg, env := p.cfg, p.env
	lid, gid, err := p.start(p.postRecv)
	if err != nil {
		return nil, err
	}
	my := make([]Dest, MaxQP) // unused entries go out as zeros
	for i, qp := range p.qps {
		my[i] = Dest{LID: lid, QPN: qp.QPN(), PSN: env.PSN(), GID: gid}
		fmt.Fprint(env.Out, AddressLine(true, my[i], false))
	}
	rem, client, err := p.connectPeer(ctx, my, len(p.qps), func(rem []Dest) error { return p.connect(my, rem) })
	if err != nil {
		return nil, err
	}
	res := &Result{Local: my[:cfg.NumQP], Remote: rem[:cfg.NumQP], Size: cfg.Size, Iters: cfg.Iters}
	if client {
		if cfg.Check {
			fillPattern(p.Buf[:cfg.Size], env.PageSize)
		}
		for i := range p.qps {
			if err := p.postSend(i); err != nil {
				return nil, fail(err, "Couldn't post send")
			}
			p.pending[i] = sendWRID | recvWRID
		}
	} else {
		for i := range p.pending {
			p.pending[i] = recvWRID
		}
	}
	start := time.Now()
	if err := p.loop(ctx); err != nil {
		return nil, err
	}
	return p.finish(res, start, client, func() []int {
		bad := map[int]bool{}
		for k, got := range p.received {
			if got {
				for _, pg := range checkPattern(p.slot(k), env.PageSize, 0) {
					bad[pg] = true
				}
			}
		}
		var pages []int
		for pg := range bad {
			pages = append(pages, pg)
		}
		slices.Sort(pages)
		return pages
	})
}

func (p *srqCtx) findQP(qpn uint32) int {
	for i, qp := range p.qps {
		if qp.QPN() == qpn {
			return i
		}
	}
	return -1
}

func (p *srqCtx) loop(ctx context.Context) error {
	cfg := p.cfg
	w := toolnic.Waiter{CQ: p.CQ, Ch: p.Ch, Stall: p.env.Stall}
	wc := make([]ibv.WorkCompletion, cfg.NumQP+cfg.RxDepth)
	rcnt, scnt := 0, 0
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		n, err := p.wait(ctx, &w, wc, scnt, rcnt)
		if err != nil {
			return err
		}
		for _, c := range wc[:n] {
			if c.Status != ibv.WCSuccess {
				return wcError(c, int(c.WRID&0xff), p.CQ, p.qps...)
			}
			qi := p.findQP(c.QPNum)
			if qi < 0 {
				return fail(nil, "Couldn't find QPN %06x", c.QPNum)
			}
			wrid := c.WRID & 0xff
			switch wrid {
			case sendWRID:
				scnt++
			case recvWRID:
				if len(p.received) > 1 {
					k := int(c.WRID >> 8)
					p.received[k] = true
					p.free = append(p.free, k)
				} else {
					p.received[0] = true
				}
				p.routs--
				if p.routs <= cfg.NumQP {
					p.routs += p.postRecv(cfg.RxDepth - p.routs)
					if p.routs < cfg.RxDepth {
						return fail(nil, "Couldn't post receive (%d)", p.routs)
					}
				}
				rcnt++
			default:
				return fail(nil, "Completion for unknown wr_id %d", int(c.WRID))
			}
			p.pending[qi] &^= int(wrid)
			if scnt < cfg.Iters && p.pending[qi] == 0 {
				if err := p.postSend(qi); err != nil {
					return fail(err, "Couldn't post send")
				}
				p.pending[qi] = recvWRID | sendWRID
			}
		}
	}
	return nil
}
