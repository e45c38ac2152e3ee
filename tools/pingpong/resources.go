package pingpong

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// Resources are what the context of every pingpong holds (struct
// pingpong_context of rdma-core's examples, and tm_pingpong's): the
// completion channel, the PD, the buffer and its MR, the CQ, and for the
// SRQ tools the SRQ. Open and Close make and free them as pp_init_ctx
// and pp_close_ctx do; each tool adds its QPs.
type Resources struct {
	Ch  *verbs.CompChannel
	PD  *verbs.PD
	Buf []byte
	MR  *verbs.MR
	CQ  *verbs.CQ
	SRQ *verbs.SRQ
}

// Open makes the completion channel, the PD, the MR over buf with
// access, and a CQ of cqe entries on the channel. On an error, Close
// frees what was made.
func (r *Resources) Open(dev *verbs.Device, buf []byte, access ibv.Access, cqe int) error {
	r.Buf = buf
	r.Ch = dev.CreateCompChannel()
	var err error
	if r.PD, err = dev.AllocPD(); err != nil {
		return fail(err, "Couldn't allocate PD")
	}
	if r.MR, err = r.PD.RegMR(buf, access); err != nil {
		return fail(err, "Couldn't register MR")
	}
	if r.CQ, err = dev.CreateCQ(cqe, r.Ch); err != nil {
		return fail(err, "Couldn't create CQ")
	}
	return nil
}

// Close destroys qps, then the SRQ, the CQ, the MR, the PD and the
// channel: what exists of them.
func (r *Resources) Close(qps ...*verbs.QP) {
	for _, qp := range qps {
		if qp != nil {
			qp.Destroy()
		}
	}
	if r.SRQ != nil {
		r.SRQ.Destroy()
	}
	if r.CQ != nil {
		r.CQ.Destroy()
	}
	if r.MR != nil {
		r.MR.Dereg()
	}
	if r.PD != nil {
		r.PD.Dealloc()
	}
	if r.Ch != nil {
		r.Ch.Close()
	}
}

// pp is what the contexts of rc_pingpong, uc_pingpong, ud_pingpong and
// srq_pingpong share besides their resources: the run's options and
// environment, the send flags, the sgid index, and the receives posted.
type pp struct {
	Resources
	cfg       *Config
	env       *toolnic.Env
	sendFlags ibv.SendFlags
	sgid      int
	routs     int // receives posted and not completed
}

// start is what main does between pp_init_ctx and the exchange: RxDepth
// receives posted (postRecv posts up to n and returns how many it
// posted), the CQ armed under -e, and the LID and the GID to advertise.
func (p *pp) start(postRecv func(n int) int) (lid uint16, gid verbs.GID, err error) {
	cfg, env := p.cfg, p.env
	if p.routs = postRecv(cfg.RxDepth); p.routs < cfg.RxDepth {
		return 0, gid, fail(nil, "Couldn't post receive (%d)", p.routs)
	}
	if cfg.Events {
		if err := p.CQ.ReqNotify(false); err != nil {
			return 0, gid, fail(err, "Couldn't request CQ notification")
		}
	}
	port, err := env.Dev.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return 0, gid, fail(err, "Couldn't get port info")
	}
	gid, p.sgid, err = localGID(cfg, env)
	return port.LID, gid, err
}

// connectPeer exchanges the addresses my with the peer (a server
// connects its QPs, connect, before it answers; a client after the
// exchange) and prints the first shown of the peer's. It returns the
// peer's addresses and whether this side is the client.
func (p *pp) connectPeer(ctx context.Context, my []Dest, shown int, connect func(rem []Dest) error) ([]Dest, bool, error) {
	rem, err := exchange(ctx, p.cfg, p.env, my, connect)
	if err != nil {
		return nil, false, err
	}
	for _, d := range rem[:shown] {
		fmt.Fprint(p.env.Out, AddressLine(false, d, false))
	}
	client := p.cfg.ServerName != ""
	if client {
		if err := connect(rem); err != nil {
			return nil, client, err
		}
	}
	return rem, client, nil
}

// wait returns the next completions of the main loop: under -e after a
// completion event (ibv_get_cq_event, ibv_req_notify_cq, ibv_poll_cq),
// else from w's poll. The counts of sends and receives name how far the
// run got when nothing came.
func (p *pp) wait(ctx context.Context, w *toolnic.Waiter, wc []ibv.WorkCompletion, sent, received int) (int, error) {
	if !p.cfg.Events {
		n, err := w.Poll(ctx, wc)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fail(err, "poll CQ failed (sent %d, received %d of %d)", sent, received, p.cfg.Iters)
		}
		return n, nil
	}
	ectx, cancel := context.WithTimeout(ctx, p.env.Stall)
	_, err := p.Ch.GetEvent(ectx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = &toolnic.ErrStall{What: "completion event", After: p.env.Stall}
		}
		return 0, fail(err, "Failed to get cq_event")
	}
	if err := p.CQ.ReqNotify(false); err != nil {
		return 0, fail(err, "Couldn't request CQ notification")
	}
	return p.CQ.Poll(wc), nil
}

// finish prints the result lines of the run that started at start and,
// on a server under -c, the pages that failed the check (bad finds
// them) and the check's error.
func (p *pp) finish(res *Result, start time.Time, client bool, bad func() []int) (*Result, error) {
	cfg, env := p.cfg, p.env
	res.Elapsed = time.Since(start)
	fmt.Fprint(env.Out, ResultLines(cfg.Size, cfg.Iters, Usec(res.Elapsed)))
	if client || !cfg.Check {
		return res, nil
	}
	res.Checked = true
	res.BadPages = bad()
	for _, pg := range res.BadPages {
		fmt.Fprint(env.Out, InvalidPageLine(pg))
	}
	if len(res.BadPages) > 0 {
		return res, fail(ErrBadData, "%d of %d pages failed the check", len(res.BadPages), (cfg.Size+env.PageSize-1)/env.PageSize)
	}
	return res, nil
}
