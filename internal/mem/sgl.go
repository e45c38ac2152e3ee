package mem

import (
	"fmt"
	"slices"

	"github.com/softnic/softnic/transport"
)

// The data path of every transport: copying a message between packets
// and a scatter/gather list, SGE by SGE through the MR table and chunk by
// chunk through a fast-registration MR (rxe_mr.c copy_data and
// rxe_mr_copy). RC, UC and UD use these alike.

// errShortSGL: the scatter list ends before the data does.
var errShortSGL = fmt.Errorf("%w: scatter list too short", ErrRange)

// copyAt copies between b and the view's memory from byte offset pos of
// the region on, chunk by chunk: into the memory when in, out of it
// otherwise. The caller has checked that the range lies in the region.
func (v *mrView) copyAt(pos uint64, b []byte, in bool) {
	i := 0
	if len(v.chunks) > 1 {
		i = v.chunkAt(pos)
	}
	for len(b) > 0 {
		c := &v.chunks[i]
		m := c.b[pos-c.off:]
		var k int
		if in {
			k = copy(m, b)
		} else {
			k = copy(b, m)
		}
		b = b[k:]
		pos += uint64(k)
		i++
	}
}

// Scatter copies src into the SGEs of sgl from byte offset off of the list
// on: a received SEND, a READ response, an atomic's original value. Each
// SGE written is checked as Local checks it for a write (LOCAL_WRITE
// needed); one spanning chunks of a fast-registration MR is written piece
// by piece. It fails on the first SGE refused, or when the list ends
// before src does (an ErrRange). It allocates nothing.
func (t *Table) Scatter(pd *PD, sgl []transport.SGE, off uint64, src []byte) error {
	for _, s := range sgl {
		if len(src) == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		v, err := t.lookupLocal(pd, s, true)
		if err != nil {
			return err
		}
		n := min(uint64(len(src)), uint64(s.Length)-off)
		v.copyAt(s.Addr-v.iova+off, src[:n], true)
		src, off = src[n:], 0
	}
	if len(src) > 0 {
		return errShortSGL
	}
	return nil
}

// GatherAt copies bytes [off, off+len(dst)) of the message the SGEs of sgl
// name into dst: a send's payload, packet by packet. Each SGE read is
// checked as Local checks it (no access right needed); bytes past the
// list's end are left as they are. It allocates nothing.
func (t *Table) GatherAt(pd *PD, sgl []transport.SGE, off uint64, dst []byte) error {
	for _, s := range sgl {
		if len(dst) == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		v, err := t.lookupLocal(pd, s, false)
		if err != nil {
			return err
		}
		n := min(uint64(len(dst)), uint64(s.Length)-off)
		v.copyAt(s.Addr-v.iova+off, dst[:n], false)
		dst, off = dst[n:], 0
	}
	return nil
}

// Gather appends to dst the bytes the SGEs of sgl name, read locally by a
// QP of pd: the data of a send posted with IBV_SEND_INLINE and SGEs,
// which softnic copies when the WR is posted (a Go program has no raw
// pointers to hand over, so the SGEs are resolved through the MR table,
// lkey and bounds checked as Local checks them). A range spanning chunks
// of a fast-registration MR is read piece by piece. On the first SGE
// refused it returns dst as it was and the error, naming the SGE.
func (t *Table) Gather(pd *PD, sgl []transport.SGE, dst []byte) ([]byte, error) {
	n := len(dst)
	for i, s := range sgl {
		if s.Length == 0 {
			continue
		}
		v, err := t.lookupLocal(pd, s, false)
		if err != nil {
			return dst[:n], gatherError(i, s, err)
		}
		k := len(dst)
		dst = slices.Grow(dst, int(s.Length))[:k+int(s.Length)]
		v.copyAt(s.Addr-v.iova, dst[k:], false)
	}
	return dst, nil
}

// CopyIn copies src into the pieces of dst in order and returns the number
// of bytes copied (the smaller of len(src) and the pieces' total).
func CopyIn(dst [][]byte, src []byte) int { return CopyInAt(dst, 0, src) }

// CopyOut copies the pieces of src in order into dst and returns the
// number of bytes copied (the smaller of len(dst) and the pieces' total).
func CopyOut(dst []byte, src [][]byte) int { return CopyOutAt(dst, src, 0) }

// CopyInAt copies src into the pieces of dst from byte offset off of the
// pieces on and returns the number of bytes copied.
func CopyInAt(dst [][]byte, off int, src []byte) int {
	n := 0
	for _, b := range dst {
		if n == len(src) {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		n += copy(b[off:], src[n:])
		off = 0
	}
	return n
}

// CopyOutAt copies the pieces of src from byte offset off of them on into
// dst and returns the number of bytes copied.
func CopyOutAt(dst []byte, src [][]byte, off int) int {
	n := 0
	for _, b := range src {
		if n == len(dst) {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		n += copy(dst[n:], b[off:])
		off = 0
	}
	return n
}
