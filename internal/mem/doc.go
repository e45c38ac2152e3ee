// Package mem is softnic's memory protection: protection domains, memory
// regions (MRs, including fast-registration MRs) and memory windows (MWs),
// their key tables, and every local and remote access check the transports
// make, after rxe's rxe_mr.c, rxe_mw.c and rxe_resp.c check_rkey.
//
// # Keys
//
// lkey == rkey == index<<8 | keyByte (rxe_mr_init). MR indices are
// 1..2^19, MW indices 2^19+1..2^20 (rxe_param.h), so the index tells an
// MR key from an MW key (IsMWKey). Indices are handed out cyclically like
// rxe_pool's xa_alloc_cyclic and key bytes are random from a per-table
// generator seeded by Limits.KeySeed, so a stale key rarely matches a new
// object. A lookup indexes a lock-free two-level array by key>>8, then
// compares the whole key.
//
// # Hot path
//
// Local, LocalV, Remote, RemoteV, RemoteAtomic and Flush take no lock and
// allocate nothing, whether they succeed or refuse: each MR and MW
// publishes its state as an immutable snapshot behind an atomic pointer,
// and refusals return preallocated errors wrapping the package sentinels.
// Registration, binding and invalidation serialize on the table's mutex.
// A returned []byte is the registered memory itself; it stays safe to
// touch after deregistration (Go memory is not unmapped), as in rxe where
// the responder holds an MR reference across a request.
//
// # Multi-chunk memory
//
// RegMR's memory is one []byte. A fast-registration MR (AllocMR,
// MapMRSG, RegFast) maps a list of []byte elements, which follow each
// other without gaps in the IOVA space but are separate Go objects.
// Remote and Local return a single []byte; for a range that spans two
// elements they return ErrDiscontiguous (an ErrRange). RemoteV and LocalV
// return the range as pieces, and CopyIn / CopyOut move data through them.
// Scatter and GatherAt copy a message into and out of an SGE list from
// any offset, SGE by SGE and chunk by chunk: the one data path of RC, UC
// and UD.
//
// # Decisions where rxe or the IBA left a choice
//
//   - RegMR of a zero-length buffer is refused (errno.Invalid): ib_umem_get
//     refuses an empty page-aligned range, and a Go slice of length 0 has
//     no address to register.
//   - RegMR needs LOCAL_WRITE with REMOTE_WRITE or REMOTE_ATOMIC
//     (ib_check_mr_access, ibv_reg_mr(3)) but not with FLUSH_*: the kernel
//     does not require it. FLUSH_PERSISTENT is refused unless
//     Limits.PersistentMemory, as rxe refuses it on non-pmem pages.
//     RegFast applies the same rules (rxe applies none to REG_MR).
//   - RegMR with AccessZeroBased sets the iova to 0 (rxe refuses the flag
//     on MRs; softnic honours it). The iova need not share buf's offset in
//     a 4 KiB page (ib_uverbs_reg_mr's rule): softnic maps no pages.
//   - A zero-length SGE in Local is accepted without looking at its lkey,
//     as rxe's copy_data skips it. A zero-length Remote returns nil, nil
//     without any check (C9-88); Flush checks its rkey even at length 0
//     (rxe skips the check only for READ and WRITE).
//   - An MW key is never an lkey (rxe looks lkeys up in the MR pool only).
//   - Invalidate checks that the MR or window is in the QP's PD, and that a
//     type-2 window is bound to the invalidating QP, for LOCAL_INV as for
//     SEND_WITH_INV; rxe checks neither. Only fast-reg MRs can be
//     invalidated (rxe_invalidate_mr). Invalidating a FREE fast-reg MR
//     succeeds (rxe); invalidating an unbound type-2 window is ErrInvalidKey.
//   - BindMW requires the QP's PD to be the window's and the MR's for both
//     window types (C10-72 and the rxe fix "Check PDs for memory window
//     binds"), requires the MR to be VALID, and checks a zero-based
//     window's address range, not just its length (C10-75). A type-2 bind
//     takes the caller's low 8 bits and ignores the rest, as rxe_do_bind_mw
//     does; a type-1 bind takes them only from a whole new rkey of the
//     window (what ibv_bind_mw's ibv_inc_rkey gives) and otherwise picks a
//     fresh key byte.
//   - Remote access through a window checks the window's bounds, then the
//     MR's; rxe's check_rkey checks only the MR's.
//   - MapMRSG maps whole elements only; ib_sg_to_pages may map part of the
//     element that overflows the page list.
//   - Atomics (CompareSwap, FetchAdd, AtomicWrite) serialize on one
//     table-wide lock, ATOMIC WRITE included (rxe uses a release store for
//     it), so all three are atomic with respect to each other.
//   - Errors map to rxe's: its EINVAL becomes errno.Invalid, errno.Busy
//     (MR with bound windows, a bound type-2 window, a VALID fast-reg MR),
//     ErrRange or ErrAccess by cause, so callers can tell why without
//     string matching; each carries its errno (package errno).
package mem
