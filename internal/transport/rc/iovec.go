package rc

import "github.com/softnic/softnic/internal/mem"

// iovec is a range of registered memory as pieces in order. A range of an
// ordinary MR is one piece; one of a fast-registration MR that maps
// several chunks may be more (mem.RemoteV).
type iovec [][]byte

// writeAt copies src into the range at byte offset off and returns the
// number of bytes copied.
func (v iovec) writeAt(off int, src []byte) int { return mem.CopyInAt(v, off, src) }

// readAt copies the range from byte offset off into dst and returns the
// number of bytes copied.
func (v iovec) readAt(off int, dst []byte) int { return mem.CopyOutAt(dst, v, off) }

// viewAt returns the n bytes at byte offset off where they lie, when they
// lie in one piece; nil otherwise.
func (v iovec) viewAt(off, n int) []byte {
	for _, p := range v {
		if off >= len(p) {
			off -= len(p)
			continue
		}
		if n > len(p)-off {
			return nil
		}
		return p[off : off+n : off+n]
	}
	return nil
}
