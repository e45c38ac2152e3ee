package nic

// The processors: the NIC's fixed pool of goroutines that run QP work
// the readers and posts leave (timers, work beyond a bounded pass, a read
// batch spread over many QPs, a busy send queue's backlog, UD sends),
// each QP pinned to one by a hash of its QPN (STYLE.md 8).

import (
	"sync"

	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/link"
)

// processor is one of the NIC's fixed pool of goroutines running QP work.
type processor struct {
	mu     sync.Mutex
	cond   sync.Cond
	queue  []*qpEntry // guarded by mu
	spare  []*qpEntry
	closed bool // guarded by mu
	out    txBatch
	// onActivity wakes a WaitActivity after a pass: leftovers of a
	// receive batch may have been handled here.
	onActivity func()
}

func newProcessor(lk link.Link, ctr *transport.Counters, ect bool, onActivity func()) *processor {
	p := &processor{onActivity: onActivity}
	p.cond.L = &p.mu
	p.out.init(lk, ctr, ect)
	return p
}

func (p *processor) push(e *qpEntry) {
	p.mu.Lock()
	p.queue = append(p.queue, e)
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *processor) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Signal()
}

func (p *processor) run() {
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		batch := p.queue
		p.queue = p.spare[:0]
		p.mu.Unlock()
		for _, e := range batch {
			// Clear before processing: a wake during Process re-queues.
			e.scheduled.Store(false)
			e.run(&p.out)
		}
		p.out.finish()
		p.onActivity()
		clear(batch)
		p.spare = batch
	}
}
