package perftest

import (
	"encoding/binary"
	"fmt"
)

// softnic's --check: each side fills its send area and its peer-visible
// area with patterns derived from its own key message (QPN and PSN),
// which the peer learns in the handshake, so after the run each side can
// recompute what the other's memory held and check what arrived: the
// target of WRITE and SEND checks the slots the client wrote, the
// initiator of READ checks what it read, and both ends of an atomic
// check the counts and original values of every slot. The C tools fill
// their buffers with random bytes, so --check needs softnic on both sides.

func seed(d Dest) uint32 { return d.QPN*0x9E3779B1 ^ d.PSN<<7 ^ 0x2545F491 }

// remoteSeed seeds a side's peer-visible area.
func remoteSeed(d Dest) uint32 { return seed(d) ^ 0x5bd1e995 }

func pat(seed uint32, off int) byte {
	x := seed ^ uint32(off)*0x9E3779B1
	x ^= x >> 15
	x *= 0x85EBCA6B
	x ^= x >> 13
	return byte(x)
}

// fillCheck writes the patterns into every QP's two areas.
func (s *session) fillCheck() {
	r := s.res
	n := r.buffSz()
	for i, d := range s.my {
		lb, rb := r.localBase(i), r.remoteBase(i)
		for j := 0; j < n; j++ {
			r.buf[lb+j] = pat(seed(d), j)
			r.buf[rb+j] = pat(remoteSeed(d), j)
		}
	}
}

// slots returns the offsets the cycling buffer used for iters messages of
// size bytes, relative to an area's base (increase_loc_addr): every step
// while the messages fit half a page, else the base alone.
func (s *session) slots(size int, iters uint64, cycling bool) []int {
	r := s.res
	if !cycling || size > r.cycle/2 {
		return []int{0}
	}
	step := inc(size, r.cacheLine)
	n := min(iters, uint64(r.cycle/step))
	z := make([]int, n)
	for k := range z {
		z[k] = k * step
	}
	return z
}

// hits returns how many of iters operations went to slot k of nslots.
func hits(iters uint64, k, nslots int) uint64 {
	n := iters / uint64(nslots)
	if uint64(k) < iters%uint64(nslots) {
		n++
	}
	return n
}

func (s *session) checkFail(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	s.result.CheckErr = msg
	return fmt.Errorf("%w: %s", ErrCheck, msg)
}

func (s *session) checked() error {
	s.result.Checked = true
	fmt.Fprintf(s.env.Err, "softnic: --check: every byte checked out\n")
	return nil
}

// checkTarget checks this side's memory after the peer's WRITEs, SENDs or
// atomics; rep carries the peer's message size and iteration count.
func (s *session) checkTarget(rep Report) error {
	cfg, r := s.cfg, s.res
	size := int(rep.Size)
	if size == 0 {
		size = int(cfg.Size)
	}
	perQP := rep.Iters / uint64(len(s.my))
	if perQP == 0 {
		perQP = uint64(cfg.Iters)
	}
	cycling := cfg.Test == BW
	for i := range s.my {
		peer := s.rem[i]
		switch cfg.Verb {
		case Write, Send:
			base := r.remoteBase(i)
			if cfg.Verb == Send {
				base = r.recvBase(i)
			}
			for _, off := range s.slots(size, perQP, cycling) {
				for j := 0; j < size; j++ {
					if got, want := r.buf[base+off+j], pat(seed(peer), off+j); got != want {
						return s.checkFail("QP %d: byte %d of the message at offset %d is %#02x, want %#02x", i, j, off, got, want)
					}
				}
			}
		case Atomic:
			sl := s.slots(8, perQP, cycling)
			for k, off := range sl {
				b := r.buf[r.remoteBase(i)+off:]
				got := binary.NativeEndian.Uint64(b)
				init := s.initial(remoteSeed(s.my[i]), off)
				want := init
				if cfg.Atomic == FetchAndAdd {
					want = init + hits(perQP, k, len(sl))*atomicAdd
				}
				if got != want {
					return s.checkFail("QP %d: the 8 bytes at offset %d hold %#x, want %#x", i, off, got, want)
				}
			}
		}
	}
	if cfg.Verb == Read {
		return nil // a READ target's memory does not change
	}
	return s.checked()
}

// initial is the 64-bit value the pattern seeded with sd puts at off.
func (s *session) initial(sd uint32, off int) uint64 {
	var b [8]byte
	for j := range b {
		b[j] = pat(sd, off+j)
	}
	return binary.NativeEndian.Uint64(b[:])
}

// checkInitiator checks what READs and atomics brought back.
func (s *session) checkInitiator(iters uint64) error {
	cfg, r := s.cfg, s.res
	cycling := cfg.Test == BW
	size := s.lastSize
	for i := range s.my {
		peer := s.rem[i]
		base := r.localBase(i)
		switch cfg.Verb {
		case Read:
			for _, off := range s.slots(size, iters, cycling) {
				for j := 0; j < size; j++ {
					if got, want := r.buf[base+off+j], pat(remoteSeed(peer), off+j); got != want {
						return s.checkFail("QP %d: byte %d read at offset %d is %#02x, want %#02x", i, j, off, got, want)
					}
				}
			}
		case Atomic:
			sl := s.slots(8, iters, cycling)
			for k, off := range sl {
				got := binary.NativeEndian.Uint64(r.buf[base+off:])
				want := s.initial(remoteSeed(peer), off)
				if cfg.Atomic == FetchAndAdd {
					want += (hits(iters, k, len(sl)) - 1) * atomicAdd
				}
				if got != want {
					return s.checkFail("QP %d: the original value returned for offset %d is %#x, want %#x", i, off, got, want)
				}
			}
		default:
			return nil
		}
	}
	return s.checked()
}
