package mem

import "encoding/binary"

// CompareSwap performs ATOMIC CMP_SWAP on the 8 bytes b (from Remote or
// RemoteAtomic): if they hold compare they become swap. It returns the
// original value. Values are native-endian, as rxe_mr_do_atomic_op reads
// and writes a u64 in place; all atomics of the table serialize on one
// lock, like rxe's atomic_ops_lock. It panics if len(b) < 8.
func (t *Table) CompareSwap(b []byte, compare, swap uint64) uint64 {
	check8(b)
	t.atomicMu.Lock()
	orig := binary.NativeEndian.Uint64(b)
	if orig == compare {
		binary.NativeEndian.PutUint64(b, swap)
	}
	t.atomicMu.Unlock()
	return orig
}

// FetchAdd performs ATOMIC FETCH_ADD on the 8 bytes b: they become their
// value plus add, modulo 2^64. It returns the original value.
// Native-endian and serialized like CompareSwap. It panics if len(b) < 8.
func (t *Table) FetchAdd(b []byte, add uint64) uint64 {
	check8(b)
	t.atomicMu.Lock()
	orig := binary.NativeEndian.Uint64(b)
	binary.NativeEndian.PutUint64(b, orig+add)
	t.atomicMu.Unlock()
	return orig
}

// AtomicWrite performs ATOMIC WRITE (IBA A19): the 8 bytes b become v,
// native-endian. rxe stores the payload's u64 as loaded from the packet
// (rxe_mr_do_atomic_write's smp_store_release), so the memory receives the
// payload bytes unchanged: pass binary.NativeEndian.Uint64(payload). It takes the atomics lock, so it is atomic with respect
// to CompareSwap and FetchAdd. It panics if len(b) < 8.
func (t *Table) AtomicWrite(b []byte, v uint64) {
	check8(b)
	t.atomicMu.Lock()
	binary.NativeEndian.PutUint64(b, v)
	t.atomicMu.Unlock()
}

// check8 panics if b is shorter than 8 bytes. (Not `_ = b[7]`: that is a
// load of b[7] outside the lock, which the race detector rightly reports.)
func check8(b []byte) {
	if len(b) < 8 {
		panic("mem: atomic on fewer than 8 bytes")
	}
}
