package fabric

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/clock"
)

// defaultReorderTimeout is Impairment.ReorderTimeout's zero value, also
// used for the Reorder filter action.
const defaultReorderTimeout = time.Millisecond

// Impairment describes random faults on a path (netem-like). The
// probabilities are per datagram, in [0, 1]. Each datagram is, in order:
// lost with probability Loss; otherwise corrupted with probability Corrupt
// (one random bit of the UDP payload flipped, so the ICRC check fails);
// duplicated with probability Duplicate (the copy follows it at once);
// held back for reordering with probability Reorder; and delayed by Delay
// plus a uniformly random part of Jitter. Jitter alone can reorder
// datagrams.
type Impairment struct {
	Loss, Duplicate, Reorder, Corrupt float64
	Delay, Jitter                     time.Duration
	// ReorderTimeout bounds how long a datagram held back for reordering
	// waits, beyond its delay, for a later datagram on its path to
	// overtake it; then it is delivered anyway, never lost. Zero means 1ms.
	ReorderTimeout time.Duration
}

// impairment is an Impairment with its defaults applied.
type impairment struct {
	Impairment
	active bool // some fault is possible
}

// newImpairment returns imp with defaults applied; nil for a fabric-wide
// impairment that does nothing (a path's clean override is kept).
func newImpairment(imp Impairment, path bool) *impairment {
	imp.Delay = max(imp.Delay, 0)
	imp.Jitter = max(imp.Jitter, 0)
	if imp.ReorderTimeout <= 0 {
		imp.ReorderTimeout = defaultReorderTimeout
	}
	active := imp.Loss > 0 || imp.Duplicate > 0 || imp.Reorder > 0 || imp.Corrupt > 0 ||
		imp.Delay > 0 || imp.Jitter > 0
	if !active && !path {
		return nil
	}
	return &impairment{Impairment: imp, active: active}
}

type pathKey struct{ src, dst netip.Addr }

// path is the state of one directed path: the packet index, the seeded
// random source and the datagram held back for reordering.
type path struct {
	src, dst netip.Addr
	key      uint64                     // random key from the seed and the addresses
	next     atomic.Uint64              // index of the next datagram
	imp      atomic.Pointer[impairment] // nil: follow the fabric-wide impairment
	holding  atomic.Bool                // held != nil, for a lock-free check

	mu      sync.Mutex
	held    *frame // chain held back for reordering; guarded by mu
	holdGen uint64 // bumped whenever held changes hands; guarded by mu
}

func (p *path) impairment(f *Fabric) *impairment {
	if imp := p.imp.Load(); imp != nil {
		return imp
	}
	return f.imp.Load()
}

// Random draws. Every decision about a datagram is a pure function of the
// path key, the datagram's index on the path and the decision's slot, so
// it does not depend on what else the fabric carries or on how goroutines
// interleave, nor on which other impairments are enabled.
const (
	slotLoss = iota
	slotCorrupt
	slotCorruptBit
	slotDuplicate
	slotReorder
	slotJitter
	slotMark // a Bottleneck's marking decision
)

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

func pathSeed(seed uint64, src, dst netip.Addr) uint64 {
	h := splitmix64(seed)
	for _, a := range [2]netip.Addr{src, dst} {
		b := a.As16()
		for i := 0; i < 16; i += 8 {
			var w uint64
			for _, c := range b[i : i+8] {
				w = w<<8 | uint64(c)
			}
			h = splitmix64(h ^ w)
		}
	}
	return h
}

// draw returns the random word for decision slot of datagram idx.
func (p *path) draw(idx, slot uint64) uint64 {
	return splitmix64(splitmix64(p.key^splitmix64(idx)) + slot)
}

// uniform returns a random float64 in [0, 1) for decision slot of datagram idx.
func (p *path) uniform(idx, slot uint64) float64 {
	return float64(p.draw(idx, slot)>>11) * 0x1p-53
}

// scheduler holds delayed datagrams in a deadline heap behind one clock
// timer (STYLE.md 9: timers only wake; no goroutine or timer per packet).
type scheduler struct {
	f      *Fabric
	fireFn func()

	mu      sync.Mutex
	h       []delayed   // min-heap by (due, seq); guarded by mu
	seq     uint64      // guarded by mu
	timer   clock.Timer // created on first use; guarded by mu
	armed   bool        // timer set for armedAt; guarded by mu
	armedAt time.Time   // guarded by mu
	closed  bool        // guarded by mu
}

// delayed is a chain of frames due for delivery, or (fr nil) the timeout
// of a datagram held for reordering on path p with generation gen.
type delayed struct {
	due time.Time
	seq uint64
	fr  *frame
	p   *path
	gen uint64
}

func (s *scheduler) init(f *Fabric) {
	s.f = f
	s.fireFn = s.fire
}

func (a *delayed) before(b *delayed) bool {
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}

// add schedules fr (or a reorder timeout for p) at due.
func (s *scheduler) add(due time.Time, fr *frame, p *path, gen uint64) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.f.freeChain(fr)
		return
	}
	s.h = append(s.h, delayed{due: due, seq: s.seq, fr: fr, p: p, gen: gen})
	s.seq++
	s.up(len(s.h) - 1)
	if !s.armed || due.Before(s.armedAt) {
		s.armLocked(due)
	}
	s.mu.Unlock()
}

func (s *scheduler) armLocked(due time.Time) {
	d := due.Sub(s.f.clk.Now())
	if s.timer == nil {
		s.timer = s.f.clk.AfterFunc(d, s.fireFn)
	} else {
		s.timer.Reset(d)
	}
	s.armed = true
	s.armedAt = due
}

// fire delivers everything due, one entry at a time without the lock, and
// re-arms the timer for the rest.
func (s *scheduler) fire() {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		if len(s.h) == 0 {
			s.armed = false
			s.mu.Unlock()
			return
		}
		if s.h[0].due.After(s.f.clk.Now()) {
			s.armLocked(s.h[0].due)
			s.mu.Unlock()
			return
		}
		e := s.pop()
		s.mu.Unlock()
		if e.fr != nil {
			s.f.deliverChain(e.fr, nil)
			continue
		}
		p := e.p
		p.mu.Lock()
		var held *frame
		if p.holdGen == e.gen {
			held = p.held
			p.held = nil
			p.holdGen++
			p.holding.Store(false)
		}
		p.mu.Unlock()
		s.f.deliverChain(held, nil)
	}
}

// close stops the timer and frees every frame still scheduled.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	h := s.h
	s.h = nil
	s.mu.Unlock()
	for _, e := range h {
		s.f.freeChain(e.fr)
	}
}

func (s *scheduler) up(i int) {
	h := s.h
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(&h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (s *scheduler) pop() delayed {
	h := s.h
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = delayed{}
	h = h[:n]
	s.h = h
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].before(&h[m]) {
			m = l
		}
		if r < n && h[r].before(&h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}
