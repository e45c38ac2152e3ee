package mem

import (
	"fmt"
	"slices"

	"github.com/softnic/softnic/ibv"
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
			k = dmaCopy(m, b)
		} else {
			k = dmaCopy(b, m)
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
func (t *Table) Scatter(pd *PD, sgl []ibv.SGE, off uint64, src []byte) error {
	rest, err := t.copySGL(pd, sgl, off, src, true)
	if err == nil && rest > 0 {
		return errShortSGL
	}
	return err
}

// GatherAt copies bytes [off, off+len(dst)) of the message the SGEs of sgl
// name into dst: a send's payload, packet by packet. Each SGE read is
// checked as Local checks it (no access right needed); bytes past the
// list's end are left as they are. It allocates nothing.
func (t *Table) GatherAt(pd *PD, sgl []ibv.SGE, off uint64, dst []byte) error {
	_, err := t.copySGL(pd, sgl, off, dst, false)
	return err
}

// ViewAt returns bytes [off, off+n) of the message the SGEs of sgl name,
// where they lie, when they lie in one piece: inside one SGE and, in a
// fast-registration MR, one chunk; ok is false otherwise (use GatherAt).
// The SGE is checked as GatherAt checks it. The bytes are the
// application's registered memory, which it may write at any time: read
// them as DMA (wire.FinishSplit, a link's send). It allocates nothing.
func (t *Table) ViewAt(pd *PD, sgl []ibv.SGE, off uint64, n int) (b []byte, ok bool, err error) {
	if n <= 0 {
		return nil, false, nil
	}
	for _, s := range sgl {
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		if uint64(n) > uint64(s.Length)-off {
			return nil, false, nil // spans SGEs
		}
		v, err := t.lookupLocal(pd, s, false)
		if err != nil {
			return nil, false, err
		}
		b, err := v.slice(s.Addr+off, uint64(n))
		if err != nil {
			return nil, false, nil // spans chunks (ErrDiscontiguous)
		}
		return b, true, nil
	}
	return nil, false, nil
}

// copySGL copies between b and the SGE list from byte offset off of the
// list on: into the list's memory when write, out of it otherwise. It
// looks up only the SGEs it copies through and returns the bytes of b
// the list had no room for.
func (t *Table) copySGL(pd *PD, sgl []ibv.SGE, off uint64, b []byte, write bool) (int, error) {
	for _, s := range sgl {
		if len(b) == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		v, err := t.lookupLocal(pd, s, write)
		if err != nil {
			return len(b), err
		}
		n := min(uint64(len(b)), uint64(s.Length)-off)
		v.copyAt(s.Addr-v.iova+off, b[:n], write)
		b, off = b[n:], 0
	}
	return len(b), nil
}

// Gather appends to dst the bytes the SGEs of sgl name, read locally by a
// QP of pd: the data of a send posted with IBV_SEND_INLINE and SGEs,
// which softnic copies when the WR is posted (a Go program has no raw
// pointers to hand over, so the SGEs are resolved through the PD's MRs,
// without checking the lkey, as ibv_post_send(3) says: lookupInline). A
// range spanning chunks of a fast-registration MR is read piece by
// piece. On
// the first SGE no MR of the PD covers it returns dst as it was and the
// error, naming the SGE.
func (t *Table) Gather(pd *PD, sgl []ibv.SGE, dst []byte) ([]byte, error) {
	n := len(dst)
	for i, s := range sgl {
		if s.Length == 0 {
			continue
		}
		v, err := t.lookupInline(pd, s)
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
func CopyInAt(dst [][]byte, off int, src []byte) int { return copyPieces(dst, off, src, true) }

// CopyOutAt copies the pieces of src from byte offset off of them on into
// dst and returns the number of bytes copied.
func CopyOutAt(dst []byte, src [][]byte, off int) int { return copyPieces(src, off, dst, false) }

// copyPieces copies between b and the pieces from byte offset off of them
// on: into the pieces when in, out of them otherwise.
func copyPieces(pieces [][]byte, off int, b []byte, in bool) int {
	n := 0
	for _, p := range pieces {
		if n == len(b) {
			break
		}
		if off >= len(p) {
			off -= len(p)
			continue
		}
		if in {
			n += dmaCopy(p[off:], b[n:])
		} else {
			n += dmaCopy(b[n:], p[off:])
		}
		off = 0
	}
	return n
}
