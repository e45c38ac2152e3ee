package transport

import (
	"fmt"
	"sync"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
)

// SendPost is the ibv_post_send path every QP type shares: the QP-state
// rule, the order of the checks, the index of the first WR refused, the
// full send queue, all-or-nothing batches and the flush of WRs posted in
// ERR or SQE. A transport fills in its own rules (which opcodes its QP
// type takes, what a WQE holds) as the functions below, each about WR i
// of the batch, and calls Post or PostAll with the QP's lock, which they
// hold around every function but OnAsync and Wake.
//
// The functions take an index rather than a *SendWR: a pointer passed to
// a function value escapes, and so would every caller's WR slice, at an
// allocation per post.
type SendPost struct {
	// State returns the QP's state.
	State func() ibv.QPState
	// Check validates WR i against the QP type and the QP's capabilities
	// (CheckSendCaps); its error wraps errno.Invalid.
	Check func(i int) error
	// Free returns the free slots of the send queue; Size its capacity.
	Free func() int
	Size int
	// Enqueue queues WR i, which Check accepted. It fails only when the
	// WR's inline SGEs can no longer be read (InlineError); the queue is
	// then unchanged.
	Enqueue func(i int) error
	// Flush completes every queued WR with WR_FLUSH_ERR.
	Flush func()
	// Events are the QP's queued events, reported to OnAsync once the
	// lock is released (Flush raises some); Wake runs after a post that
	// queued WRs.
	Events  *EventQueue
	OnAsync func(ibv.AsyncEventType)
	Wake    func()
	// Idle, when set, reports with the lock held whether the send queue
	// holds nothing, before the post queues its WRs; a post to an idle
	// queue calls Kick instead of Wake: it runs the transport on the
	// posting goroutine, so the WRs leave before the post returns. A post
	// to a queue with work outstanding joins it and leaves the sending
	// to the engine, which sends the backlog in batches (one sendmmsg for
	// many WRs rather than one per post).
	Idle func() bool
	Kick func()
}

// Post queues WRs 0..n-1 in order (ibv_post_send). It stops at the first
// WR it refuses and returns its index with an error wrapping errno.Invalid,
// errno.Full or ErrState; the WRs before it are posted. (mu is not a field:
// what a field of p points to would escape with the mutex.)
func (p *SendPost) Post(mu *sync.Mutex, n int) (int, error) {
	mu.Lock()
	idle := p.Idle != nil && p.Idle()
	i, err := p.postLocked(n)
	mu.Unlock()
	p.done(mu, i > 0, idle)
	return i, err
}

// PostAll posts all n WRs or, if any is refused or the send queue has no
// room for all of them, none (ibv_wr_complete semantics: a full queue
// there is ENOSPC, rxe provider wr_complete).
func (p *SendPost) PostAll(mu *sync.Mutex, n int) error {
	mu.Lock()
	idle := p.Idle != nil && p.Idle()
	err := p.checkAllLocked(n)
	if err == nil {
		_, err = p.postLocked(n)
	}
	mu.Unlock()
	p.done(mu, err == nil && n > 0, idle)
	return err
}

func (p *SendPost) done(mu *sync.Mutex, posted, idle bool) {
	p.Events.Deliver(mu, p.OnAsync)
	switch {
	case !posted:
	case idle && p.Kick != nil:
		p.Kick()
	default:
		p.Wake()
	}
}

func (p *SendPost) checkAllLocked(n int) error {
	if err := CheckPostSendState(p.State()); err != nil {
		return err
	}
	for i := range n {
		if err := p.Check(i); err != nil {
			return errno.Wrapf(err, "WR %d", i)
		}
	}
	if free := p.Free(); n > free {
		return fmt.Errorf("%w: %d WRs, room for %d", errno.Full, n, free)
	}
	return nil
}

func (p *SendPost) postLocked(n int) (int, error) {
	if err := CheckPostSendState(p.State()); err != nil {
		return 0, err
	}
	for i := range n {
		if err := p.Check(i); err != nil {
			return i, err
		}
		if p.Free() == 0 {
			return i, fmt.Errorf("%w: send queue holds %d WRs", errno.Full, p.Size)
		}
		if err := p.Enqueue(i); err != nil {
			return i, err
		}
		if s := p.State(); s == ibv.QPStateErr || s == ibv.QPStateSQE {
			// WRs posted in ERR or SQE complete at once with a flush
			// error (IBTA 10.8.3.3; ibv_post_send(3); the kernel's
			// ib_drain_qp relies on it).
			p.Flush()
		}
	}
	return n, nil
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
