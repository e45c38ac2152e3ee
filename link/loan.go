package link

// A lent receive buffer (Datagram.Loan, the Lender capability): its
// references and the pool it returns to.

import (
	"sync"
	"sync/atomic"
)

// Loan is a link's receive buffer lent out with the datagrams handed over
// in it (Datagram.Loan). Each such datagram holds one reference, which
// its consumer gives back with Release once done with the datagram's
// Buf; the link reuses the buffer only when none is held, and takes
// another for its next read while any is.
type Loan struct {
	buf []byte
	// state: the references held (low bits), and loanDetached once the
	// link has let go of the buffer with references held, after which
	// the last Release returns it to pool. Only the link adds references,
	// and only while it holds the buffer.
	state    atomic.Int32
	pool     *sync.Pool
	released *atomic.Uint64 // counts Release calls (UDPStats.RxLentReleased)
}

const loanDetached = 1 << 30

// newLoanPool returns a pool of loans with buffers of n bytes, whose
// releases are counted in released.
func newLoanPool(n int, released *atomic.Uint64) *sync.Pool {
	p := new(sync.Pool)
	p.New = func() any { return &Loan{buf: make([]byte, n), pool: p, released: released} }
	return p
}

// Release gives back the reference of one datagram handed over in the
// loan; its Buf must not be used after.
func (l *Loan) Release() {
	l.released.Add(1)
	if l.state.Add(-1) == loanDetached {
		l.state.Store(0)
		l.pool.Put(l)
	}
}

// lend adds the reference of a datagram handed over in the loan.
func (l *Loan) lend() { l.state.Add(1) }

// keep reports whether the link can read into the loan's buffer again:
// no reference is held. Otherwise the loan is detached (its last Release
// returns it to the pool) and the link must take another.
func (l *Loan) keep() bool {
	if l.state.Add(loanDetached) == loanDetached {
		l.state.Store(0) // no reference: nobody else touches it
		return true
	}
	return false
}
