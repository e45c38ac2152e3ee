package rc

// The completer's record of responses received ahead of the oldest one
// still missing (completer.ahead): a ring of bits, one per PSN of a
// window that starts at the completer's PSN.

import (
	"math/bits"

	"github.com/softnic/softnic/wire"
)

// aheadWindow is how many PSNs past the oldest unanswered one the
// completer keeps responses for; a response beyond it is dropped and
// asked again later. It covers the requester's window (MaxUnackedPSNs)
// and a READ of several MiB at the smallest path MTU that starts inside
// it.
const aheadWindow = 1 << 13

// aheadSet is a set of PSNs within aheadWindow of a base PSN, the
// completer's: bit psn mod aheadWindow. The base is passed to has and
// next, which see only the window that starts there; del clears a PSN
// once the base has moved past it, so the ring's bits never stand for
// two PSNs at once.
type aheadSet struct {
	bits [aheadWindow / 64]uint64
	n    int // PSNs in the set
}

// empty reports whether the set holds no PSN.
func (s *aheadSet) empty() bool { return s.n == 0 }

func (s *aheadSet) index(psn wire.PSN) (int, uint64) {
	n := uint32(psn) % aheadWindow
	return int(n / 64), 1 << (n % 64)
}

// has reports whether psn, in the window from base, is in the set.
func (s *aheadSet) has(base, psn wire.PSN) bool {
	if psn.Before(base) || psn.Diff(base) >= aheadWindow {
		return false
	}
	w, b := s.index(psn)
	return s.bits[w]&b != 0
}

func (s *aheadSet) add(psn wire.PSN) {
	w, b := s.index(psn)
	if s.bits[w]&b == 0 {
		s.bits[w] |= b
		s.n++
	}
}

func (s *aheadSet) del(psn wire.PSN) {
	w, b := s.index(psn)
	if s.bits[w]&b != 0 {
		s.bits[w] &^= b
		s.n--
	}
}

// next returns the first PSN of the set at or after from and before end,
// within the window from base.
func (s *aheadSet) next(base, from, end wire.PSN) (wire.PSN, bool) {
	if s.n == 0 {
		return 0, false
	}
	if from.Before(base) {
		from = base
	}
	if limit := base.Add(aheadWindow); end.After(limit) {
		end = limit
	}
	for p := from; p.Before(end); {
		w, _ := s.index(p)
		off := uint32(p) % 64
		word := s.bits[w] >> off
		if word != 0 {
			q := p.Add(uint32(bits.TrailingZeros64(word)))
			if q.Before(end) {
				return q, true
			}
			return 0, false
		}
		p = p.Add(64 - off)
	}
	return 0, false
}

// maxHeldBytes bounds the payload a QP holds for its turn (heldSet):
// the requester's window (MaxUnackedPSNs) at path MTU 2048, half of it at
// 4096. Buffers are made only when responses must wait, and reused.
const maxHeldBytes = 1 << 20

// heldSet holds the payloads of READ responses received ahead whose
// placement must wait for an earlier READ or atomic that writes the
// same memory (completer.acceptLocked): an application that READs twice
// into one buffer ends with the later READ's data, as in order. Its
// buffers are made on first use and reused.
type heldSet struct {
	at    map[wire.PSN][]byte
	spare [][]byte
}

// put holds a copy of payload for psn, in a buffer of capacity pmtu; it
// reports false when maxHeldBytes are held already.
func (h *heldSet) put(psn wire.PSN, payload []byte, pmtu int) bool {
	if (len(h.at)+1)*pmtu > maxHeldBytes {
		return false
	}
	if h.at == nil {
		h.at = make(map[wire.PSN][]byte)
	}
	var b []byte
	if n := len(h.spare); n > 0 && cap(h.spare[n-1]) >= len(payload) {
		b, h.spare = h.spare[n-1], h.spare[:n-1]
	} else {
		b = make([]byte, 0, max(pmtu, len(payload)))
	}
	h.at[psn] = append(b[:0], payload...)
	return true
}

// take returns the payload held for psn, if any, and forgets it.
func (h *heldSet) take(psn wire.PSN) ([]byte, bool) {
	if len(h.at) == 0 {
		return nil, false
	}
	b, ok := h.at[psn]
	if ok {
		delete(h.at, psn)
	}
	return b, ok
}

// free gives back a buffer take returned.
func (h *heldSet) free(b []byte) { h.spare = append(h.spare, b[:0]) }

// clear drops every held payload (a reset or a new send PSN).
func (h *heldSet) clear() {
	for _, b := range h.at {
		h.spare = append(h.spare, b[:0])
	}
	clear(h.at)
}
