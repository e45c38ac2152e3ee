package perftest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// clock gives perftest's "cycles": nanoseconds since the run began.
type clock struct{ t0 time.Time }

func (c clock) now() int64 { return int64(time.Since(c.t0)) }

// durState is the duration state machine (catch_alarm): START for the
// margin, SAMPLE until the last margin, STOP_SAMPLE, then END.
type durState int

const (
	stStart durState = iota
	stSample
	stStopSample
	stEnd
)

type duration struct {
	on                   bool
	start                time.Time
	margin, total        time.Duration
	sampleFrom, sampleTo int64 // tposted[0], tcompleted[0]
	seen                 durState
}

func newDuration(c *Config, clk clock) *duration {
	return &duration{on: c.Duration > 0, start: time.Now(), margin: c.Margin, total: c.Duration}
}

// state returns the current state, noting the sample window's ends.
func (d *duration) state(clk clock) durState {
	if !d.on {
		return stStart
	}
	t := time.Since(d.start)
	s := stStart
	switch {
	case t >= d.total:
		s = stEnd
	case t >= d.total-d.margin:
		s = stStopSample
	case t >= d.margin:
		s = stSample
	}
	if s >= stSample && d.seen < stSample {
		d.sampleFrom = clk.now()
	}
	if s >= stStopSample && d.seen < stStopSample {
		d.sampleTo = clk.now()
	}
	d.seen = s
	return s
}

// next returns how long until the next state change.
func (d *duration) next() time.Duration {
	t := time.Since(d.start)
	for _, e := range []time.Duration{d.margin, d.total - d.margin, d.total} {
		if t < e {
			return e - t
		}
	}
	return 0
}

// waitCQ waits for completions on cq, with the -e semantics when events
// is set (ctx_notify_events: get the event, re-arm, poll), bounded by
// stall, and by max when it is positive (duration runs re-check their
// state).
func waitCQ(ctx context.Context, cq *verbs.CQ, ch *verbs.CompChannel, events bool, stall, maxWait time.Duration, wc []ibv.WorkCompletion) (int, error) {
	if events {
		_, err := ch.GetEventTimeout(ctx, stall)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("Failed to get cq_event: %w", &toolnic.ErrStall{What: "completion event", After: stall})
		}
		if err := cq.ReqNotify(false); err != nil {
			return 0, fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
		return cq.Poll(wc), nil
	}
	if maxWait > 0 && maxWait < stall {
		w := toolnic.Waiter{CQ: cq, Ch: ch, Stall: maxWait}
		n, err := w.Poll(ctx, wc)
		if _, ok := errors.AsType[*toolnic.ErrStall](err); ok {
			return 0, nil // the state deadline passed, or a probe is due
		}
		return n, err
	}
	w := toolnic.Waiter{CQ: cq, Ch: ch, Stall: stall}
	return w.Poll(ctx, wc)
}

// compErr is perftest's report of a failed send completion (after
// poll_cq in run_iter_bw and the latency loops), with what it means
// when the transport gave up on the peer (see wcErr).
func (s *session) compErr(where string, c ibv.WorkCompletion, a, b uint64) error {
	return s.wcErr(fmt.Sprintf(" Completion with error at %s:\n Failed status %d: wr_id %d syndrom 0x%x\n scnt=%d, ccnt=%d (%s)",
		where, c.Status, int(c.WRID), c.VendorErr, a, b, c.Status), c)
}

// recvErr is perftest's report of a failed receive completion (its
// wording says "server" on both sides, as the C tool's does).
func (s *session) recvErr(c ibv.WorkCompletion, rcnt uint64) error {
	return s.wcErr(fmt.Sprintf(" Completion with error at server\n Failed status %d: wr_id %d syndrom 0x%x\n rcnt=%d (%s)",
		c.Status, int(c.WRID), c.VendorErr, rcnt, c.Status), c)
}

// wcErr is the error of the failed completion c that perftest reports
// as text. When the transport gave up on the peer (RETRY_EXC_ERR,
// RNR_RETRY_EXC_ERR; for a flushed WR, such a completion found on the
// CQs, where the one that moved the QP to ERR came first), a last line
// says so: "peer stopped answering: transport retry counter exceeded
// after 7 retries" (errors.As finds the *toolnic.ErrRetryExceeded).
func (s *session) wcErr(text string, c ibv.WorkCompletion) error {
	pe := toolnic.PeerError(c, s.res.qps...)
	if pe == nil && c.Status == ibv.WCWRFlushErr {
		pe = toolnic.FindPeerError(s.res.cqs(), s.res.qps)
	}
	if pe == nil {
		return errors.New(text)
	}
	return fmt.Errorf("%s\n%w", text, pe)
}

// bwClient is run_iter_bw: post up to tx_depth WRs per QP with CQ
// moderation, poll the send CQ, timestamp posts and completions.
func (s *session) bwClient(ctx context.Context, wq []*wqe, size int) (BWTimes, uint64, error) {
	cfg, r := s.cfg, s.res
	nqp := len(wq)
	iters := uint64(cfg.Iters)
	dur := newDuration(cfg, s.clk)
	if dur.on {
		iters = 0
	}
	tot := iters * uint64(nqp)
	var t BWTimes
	if cfg.NoPeak {
		t.Posted, t.Completed = make([]int64, 1), make([]int64, 1)
	} else {
		t.Posted, t.Completed = make([]int64, tot), make([]int64, tot)
	}
	scnt := make([]uint64, nqp)
	ccnt := make([]uint64, nqp)
	var totS, totC, sampled uint64
	cqMod := uint64(cfg.CQMod)
	if !dur.on && cfg.NoPeak {
		t.Posted[0] = s.clk.now()
	}
	wc := make([]ibv.WorkCompletion, 16)
	for {
		st := dur.state(s.clk)
		if !(totS < tot || totC < tot || (dur.on && st != stEnd)) {
			break
		}
		posted := false
		for i, x := range wq {
			for (dur.on || scnt[i] < iters) && scnt[i]-ccnt[i]+1 <= uint64(cfg.TxDepth) {
				if cqMod > 1 && scnt[i]%cqMod == 0 && !(!dur.on && scnt[i] == iters-1) {
					x.flags &^= ibv.SendSignaled
				}
				if !cfg.NoPeak {
					t.Posted[totS] = s.clk.now()
				}
				if dur.on && dur.state(s.clk) == stEnd {
					break
				}
				if err := r.post(x); err != nil {
					return t, 0, fmt.Errorf("Couldn't post send: qp %d scnt=%d: %w", i, scnt[i], err)
				}
				posted = true
				if size <= r.cycle/2 {
					r.advance(x, scnt[i], size)
				}
				scnt[i]++
				totS++
				if scnt[i]%cqMod == cqMod-1 || (!dur.on && scnt[i] == iters-1) {
					x.flags |= ibv.SendSignaled
				}
			}
		}
		if !(totC < tot || (dur.on && totC < totS)) {
			continue
		}
		var n int
		var err error
		full := true
		for i := range wq {
			if (dur.on || scnt[i] < iters) && scnt[i]-ccnt[i]+1 <= uint64(cfg.TxDepth) {
				full = false
			}
		}
		if posted && !full || cfg.Events && !full {
			n = r.sendCQ.Poll(wc)
		} else {
			var maxWait time.Duration
			if dur.on {
				maxWait = dur.next() + time.Millisecond
			}
			n, err = waitCQ(ctx, r.sendCQ, r.sendCh, cfg.Events, s.env.Stall, maxWait, wc)
			if err != nil {
				return t, 0, fmt.Errorf("%w (sent %d, completed %d)", err, totS, totC)
			}
		}
		for _, c := range wc[:n] {
			if c.Status != ibv.WCSuccess {
				return t, 0, s.compErr("client", c, totS, totC)
			}
			ccnt[c.WRID] += cqMod
			totC += cqMod
			s.prog.done.Add(cqMod)
			if !cfg.NoPeak {
				if totC > tot {
					t.Completed[tot-1] = s.clk.now()
				} else {
					t.Completed[totC-1] = s.clk.now()
				}
			}
			if dur.on && dur.seen == stSample {
				sampled += cqMod
			}
		}
	}
	if dur.on {
		t.Posted[0], t.Completed[0] = dur.sampleFrom, dur.sampleTo
		return t, sampled, nil
	}
	if cfg.NoPeak {
		t.Completed[0] = s.clk.now()
	}
	return t, tot, nil
}

// bwServer is run_iter_bw_server: receive iters messages per QP,
// reposting receives, timestamping the first arrival and the end.
func (s *session) bwServer(ctx context.Context, rq []*rwqe, size int) (BWTimes, uint64, error) {
	cfg, r := s.cfg, s.res
	nqp := len(rq)
	dur := newDuration(cfg, s.clk)
	iters := uint64(cfg.Iters)
	tot := iters * uint64(nqp)
	if dur.on {
		tot = 0
	}
	t := BWTimes{Posted: make([]int64, 1), Completed: make([]int64, 1)}
	posted := make([]uint64, nqp)
	for i := range posted {
		posted[i] = uint64(cfg.RxDepth)
	}
	var rcnt, sampled uint64
	first := true
	wc := make([]ibv.WorkCompletion, 16)
	for rcnt < tot || (dur.on && dur.state(s.clk) != stEnd) {
		var maxWait time.Duration
		if dur.on {
			maxWait = dur.next() + time.Millisecond
		}
		n, err := waitCQ(ctx, r.recvCQ, r.recvCh, cfg.Events, s.env.Stall, maxWait, wc)
		if err != nil {
			return t, 0, fmt.Errorf("%w (received %d of %d)", err, rcnt, tot)
		}
		for ; n > 0; n = r.recvCQ.Poll(wc) {
			if first {
				first = false
				if !dur.on {
					t.Posted[0] = s.clk.now()
				}
			}
			for _, c := range wc[:n] {
				if c.Status != ibv.WCSuccess {
					return t, 0, s.recvErr(c, rcnt)
				}
				i := c.WRID
				rcnt++
				s.prog.done.Add(1)
				if dur.on && dur.state(s.clk) == stSample {
					sampled++
				}
				if dur.on || posted[i]+1 <= iters {
					x := rq[i]
					if err := r.postRecv(x, int(i)); err != nil {
						return t, 0, fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %w", i, rcnt, err)
					}
					posted[i]++
					sz := size
					if cfg.Conn == UD {
						sz += UDAddition
					}
					if sz <= r.cycle/2 {
						r.advanceRecv(x, posted[i], size)
					}
				}
			}
		}
	}
	if dur.on {
		t.Posted[0], t.Completed[0] = dur.sampleFrom, dur.sampleTo
		return t, sampled, nil
	}
	t.Completed[0] = s.clk.now()
	return t, tot, nil
}
