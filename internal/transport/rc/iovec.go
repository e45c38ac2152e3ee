package rc

import (
	"errors"
	"fmt"

	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/transport"
)

// iovec is a range of registered memory as pieces in order. A range of an
// ordinary MR is one piece; one of a fast-registration MR that maps
// several chunks may be more (mem.RemoteV, mem.LocalV).
type iovec [][]byte

// writeAt copies src into the range at byte offset off and returns the
// number of bytes copied.
func (v iovec) writeAt(off int, src []byte) int {
	n := 0
	for _, b := range v {
		if len(src) == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(b[off:], src)
		src, n, off = src[k:], n+k, 0
	}
	return n
}

// readAt copies the range from byte offset off into dst and returns the
// number of bytes copied.
func (v iovec) readAt(off int, dst []byte) int {
	n := 0
	for _, b := range v {
		if len(dst) == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := copy(dst, b[off:])
		dst, n, off = dst[k:], n+k, 0
	}
	return n
}

// localVec resolves sge for a local access: one piece from mem.Local on
// the common path, the pieces from mem.LocalV when the SGE spans chunks
// of a fast-registration MR. The result aliases qp.vec until the next
// call.
func (qp *QP) localVec(sge transport.SGE, write bool) (iovec, error) {
	b, err := qp.cfg.Mem.Local(qp.cfg.PD, sge, write)
	if err == nil {
		qp.vec = append(qp.vec[:0], b)
		return qp.vec, nil
	}
	if !errors.Is(err, mem.ErrDiscontiguous) {
		return nil, err
	}
	qp.vec, err = qp.cfg.Mem.LocalV(qp.cfg.PD, sge, write, qp.vec[:0])
	return qp.vec, err
}

// scatter copies src into the SGE list at byte offset off, checking each
// SGE for local write access.
func scatter(qp *QP, sgl []transport.SGE, off uint64, src []byte) error {
	for _, s := range sgl {
		if len(src) == 0 {
			break
		}
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		dst, err := qp.localVec(s, true)
		if err != nil {
			return err
		}
		n := dst.writeAt(int(off), src)
		src = src[n:]
		off = 0
	}
	if len(src) > 0 {
		return errShortSGL
	}
	return nil
}

var errShortSGL = fmt.Errorf("%w: scatter list too short", transport.ErrInvalid)
