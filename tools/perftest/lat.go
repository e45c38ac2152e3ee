package perftest

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
)

// peek reads b[i] while the NIC may be writing it: write_lat polls memory
// the peer writes by RDMA WRITE, with no completion to order the read
// after the write. The C tool reads a volatile char; here the read is
// kept out of the race detector, which cannot know that the NIC's write
// and this read are meant to race, and the call keeps the compiler from
// hoisting the load out of the polling loop.
//
//go:norace
//go:noinline
func peek(b []byte, i int) byte { return b[i] }

// latResult turns a latency run's post times into its result.
func (s *session) latResult(posted []int64, n uint64, d *duration, size int) LatResult {
	if d.on {
		return ComputeLatDuration(s.cfg, n, d.sampleTo-d.sampleFrom, uint64(size))
	}
	return ComputeLat(s.cfg, posted, uint64(size))
}

// latWrite is run_iter_lat_write: each side writes a message whose last
// byte counts the iterations, and polls its own buffer for the peer's.
// The server writes first.
func (s *session) latWrite(ctx context.Context, x *wqe, size int) (LatResult, error) {
	cfg, r := s.cfg, s.res
	iters := uint64(cfg.Iters)
	d := newDuration(cfg, s.clk)
	if d.on {
		iters = 0
	}
	x.sge[0].Length = uint32(size)
	x.flags = ibv.SendSignaled
	if size <= r.inline {
		x.flags |= ibv.SendInline
	}
	post := r.localBase(0) + size - 1
	poll := r.remoteBase(0) + size - 1
	posted := make([]int64, max(iters, 1))
	var scnt, ccnt, rcnt, sampled uint64
	wc := make([]ibv.WorkCompletion, 1)
	pr := s.newProber(x)
	for scnt < iters || ccnt < iters || rcnt < iters || (d.on && d.state(s.clk) != stEnd) {
		if (rcnt < iters || d.on) && !(scnt < 1 && cfg.Server()) {
			rcnt++
			if err := s.awaitByte(ctx, pr, poll, byte(rcnt), d); err != nil {
				return LatResult{}, fmt.Errorf("%w (iteration %d)", err, rcnt)
			}
		}
		if scnt < iters || d.on {
			if !d.on {
				posted[scnt] = s.clk.now()
			}
			scnt++
			r.buf[post] = byte(scnt)
			if err := r.post(x); err != nil {
				return LatResult{}, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
		}
		if d.on && d.state(s.clk) == stEnd {
			break
		}
		if ccnt < iters || d.on {
			n, err := waitCQ(ctx, r.sendCQ, r.sendCh, false, s.env.Stall, 0, wc)
			if err != nil {
				return LatResult{}, err
			}
			if n > 0 {
				if wc[0].Status != ibv.WCSuccess {
					return LatResult{}, s.compErr("client", wc[0], scnt, ccnt)
				}
				ccnt++
				s.prog.done.Add(1)
				if d.on && d.seen == stSample {
					sampled++
				}
			}
		}
	}
	return s.latResult(posted, sampled, d, size), nil
}

// probeWRID marks the liveness probes; the tool's own WRs carry their
// QP's index.
const probeWRID = ^uint64(0)

// prober keeps a waiting side's transport informed about its peer.
//
// write_lat and send_lat wait for the peer's message with nothing of
// their own in flight, so their transport could never notice that the
// peer died. When the peer's message is later than one local ACK timeout,
// the waiting side sends a probe on its QP: a signaled zero-length RDMA
// WRITE, which places no data, needs no receive and has its R_Key left
// unchecked (C9-88; rxe_resp.c check_rkey and softnic's mem.Remote skip
// zero-length accesses); both tools' QPs allow remote writes. A live
// peer's NIC acknowledges it and the wait goes on, with a new probe after
// each further timeout; a dead peer's is retried retry_cnt times and
// fails with RETRY_EXC_ERR, which the wait reports. The C tools send no
// probes and wait for ever. No probe is sent with -e (the wait sleeps on
// the completion channel), on UC, or without a retransmit timer.
type prober struct {
	s    *session
	x    *wqe
	ack  time.Duration // the local ACK timeout; 0: no probes
	next time.Time     // when the next probe is due
	out  bool          // a probe awaits its completion
	wc   []ibv.WorkCompletion
}

// newProber makes a latency loop's prober, once: it is restarted at each
// wait (start), so that the wait for a message allocates nothing.
func (s *session) newProber(x *wqe) *prober {
	p := &prober{s: s, x: x, wc: make([]ibv.WorkCompletion, 1)}
	if toolnic.RetryBound(x.qp) > 0 && !s.cfg.Events {
		attr, _ := x.qp.Query()
		p.ack = time.Duration(4096<<attr.Timeout) * time.Nanosecond
	}
	return p
}

// start begins a wait: the first probe is due one local ACK timeout
// from now.
func (p *prober) start() { p.next = time.Now().Add(p.ack) }

// done handles the probe's completion.
func (p *prober) done(c ibv.WorkCompletion) error {
	if c.Status != ibv.WCSuccess {
		return p.s.compErr(p.s.result.Side, c, 0, 0)
	}
	p.out = false
	p.next = time.Now().Add(p.ack)
	return nil
}

// tick, called while the wait goes on, reaps the probe's completion or
// sends the next probe when it is due; it returns the transport's
// verdict on a dead peer. A probe that finds the send queue full is not
// needed: what fills it is in flight and gets a verdict of its own.
func (p *prober) tick() error {
	if p.ack == 0 {
		return nil
	}
	if p.out {
		if p.s.res.sendCQ.Poll(p.wc) > 0 {
			return p.done(p.wc[0])
		}
		return nil
	}
	if time.Now().Before(p.next) {
		return nil
	}
	if _, err := p.x.qp.PostSend(ibv.SendWR{WRID: probeWRID, Opcode: ibv.WRRDMAWrite,
		Flags: ibv.SendSignaled, RemoteAddr: p.x.remBase, RKey: p.x.rkey}); err != nil {
		p.next = time.Now().Add(p.ack)
		return nil
	}
	p.out = true
	return nil
}

// finish waits for an outstanding probe's completion, so that the send
// queue has room for the tool's next WR and the tool never polls the
// probe's completion as its own.
func (p *prober) finish(ctx context.Context) error {
	for p.out {
		n, err := waitCQ(ctx, p.s.res.sendCQ, p.s.res.sendCh, false, p.s.env.Stall, 0, p.wc)
		if err != nil {
			return err
		}
		if n > 0 {
			if err := p.done(p.wc[0]); err != nil {
				return err
			}
		}
	}
	return nil
}

// awaitSlice bounds each sleep of awaitByte: how often it looks at the
// stall timeout, the prober and the end of a timed run.
const awaitSlice = 10 * time.Millisecond

// awaitByte waits until buf[off] holds v, or the duration run ends,
// probing a silent peer (see prober).
//
// perftest spins on the byte, which a hardware NIC writes. softnic's
// receive goroutine writes it: with --busy-poll the loop reads the link
// itself (Device.Progress) and never waits for that goroutine; without,
// it sleeps until the device has handled received datagrams
// (Device.WaitActivity), so that the one CPU it would spin on is the
// receive goroutine's - on a 1-vCPU machine a spin starves the Go
// network poller that wakes that goroutine.
func (s *session) awaitByte(ctx context.Context, pr *prober, off int, v byte, d *duration) error {
	start := time.Now()
	spin := 0
	pr.start()
	dev := s.env.Dev
	busy := dev != nil && dev.BusyPoll() > 0
	arrived := func() bool { return peek(s.res.buf, off) == v }
	for !arrived() {
		if d.on && d.state(s.clk) == stEnd {
			break
		}
		if busy {
			dev.Progress()
			if spin++; spin%1024 != 0 {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(start) > s.env.Stall {
			return fmt.Errorf("timeout: the peer's RDMA WRITE did not arrive within %v", s.env.Stall)
		}
		if err := pr.tick(); err != nil {
			return err
		}
		switch {
		case busy:
		case dev != nil:
			// Wake at least every awaitSlice for the checks above.
			dev.WaitActivity(ctx, awaitSlice, arrived)
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
	return pr.finish(ctx)
}

// latClient is run_iter_lat (read_lat, atomic_lat): post one READ or
// atomic at a time and wait for its completion.
func (s *session) latClient(ctx context.Context, x *wqe, size int) (LatResult, error) {
	cfg, r := s.cfg, s.res
	iters := uint64(cfg.Iters)
	d := newDuration(cfg, s.clk)
	if d.on {
		iters = 0
	}
	x.sge[0].Length = uint32(size)
	x.flags = ibv.SendSignaled
	posted := make([]int64, max(iters, 1))
	var scnt, sampled uint64
	wc := make([]ibv.WorkCompletion, 1)
	for scnt < iters || (d.on && d.state(s.clk) != stEnd) {
		if !d.on {
			posted[scnt] = s.clk.now()
		}
		scnt++
		if err := r.post(x); err != nil {
			return LatResult{}, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
		}
		if d.on && d.state(s.clk) == stEnd {
			break
		}
		for {
			n, err := waitCQ(ctx, r.sendCQ, r.sendCh, cfg.Events, s.env.Stall, 0, wc)
			if err != nil {
				return LatResult{}, err
			}
			if n > 0 {
				if wc[0].Status != ibv.WCSuccess {
					return LatResult{}, s.compErr("client", wc[0], scnt, scnt)
				}
				s.prog.done.Add(1)
				if d.on && d.seen == stSample {
					sampled++
				}
				break
			}
		}
	}
	return s.latResult(posted, sampled, d, size), nil
}

// latSend is run_iter_lat_send: SEND ping-pong; the client sends first.
func (s *session) latSend(ctx context.Context, x *wqe, rq []*rwqe, size int) (LatResult, error) {
	cfg, r := s.cfg, s.res
	iters := uint64(cfg.Iters)
	d := newDuration(cfg, s.clk)
	if d.on {
		iters = 0
	}
	perQP := uint64(cfg.RxDepth)
	x.sge[0].Length = uint32(size)
	x.flags = 0
	if size <= r.inline {
		x.flags |= ibv.SendInline
	}
	posted := make([]int64, max(iters, 1))
	var scnt, rcnt, sampled uint64
	wc := make([]ibv.WorkCompletion, 1)
	cqMod := uint64(cfg.CQMod)
	pr := s.newProber(x)
	for scnt < iters || rcnt < iters || (d.on && d.state(s.clk) != stEnd) {
		if (rcnt < iters || d.on) && !(scnt < 1 && !cfg.Server()) {
			pr.start()
			start := time.Now()
			for {
				if d.on && d.state(s.clk) == stEnd {
					break
				}
				var maxWait time.Duration
				if d.on {
					maxWait = d.next() + time.Millisecond
				}
				if pr.ack > 0 && (maxWait == 0 || pr.ack < maxWait) {
					maxWait = pr.ack // wake up to probe a silent peer
				}
				n, err := 0, error(nil)
				if !cfg.Events {
					n = r.recvCQ.Poll(wc) // the common case, without a timer
				}
				if n == 0 {
					n, err = waitCQ(ctx, r.recvCQ, r.recvCh, cfg.Events, s.env.Stall, maxWait, wc)
				}
				if err != nil {
					return LatResult{}, fmt.Errorf("%w (received %d)", err, rcnt)
				}
				if n == 0 {
					if err := pr.tick(); err != nil {
						return LatResult{}, err
					}
					if time.Since(start) > s.env.Stall {
						return LatResult{}, fmt.Errorf("%w (received %d)", &toolnic.ErrStall{What: "work completion", After: s.env.Stall}, rcnt)
					}
					continue
				}
				if err := pr.finish(ctx); err != nil {
					return LatResult{}, err
				}
				if wc[0].Status != ibv.WCSuccess {
					return LatResult{}, s.recvErr(wc[0], rcnt)
				}
				rcnt++
				if d.on && d.seen == stSample {
					sampled++
				}
				if d.on || rcnt+perQP <= iters {
					q := rq[wc[0].WRID]
					if err := r.postRecv(q, int(wc[0].WRID)); err != nil {
						return LatResult{}, fmt.Errorf("Couldn't post recv: rcnt=%d: %w", rcnt, err)
					}
				}
				break
			}
		}
		if scnt < iters || (d.on && d.state(s.clk) != stEnd) {
			if !d.on {
				posted[scnt] = s.clk.now()
			}
			scnt++
			poll := false
			if scnt%cqMod == 0 || (!d.on && scnt == iters) {
				poll = true
				x.flags |= ibv.SendSignaled
			}
			if d.on && d.state(s.clk) == stEnd {
				break
			}
			if err := r.post(x); err != nil {
				return LatResult{}, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
			if poll {
				for {
					n, err := waitCQ(ctx, r.sendCQ, r.sendCh, cfg.Events, s.env.Stall, 0, wc)
					if err != nil {
						return LatResult{}, err
					}
					if n > 0 {
						if wc[0].Status != ibv.WCSuccess {
							return LatResult{}, s.compErr("client", wc[0], scnt, scnt)
						}
						break
					}
				}
				x.flags &^= ibv.SendSignaled
			}
			s.prog.done.Add(1)
		}
	}
	return s.latResult(posted, sampled, d, size), nil
}
