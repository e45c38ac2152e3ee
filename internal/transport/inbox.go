package transport

import (
	"slices"
	"sync"
)

// InboxLen bounds the packets queued for one QP; the engine drops and
// counts what does not fit (STYLE.md 12).
const InboxLen = 1024

// Inbox is a QP's queue of received packets: the receive goroutine adds,
// the QP's processor takes them in batches. It owns the packets it holds.
type Inbox struct {
	mu sync.Mutex
	q  []*RxPacket // guarded by mu
}

// Add queues p and reports whether there was room (the caller keeps p
// when there was not).
func (in *Inbox) Add(p *RxPacket) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.q) >= InboxLen {
		return false
	}
	in.q = append(in.q, p)
	return true
}

// Take moves up to n of the oldest packets to the end of batch and
// returns it; the caller owns them.
func (in *Inbox) Take(batch []*RxPacket, n int) []*RxPacket {
	in.mu.Lock()
	defer in.mu.Unlock()
	n = min(n, len(in.q))
	batch = append(batch, in.q[:n]...)
	rest := copy(in.q, in.q[n:])
	clear(in.q[rest:])
	in.q = in.q[:rest]
	return batch
}

// PutBack returns ps, taken but not processed, to the front of the inbox
// in their order, and clears ps.
func (in *Inbox) PutBack(ps []*RxPacket) {
	in.mu.Lock()
	in.q = slices.Insert(in.q, 0, ps...)
	in.mu.Unlock()
	clear(ps)
}

// Empty reports whether nothing is queued.
func (in *Inbox) Empty() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.q) == 0
}

// Release releases every queued packet (QP reset or destroy).
func (in *Inbox) Release() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, p := range in.q {
		p.Release()
	}
	clear(in.q)
	in.q = in.q[:0]
}
