package pingpong

import (
	"context"
	"errors"
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
	cfg *Config
	env *toolnic.Env

	ch        *verbs.CompChannel
	pd        *verbs.PD
	buf       []byte
	mr        *verbs.MR
	cq        *verbs.CQ
	srq       *verbs.SRQ
	qps       []*verbs.QP
	sendFlags ibv.SendFlags
	sgid      int
	pending   []int
	routs     int
	free      []int  // receive slots not posted
	received  []bool // slots that received a message
}

// maxSlotBytes bounds the memory srq_pingpong gives separate receive slots.
const maxSlotBytes = 64 << 20

func runSRQ(ctx context.Context, cfg *Config, env *toolnic.Env) (*Result, error) {
	p, err := newSRQ(cfg, env)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return p.run(ctx)
}

func newSRQ(cfg *Config, env *toolnic.Env) (*srqCtx, error) {
	p := &srqCtx{cfg: cfg, env: env, sendFlags: ibv.SendSignaled}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	dev := env.Dev
	slots := cfg.RxDepth
	if slots*cfg.Size > maxSlotBytes {
		slots = 1
	}
	p.buf = make([]byte, cfg.Size*(1+slots)) // memset(ctx->buf, 0, size)
	p.received = make([]bool, slots)
	for i := slots - 1; i >= 0; i-- {
		p.free = append(p.free, i)
	}
	p.ch = dev.CreateCompChannel()
	var err error
	if p.pd, err = dev.AllocPD(); err != nil {
		return nil, fail(err, "Couldn't allocate PD")
	}
	if p.mr, err = p.pd.RegMR(p.buf, ibv.AccessLocalWrite); err != nil {
		return nil, fail(err, "Couldn't register MR")
	}
	if p.cq, err = dev.CreateCQ(cfg.RxDepth+cfg.NumQP, p.ch); err != nil {
		return nil, fail(err, "Couldn't create CQ")
	}
	if p.srq, err = p.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: uint32(cfg.RxDepth), MaxSGE: 1}); err != nil {
		return nil, fail(err, "Couldn't create SRQ")
	}
	for i := 0; i < cfg.NumQP; i++ {
		qp, err := p.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: p.cq, RecvCQ: p.cq, SRQ: p.srq,
			Cap: ibv.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
		if err != nil {
			return nil, fail(err, "Couldn't create QP[%d]", i)
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
			return nil, fail(err, "Failed to modify QP[%d] to INIT", i)
		}
	}
	p.pending = make([]int, cfg.NumQP)
	ok = true
	return p, nil
}

func (p *srqCtx) close() {
	for _, qp := range p.qps {
		qp.Destroy()
	}
	if p.srq != nil {
		p.srq.Destroy()
	}
	if p.cq != nil {
		p.cq.Destroy()
	}
	if p.mr != nil {
		p.mr.Dereg()
	}
	if p.pd != nil {
		p.pd.Dealloc()
	}
	if p.ch != nil {
		p.ch.Close()
	}
}

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
		sge := p.mr.SGE(p.cfg.Size*(1+slot), p.cfg.Size)
		if _, err := p.srq.PostRecv(ibv.RecvWR{WRID: recvWRID | uint64(slot)<<8, SGList: []ibv.SGE{sge}}); err != nil {
			return i
		}
		if len(p.received) > 1 {
			p.free = p.free[:len(p.free)-1]
		}
	}
	return n
}

// slot returns receive slot k.
func (p *srqCtx) slot(k int) []byte { return p.buf[p.cfg.Size*(1+k) : p.cfg.Size*(2+k)] }

func (p *srqCtx) postSend(i int) error {
	_, err := p.qps[i].PostSend(ibv.SendWR{WRID: sendWRID, Opcode: ibv.WRSend, Flags: p.sendFlags,
		SGList: []ibv.SGE{p.mr.SGE(0, p.cfg.Size)}})
	return err
}

func (p *srqCtx) run(ctx context.Context) (*Result, error) {
	cfg, env := p.cfg, p.env
	if p.routs = p.postRecv(cfg.RxDepth); p.routs < cfg.RxDepth {
		return nil, fail(nil, "Couldn't post receive (%d)", p.routs)
	}
	if cfg.Events {
		if err := p.cq.ReqNotify(false); err != nil {
			return nil, fail(err, "Couldn't request CQ notification")
		}
	}
	port, err := env.Dev.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return nil, fail(err, "Couldn't get port info")
	}
	gid, sgid, err := localGID(cfg, env)
	if err != nil {
		return nil, err
	}
	p.sgid = sgid
	my := make([]Dest, MaxQP) // unused entries go out as zeros
	for i, qp := range p.qps {
		my[i] = Dest{LID: port.LID, QPN: qp.QPN(), PSN: env.PSN(), GID: gid}
		fmt.Fprint(env.Out, AddressLine(true, my[i], false))
	}
	rem, err := exchange(ctx, cfg, env, my, func(rem []Dest) error { return p.connect(my, rem) })
	if err != nil {
		return nil, err
	}
	for i := range p.qps {
		fmt.Fprint(env.Out, AddressLine(false, rem[i], false))
	}
	client := cfg.ServerName != ""
	if client {
		if err := p.connect(my, rem); err != nil {
			return nil, err
		}
	}
	res := &Result{Local: my[:cfg.NumQP], Remote: rem[:cfg.NumQP], Size: cfg.Size, Iters: cfg.Iters}
	if client {
		if cfg.Check {
			fillPattern(p.buf[:cfg.Size], env.PageSize)
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
	res.Elapsed = time.Since(start)
	fmt.Fprint(env.Out, ResultLines(cfg.Size, cfg.Iters, Usec(res.Elapsed)))
	if !client && cfg.Check {
		res.Checked = true
		bad := map[int]bool{}
		for k, got := range p.received {
			if got {
				for _, pg := range checkPattern(p.slot(k), env.PageSize, 0) {
					bad[pg] = true
				}
			}
		}
		for pg := range bad {
			res.BadPages = append(res.BadPages, pg)
		}
		slices.Sort(res.BadPages)
		for _, pg := range res.BadPages {
			fmt.Fprint(env.Out, InvalidPageLine(pg))
		}
		if len(res.BadPages) > 0 {
			return res, fail(ErrBadData, "%d of %d pages failed the check", len(res.BadPages), (cfg.Size+env.PageSize-1)/env.PageSize)
		}
	}
	return res, nil
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
	w := toolnic.Waiter{CQ: p.cq, Ch: p.ch, Stall: p.env.Stall}
	wc := make([]ibv.WorkCompletion, cfg.NumQP+cfg.RxDepth)
	rcnt, scnt := 0, 0
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		var n int
		if cfg.Events {
			ectx, cancel := context.WithTimeout(ctx, p.env.Stall)
			_, err := p.ch.GetEvent(ectx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, context.DeadlineExceeded) {
					err = &toolnic.ErrStall{What: "completion event", After: p.env.Stall}
				}
				return fail(err, "Failed to get cq_event")
			}
			if err := p.cq.ReqNotify(false); err != nil {
				return fail(err, "Couldn't request CQ notification")
			}
			n = p.cq.Poll(wc)
		} else {
			var err error
			if n, err = w.Poll(ctx, wc); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fail(err, "poll CQ failed (sent %d, received %d of %d)", scnt, rcnt, cfg.Iters)
			}
		}
		for _, c := range wc[:n] {
			if c.Status != ibv.WCSuccess {
				return wcError(c, int(c.WRID&0xff), p.cq, p.qps...)
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
