package perftest

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/softnic/softnic/internal/toolnic"
	"github.com/softnic/softnic/verbs"
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
	x.flags = verbs.SendSignaled
	if size <= r.inline {
		x.flags |= verbs.SendInline
	}
	post := r.localBase(0) + size - 1
	poll := r.remoteBase(0) + size - 1
	posted := make([]int64, max(iters, 1))
	var scnt, ccnt, rcnt, sampled uint64
	wc := make([]verbs.WorkCompletion, 1)
	for scnt < iters || ccnt < iters || rcnt < iters || (d.on && d.state(s.clk) != stEnd) {
		if (rcnt < iters || d.on) && !(scnt < 1 && cfg.Server()) {
			rcnt++
			if err := s.awaitByte(ctx, x, poll, byte(rcnt), d); err != nil {
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
				if wc[0].Status != verbs.WCSuccess {
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

// probeWRID marks write_lat's liveness probes; the tool's own WRs carry
// their QP's index.
const probeWRID = ^uint64(0)

// awaitByte waits until buf[off] holds v, or the duration run ends.
//
// While it waits the side has nothing in flight, so its transport could
// never notice that the peer died. When the peer's WRITE is later than
// one local ACK timeout, awaitByte sends a probe on x's QP: a signaled
// zero-length RDMA WRITE to the peer's buffer, which places no data (IBTA
// 9.4.3: a zero-length WRITE has no memory access) and needs no receive.
// A live peer's NIC acknowledges it and the wait goes on (with a new
// probe after each further timeout); a dead peer's is retried retry_cnt
// times and fails with RETRY_EXC_ERR, and awaitByte reports that. The C
// write_lat sends no probes and waits for ever. awaitByte returns with
// no probe outstanding, so the send queue has room for the next WRITE.
func (s *session) awaitByte(ctx context.Context, x *wqe, off int, v byte, d *duration) error {
	start := time.Now()
	spin := 0
	var ack time.Duration // the local ACK timeout; 0: no probes (UC, timeout 0)
	if toolnic.RetryBound(x.qp) > 0 {
		attr, _ := x.qp.Query()
		ack = time.Duration(4096<<attr.Timeout) * time.Nanosecond
	}
	nextProbe := start.Add(ack)
	probing := false
	wc := make([]verbs.WorkCompletion, 1)
	probeDone := func(c verbs.WorkCompletion) error {
		if c.Status != verbs.WCSuccess {
			return s.compErr(s.result.Side, c, 0, 0)
		}
		probing = false
		nextProbe = time.Now().Add(ack)
		return nil
	}
	for peek(s.res.buf, off) != v {
		if d.on && d.state(s.clk) == stEnd {
			break
		}
		if spin++; spin < 1000 {
			runtime.Gosched()
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(start) > s.env.Stall {
			return fmt.Errorf("timeout: the peer's RDMA WRITE did not arrive within %v", s.env.Stall)
		}
		if probing {
			if s.res.sendCQ.Poll(wc) > 0 {
				if err := probeDone(wc[0]); err != nil {
					return err
				}
			}
		} else if ack > 0 && time.Now().After(nextProbe) {
			if _, err := x.qp.PostSend(verbs.SendWR{WRID: probeWRID, Opcode: verbs.WRRDMAWrite,
				Flags: verbs.SendSignaled, RemoteAddr: x.remBase, RKey: x.rkey}); err != nil {
				return fmt.Errorf("Couldn't post a probe: %w", err)
			}
			probing = true
		}
		time.Sleep(20 * time.Microsecond)
	}
	for probing {
		n, err := waitCQ(ctx, s.res.sendCQ, s.res.sendCh, false, s.env.Stall, 0, wc)
		if err != nil {
			return err
		}
		if n > 0 {
			if err := probeDone(wc[0]); err != nil {
				return err
			}
		}
	}
	return nil
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
	x.flags = verbs.SendSignaled
	posted := make([]int64, max(iters, 1))
	var scnt, sampled uint64
	wc := make([]verbs.WorkCompletion, 1)
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
				if wc[0].Status != verbs.WCSuccess {
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
		x.flags |= verbs.SendInline
	}
	posted := make([]int64, max(iters, 1))
	var scnt, rcnt, sampled uint64
	wc := make([]verbs.WorkCompletion, 1)
	cqMod := uint64(cfg.CQMod)
	for scnt < iters || rcnt < iters || (d.on && d.state(s.clk) != stEnd) {
		if (rcnt < iters || d.on) && !(scnt < 1 && !cfg.Server()) {
			for {
				if d.on && d.state(s.clk) == stEnd {
					break
				}
				var maxWait time.Duration
				if d.on {
					maxWait = d.next() + time.Millisecond
				}
				n, err := waitCQ(ctx, r.recvCQ, r.recvCh, cfg.Events, s.env.Stall, maxWait, wc)
				if err != nil {
					return LatResult{}, fmt.Errorf("%w (received %d)", err, rcnt)
				}
				if n == 0 {
					continue
				}
				if wc[0].Status != verbs.WCSuccess {
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
				x.flags |= verbs.SendSignaled
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
						if wc[0].Status != verbs.WCSuccess {
							return LatResult{}, s.compErr("client", wc[0], scnt, scnt)
						}
						break
					}
				}
				x.flags &^= verbs.SendSignaled
			}
			s.prog.done.Add(1)
		}
	}
	return s.latResult(posted, sampled, d, size), nil
}
