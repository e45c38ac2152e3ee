package pingpong

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// single is the context of rc_pingpong, uc_pingpong and ud_pingpong: one
// QP, one buffer used for both directions (struct pingpong_context).
type single struct {
	pp
	qp     *verbs.QP
	qpx    *verbs.QPEx
	ah     *verbs.AH // ud_pingpong's address handle
	remQPN uint32

	pending int
}

// init is pp_init_ctx: buffer, PD, MR, CQ, QP, INIT.
func (p *single) init() error {
	cfg, env := p.cfg, p.env
	dev := env.Dev
	n := cfg.Size
	if cfg.Kind == UD {
		port, err := dev.QueryPort(uint8(cfg.IBPort))
		if err != nil {
			return fail(err, "Unable to query port info for port %d", cfg.IBPort)
		}
		if mtu := port.ActiveMTU.Bytes(); cfg.Size > mtu {
			return fail(nil, "Requested size larger than port MTU (%d)", mtu)
		}
		n += udGRH
	}
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = 0x7b // memset(ctx->buf, 0x7b, size)
	}
	if err := p.Open(dev, buf, ibv.AccessLocalWrite, cfg.RxDepth+1); err != nil {
		return err
	}
	var err error
	typ := map[Kind]ibv.QPType{RC: ibv.QPTypeRC, UC: ibv.QPTypeUC, UD: ibv.QPTypeUD}[cfg.Kind]
	init := verbs.QPInitAttr{Type: typ, SendCQ: p.CQ, RecvCQ: p.CQ,
		Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}}
	if cfg.NewSend {
		init.SendOpsFlags = verbs.SendOpsSend
	}
	if p.qp, err = p.PD.CreateQP(init); err != nil {
		if typ == ibv.QPTypeUD {
			return fail(fmt.Errorf("%w (%w)", err, ErrUnsupported), "Couldn't create QP")
		}
		return fail(err, "Couldn't create QP")
	}
	if cfg.NewSend {
		if p.qpx, err = p.qp.Ex(); err != nil {
			return fail(err, "Couldn't create QP")
		}
	}
	if _, got := p.qp.Query(); int(got.Cap.MaxInlineData) >= cfg.Size {
		p.sendFlags |= ibv.SendInline
	}
	attr := ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: uint8(cfg.IBPort)}
	mask := ibv.QPAttrState | ibv.QPAttrPKeyIndex | ibv.QPAttrPort
	if cfg.Kind == UD {
		attr.QKey = UDQKey
		mask |= ibv.QPAttrQKey
	} else {
		mask |= ibv.QPAttrAccessFlags // qp_access_flags = 0
	}
	if err := p.qp.Modify(&attr, mask); err != nil {
		return fail(err, "Failed to modify QP to INIT")
	}
	return nil
}

func (p *single) close() {
	if p.ah != nil {
		p.ah.Destroy()
	}
	p.Close(p.qp)
}

// data is the part of the buffer that is sent and checked.
func (p *single) data() []byte {
	if p.cfg.Kind == UD {
		return p.Buf[udGRH:]
	}
	return p.Buf
}

// connect is pp_connect_ctx: RTR and RTS towards rem (and, for UD, the
// address handle).
func (p *single) connect(my, rem Dest) error {
	cfg := p.cfg
	switch cfg.Kind {
	case UD:
		if err := p.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState); err != nil {
			return fail(err, "Failed to modify QP to RTR")
		}
		if err := p.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: my.PSN}, ibv.QPAttrState|ibv.QPAttrSQPSN); err != nil {
			return fail(err, "Failed to modify QP to RTS")
		}
		ah, err := p.PD.CreateAH(ahAttr(cfg, rem, p.sgid, 64))
		if err != nil {
			return fail(noGRHHint(rem, err), "Failed to create AH")
		}
		p.ah, p.remQPN = ah, rem.QPN
		return nil
	}
	attr := ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: cfg.MTU, DestQPN: rem.QPN, RQPSN: rem.PSN,
		AHAttr: ahAttr(cfg, rem, p.sgid, 1)}
	mask := ibv.QPAttrState | ibv.QPAttrAV | ibv.QPAttrPathMTU | ibv.QPAttrDestQPN | ibv.QPAttrRQPSN
	if cfg.Kind == RC {
		attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
		mask |= ibv.QPAttrMaxDestRdAtomic | ibv.QPAttrMinRNRTimer
	}
	if err := p.qp.Modify(&attr, mask); err != nil {
		return fail(noGRHHint(rem, err), "Failed to modify QP to RTR")
	}
	attr.State, attr.SQPSN = ibv.QPStateRTS, my.PSN
	mask = ibv.QPAttrState | ibv.QPAttrSQPSN
	if cfg.Kind == RC {
		attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = uint8(cfg.QPTimeout), 7, 7, 1
		mask |= ibv.QPAttrTimeout | ibv.QPAttrRetryCnt | ibv.QPAttrRNRRetry | ibv.QPAttrMaxQPRdAtomic
	}
	if err := p.qp.Modify(&attr, mask); err != nil {
		return fail(err, "Failed to modify QP to RTS")
	}
	return nil
}

// postRecv posts up to n receives and returns how many it posted.
func (p *single) postRecv(n int) int {
	sge := p.MR.SGE(0, p.cfg.Size)
	if p.cfg.Kind == UD {
		sge = p.MR.SGE(0, p.cfg.Size+udGRH)
	}
	for i := 0; i < n; i++ {
		if _, err := p.qp.PostRecv(ibv.RecvWR{WRID: recvWRID, SGList: []ibv.SGE{sge}}); err != nil {
			return i
		}
	}
	return n
}

func (p *single) postSend() error {
	off := 0
	if p.cfg.Kind == UD {
		off = udGRH
	}
	sge := p.MR.SGE(off, p.cfg.Size)
	if p.qpx != nil {
		p.qpx.WrStart()
		p.qpx.WRID, p.qpx.WRFlags = sendWRID, p.sendFlags
		p.qpx.WrSend()
		if p.cfg.Kind == UD {
			p.qpx.WrSetUDAddr(p.ah, p.remQPN, UDQKey)
		}
		p.qpx.WrSetSGE(sge.LKey, sge.Addr, sge.Length)
		return p.qpx.WrComplete()
	}
	wr := ibv.SendWR{WRID: sendWRID, Opcode: ibv.WRSend, Flags: p.sendFlags, SGList: []ibv.SGE{sge}}
	if p.cfg.Kind == UD {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = p.ah, p.remQPN, UDQKey
	}
	_, err := p.qp.PostSend(wr)
	return err
}

func (p *single) run(ctx context.Context) (*Result, error) {
	cfg, env := p.cfg, p.env
	lid, gid, err := p.start(p.postRecv)
	if err != nil {
		return nil, err
	}
	my := Dest{LID: lid, QPN: p.qp.QPN(), PSN: env.PSN(), GID: gid}
	fmt.Fprint(env.Out, AddressLine(true, my, cfg.Kind == UD))

	rems, client, err := p.connectPeer(ctx, []Dest{my}, 1, func(rem []Dest) error { return p.connect(my, rem[0]) })
	if err != nil {
		return nil, err
	}
	rem := rems[0]

	res := &Result{Local: []Dest{my}, Remote: []Dest{rem}, Size: cfg.Size, Iters: cfg.Iters}
	p.pending = recvWRID
	if client {
		if cfg.Check {
			fillPattern(p.data(), env.PageSize)
		}
		if err := p.postSend(); err != nil {
			return nil, fail(err, "Couldn't post send")
		}
		p.pending |= sendWRID
	}
	start := time.Now()
	if err := p.loop(ctx); err != nil {
		return nil, err
	}
	return p.finish(res, start, client, func() []int { return checkPattern(p.data(), env.PageSize, 0x7b) })
}

// loop is the C tools' main loop: every completion clears its bit in
// pending; when both the send and the receive of an exchange are done,
// the next send goes out.
func (p *single) loop(ctx context.Context) error {
	cfg := p.cfg
	w := toolnic.Waiter{CQ: p.CQ, Ch: p.Ch, Stall: p.env.Stall}
	var wc [2]ibv.WorkCompletion
	rcnt, scnt := 0, 0
	gone := false // the peer closed before acknowledging our last send
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		n, err := p.wait(ctx, &w, wc[:], scnt, rcnt)
		if err != nil {
			return err
		}
		for _, c := range wc[:n] {
			if c.Status == ibv.WCRetryExcErr && c.WRID == sendWRID && rcnt == cfg.Iters && scnt == cfg.Iters-1 {
				// The last send went unacknowledged after the peer's last
				// message came. The peer sends its message k only once it
				// has ours (the loop below posts a send when the previous
				// one completed and a message arrived, on both sides, the
				// client first), so it has every one of ours and, its own
				// last send acknowledged, closed: the ACK of our last send
				// was lost and nothing answers the retries. rdma-core's
				// ibv_rc_pingpong fails here; softnic's warns and is done,
				// as tm_pingpong does.
				fmt.Fprintf(p.env.Err, "the peer closed before its acknowledgement of our last message arrived\n")
				scnt++
				gone = true
				continue
			}
			if gone && c.Status == ibv.WCWRFlushErr {
				continue // the receives still posted, flushed with the QP
			}
			if c.Status != ibv.WCSuccess {
				return wcError(c, int(c.WRID), p.CQ, p.qp)
			}
			switch c.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				p.routs--
				if p.routs <= 1 {
					p.routs += p.postRecv(cfg.RxDepth - p.routs)
					if p.routs < cfg.RxDepth {
						return fail(nil, "Couldn't post receive (%d)", p.routs)
					}
				}
				rcnt++
			default:
				return fail(nil, "Completion for unknown wr_id %d", int(c.WRID))
			}
			p.pending &^= int(c.WRID)
			if scnt < cfg.Iters && p.pending == 0 {
				if err := p.postSend(); err != nil {
					return fail(err, "Couldn't post send")
				}
				p.pending = recvWRID | sendWRID
			}
		}
	}
	return nil
}
