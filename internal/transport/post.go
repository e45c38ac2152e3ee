package transport

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// SendQueue is a transport's send queue as SendPost reads it. Its
// methods are called with the QP's lock held.
type SendQueue interface {
	// PostState returns the QP's state.
	PostState() ibv.QPState
	// Free returns the free slots of the send queue, Size its capacity.
	Free() int
	Size() int
	// FlushPosted completes every queued WR with WR_FLUSH_ERR.
	FlushPosted()
}

// SendPost is one ibv_post_send through the path every QP type shares:
// the QP-state rule, the order of the checks, the index of the first WR
// refused, the full send queue, all-or-nothing batches and the flush of
// WRs posted in ERR or SQE. The transport drives it as a loop, with the
// QP's lock held, making each step Next asks for by its own rules (which
// opcodes its QP type takes, what a WQE holds), as bufio.Scanner's
// caller takes each token:
//
//	p := transport.SendPost{SQ: sq, N: len(wrs), All: all}
//	for p.Next() {
//		switch p.Step {
//		case transport.CheckWR:
//			p.Err = check(&wrs[p.WR])
//		case transport.QueueWR:
//			p.Err = enqueue(&wrs[p.WR])
//		}
//	}
//	// p.Posted WRs are queued; p.Err says why no more.
//
// The transport calls its rules itself, in its own loop: through
// function values or an interface the WRs would escape, and every
// caller's slice (verbs.QP.PostSend's variadic WRs) would cost an
// allocation per post.
type SendPost struct {
	SQ SendQueue
	// N is the number of WRs posted. All posts all of them or, if one is
	// refused or the queue has no room for all, none (ibv_wr_complete
	// semantics: a full queue there is ENOSPC, rxe provider
	// wr_complete); without it the post stops at the first WR refused,
	// and those before it are queued (ibv_post_send).
	N   int
	All bool

	// Step is the step Next asks for, about WR number WR. Err is its
	// result, which the caller sets: CheckWR's refusal of the WR against
	// the QP type and its capabilities (CheckSendCaps), wrapping
	// errno.Invalid; QueueWR's failure to queue a WR CheckWR accepted,
	// only when its inline SGEs can no longer be read (InlineError), the
	// queue then unchanged.
	Step PostStep
	WR   int
	Err  error

	// Posted is the number of WRs queued once Next returns false, and
	// Err why the post stopped short of N: an error wrapping
	// errno.Invalid, errno.Full or ErrState (with All, WRs are queued
	// only once every check passed).
	Posted int

	phase postPhase
}

// PostStep is a step of SendPost.
type PostStep uint8

const (
	// CheckWR: validate WR p.WR.
	CheckWR PostStep = iota + 1
	// QueueWR: queue WR p.WR, which CheckWR accepted.
	QueueWR
)

// postPhase is where SendPost is: about to check the QP's state, at a
// check of every WR before any is queued (All), at a WR's check before
// it is queued, at its queueing, or done.
type postPhase uint8

const (
	phaseState postPhase = iota
	phaseCheckAll
	phaseCheck
	phaseQueue
	phaseDone
)

// Next takes the result of the step it asked for last, applies the
// shared rules, and reports whether the caller has a step to make
// (Step, WR): false once the post is over.
func (p *SendPost) Next() bool {
	switch p.phase {
	case phaseState:
		if err := CheckPostSendState(p.SQ.PostState()); err != nil {
			return p.stop(err)
		}
		if p.All {
			return p.ask(phaseCheckAll, CheckWR, 0)
		}
		return p.ask(phaseCheck, CheckWR, 0)
	case phaseCheckAll:
		if p.Err != nil {
			return p.stop(errno.Wrapf(p.Err, "WR %d", p.WR))
		}
		if p.WR+1 < p.N {
			return p.ask(phaseCheckAll, CheckWR, p.WR+1)
		}
		if free := p.SQ.Free(); p.N > free {
			return p.stop(fmt.Errorf("%w: %d WRs, room for %d", errno.Full, p.N, free))
		}
		return p.ask(phaseCheck, CheckWR, 0)
	case phaseCheck:
		if p.Err != nil {
			return p.stop(p.Err)
		}
		if p.SQ.Free() == 0 {
			return p.stop(fmt.Errorf("%w: send queue holds %d WRs", errno.Full, p.SQ.Size()))
		}
		return p.ask(phaseQueue, QueueWR, p.WR)
	case phaseQueue:
		if p.Err != nil {
			return p.stop(p.Err)
		}
		if s := p.SQ.PostState(); s == ibv.QPStateErr || s == ibv.QPStateSQE {
			// WRs posted in ERR or SQE complete at once with a flush
			// error (IBTA 10.8.3.3; ibv_post_send(3); the kernel's
			// ib_drain_qp relies on it).
			p.SQ.FlushPosted()
		}
		p.Posted = p.WR + 1
		return p.ask(phaseCheck, CheckWR, p.WR+1)
	}
	return false
}

// ask asks for step s on WR wr in phase ph, unless the post has no WR
// wr: then it is over.
func (p *SendPost) ask(ph postPhase, s PostStep, wr int) bool {
	if wr >= p.N {
		p.phase = phaseDone
		return false
	}
	p.phase, p.Step, p.WR = ph, s, wr
	return true
}

// stop ends the post with err.
func (p *SendPost) stop(err error) bool {
	p.phase, p.Err = phaseDone, err
	return false
}

// PostRun is what a post that queued posted WRs asks the engine to run:
// RunNone when it queued nothing; RunNow when now says the transport
// wants them sent on the posting goroutine; else RunLater.
func PostRun(posted int, now bool) Run {
	switch {
	case posted == 0:
		return RunNone
	case now:
		return RunNow
	}
	return RunLater
}

// CheckPostSendState refuses sends before RTS (ibv_post_send(3): the QP
// must be in RTS, or a later state whose WRs are queued or flushed).
func CheckPostSendState(s ibv.QPState) error {
	switch s {
	case ibv.QPStateReset, ibv.QPStateInit, ibv.QPStateRTR:
		return fmt.Errorf("%w: post send in state %v", ErrState, s)
	}
	return nil
}

// CheckSendCaps checks wr against the QP's capabilities, as every QP type
// does (ibv_post_send(3); rxe provider validate_send_wr): at most
// max_send_sge SGEs and, with IBV_SEND_INLINE, at most max_inline_data
// bytes unless inlineFree (an opcode whose bytes travel in the WQE). It
// returns the message length: the inline data's, else the SGEs' total.
// Inline data given by SGEs must still be readable: the caller checks
// them (mem.Table.CheckGather, reported with InlineError).
func CheckSendCaps(wr *ibv.SendWR, c *ibv.QPCap, inlineFree bool) (uint64, error) {
	if len(wr.SGList) > int(c.MaxSendSGE) {
		return 0, fmt.Errorf("%w: %d SGEs, QP max_send_sge %d", errno.Invalid, len(wr.SGList), c.MaxSendSGE)
	}
	n := uint64(0)
	if wr.Flags&ibv.SendInline != 0 && wr.InlineData != nil {
		n = uint64(len(wr.InlineData))
	} else {
		for _, s := range wr.SGList {
			n += uint64(s.Length)
		}
	}
	if wr.Flags&ibv.SendInline != 0 && !inlineFree && n > uint64(c.MaxInlineData) {
		return 0, fmt.Errorf("%w: %d inline bytes, QP max_inline_data %d", errno.Invalid, n, c.MaxInlineData)
	}
	return n, nil
}

// Signaled reports whether a send WR with flags completes with a work
// completion on success: every WR of a QP created with sq_sig_all, else
// those posted with IBV_SEND_SIGNALED (errors always complete).
func Signaled(sigAll bool, flags ibv.SendFlags) bool {
	return sigAll || flags&ibv.SendSignaled != 0
}
