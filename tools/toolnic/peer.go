package toolnic

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// ErrRetryExceeded reports that the transport gave up on the peer: a
// work request completed with RETRY_EXC_ERR (nothing answered for
// retry_cnt retransmissions, each after the local ACK timeout: the peer
// is gone or unreachable) or RNR_RETRY_EXC_ERR (the peer answered "not
// ready" rnr_retry times in a row: it posts no receives).
type ErrRetryExceeded struct {
	RNR     bool  // the RNR retry counter, not the transport one
	Retries uint8 // the QP's retry_cnt (or rnr_retry)
}

func (e *ErrRetryExceeded) Error() string {
	if e.RNR {
		return fmt.Sprintf("peer not ready: RNR retry counter exceeded after %d retries", e.Retries)
	}
	return fmt.Sprintf("peer stopped answering: transport retry counter exceeded after %d retries", e.Retries)
}

// PeerError returns the *ErrRetryExceeded that a completion with status
// RETRY_EXC_ERR or RNR_RETRY_EXC_ERR means, with the counter of the QP
// among qps that c belongs to (the first one when none matches), or nil
// for any other status.
func PeerError(c ibv.WorkCompletion, qps ...*verbs.QP) error {
	if c.Status != ibv.WCRetryExcErr && c.Status != ibv.WCRNRRetryExcErr {
		return nil
	}
	var qp *verbs.QP
	for _, q := range qps {
		if q != nil && (qp == nil || q.QPN() == c.QPNum) {
			qp = q
		}
	}
	e := &ErrRetryExceeded{RNR: c.Status == ibv.WCRNRRetryExcErr}
	if qp != nil {
		attr, _ := qp.Query()
		e.Retries = attr.RetryCnt
		if e.RNR {
			e.Retries = attr.RNRRetry
		}
	}
	return e
}

// RetryBound is how long after its last progress an RC QP can take to
// declare its peer dead: (retry_cnt+1) local ACK timeouts of 4.096 µs ×
// 2^timeout each (IBTA 9.7.6.1.3; softnic's retry_cnt 7 is seven
// retries). It is 0 for a QP without a retransmit timer (timeout 0) or
// not RC.
func RetryBound(qp *verbs.QP) time.Duration {
	attr, init := qp.Query()
	if init.Type != ibv.QPTypeRC || attr.Timeout == 0 {
		return 0
	}
	return time.Duration(attr.RetryCnt+1) * (time.Duration(4096<<attr.Timeout) * time.Nanosecond)
}

// AwaitPeerError polls cqs for up to wait for a completion that says the
// transport gave up on the peer (PeerError), and returns that error, or
// nil when none came. A tool calls it when the peer's out-of-band
// connection broke while RDMA work may be in flight: the transport's
// verdict, which names what happened, wins over the socket's EOF.
// Completions it polls are consumed.
func AwaitPeerError(ctx context.Context, wait time.Duration, cqs []*verbs.CQ, qps []*verbs.QP) error {
	deadline := time.Now().Add(wait)
	wc := make([]ibv.WorkCompletion, 16)
	for {
		for _, cq := range cqs {
			if cq == nil {
				continue
			}
			for n := cq.Poll(wc); n > 0; n = cq.Poll(wc) {
				for _, c := range wc[:n] {
					if err := PeerError(c, qps...); err != nil {
						return err
					}
				}
			}
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
}

// FindPeerError is AwaitPeerError without waiting: it looks at what the
// CQs hold now. A tool calls it on a flushed completion (WR_FLUSH_ERR),
// whose cause - a send that exhausted its retries - is on a CQ already.
func FindPeerError(cqs []*verbs.CQ, qps []*verbs.QP) error {
	return AwaitPeerError(context.Background(), 0, cqs, qps)
}
