package mem

import (
	"fmt"
	"syscall"

	"github.com/softnic/softnic/internal/errno"
)

// Every error this package returns wraps exactly one of the sentinels
// below or one of errno's Invalid (bad access flags, zero length, wrong
// MR type, object of another table, object already freed), Busy (an MR
// with bound windows, a PD that still has users, a bound type-2 window, a
// registered fast-reg MR) and NoMemory (a table is full), so callers map
// errors with errors.Is: the responder turns ErrInvalidKey, ErrWrongPD,
// ErrAccess and ErrRange into a Remote Access Error NAK, ErrAlign and
// errno.Invalid into an Invalid Request NAK (rxe_resp.c
// RESPST_ERR_RKEY_VIOLATION, RESPST_ERR_MISALIGNED_ATOMIC); the requester
// turns a failed local SGE lookup into a local protection error. The
// sentinels are EINVAL to the verbs API (errno.New).
var (
	// ErrInvalidKey: no MR or MW has the key's index, the key byte does not
	// match, or the region or window is not valid (freed, invalidated,
	// unbound, deregistered).
	ErrInvalidKey = errno.New("invalid key", syscall.EINVAL)
	// ErrWrongPD: the region's or window's protection domain is not the
	// QP's.
	ErrWrongPD = errno.New("protection domain mismatch", syscall.EINVAL)
	// ErrAccess: an access right is missing.
	ErrAccess = errno.New("access right missing", syscall.EINVAL)
	// ErrRange: the access lies (partly) outside the region or window.
	ErrRange = errno.New("access outside the region", syscall.EINVAL)
	// ErrAlign: an atomic (or ATOMIC WRITE) address is not 8-byte aligned
	// (rxe_mr_do_atomic_op, rxe_mr_do_atomic_write "See IBA A19.4.2").
	ErrAlign = errno.New("misaligned atomic", syscall.EINVAL)
)

// ErrDiscontiguous is returned by Remote and Local when the range lies
// inside a fast-registration MR but spans two of its memory chunks, so no
// single []byte can describe it; RemoteV and LocalV resolve such ranges.
// It wraps ErrRange, so callers that do not care treat it as a range error.
var ErrDiscontiguous = fmt.Errorf("%w: range spans discontiguous chunks (use RemoteV/LocalV)", ErrRange)

// ErrWrongQP is returned when a type-2 memory window is used, or
// invalidated, through a QP other than the one it is bound to (rxe_lookup_mw:
// "mw->qp != qp"). It wraps ErrInvalidKey: to the responder it is an rkey
// that does not match.
var ErrWrongQP = fmt.Errorf("%w: memory window bound to another QP", ErrInvalidKey)

// Static detail errors: the hot path returns these preallocated values so a
// refused access allocates nothing (bad packets are counted and dropped;
// STYLE.md 15).
var (
	errNoIndex      = fmt.Errorf("%w: no region or window has this index", ErrInvalidKey)
	errKeyByte      = fmt.Errorf("%w: key byte mismatch", ErrInvalidKey)
	errMRNotValid   = fmt.Errorf("%w: memory region not valid", ErrInvalidKey)
	errMWNotValid   = fmt.Errorf("%w: memory window not bound", ErrInvalidKey)
	errMWKeyLocal   = fmt.Errorf("%w: a memory window key is no lkey", ErrInvalidKey)
	errPD           = fmt.Errorf("%w", ErrWrongPD)
	errNeedLWrite   = fmt.Errorf("%w: local write", ErrAccess)
	errNotODP       = fmt.Errorf("%w: not an on-demand MR (IBV_ACCESS_ON_DEMAND)", ErrAccess)
	errNeedRights   = fmt.Errorf("%w: remote", ErrAccess)
	errOutOfRegion  = fmt.Errorf("%w", ErrRange)
	errOutOfWindow  = fmt.Errorf("%w: outside the memory window", ErrRange)
	errAtomicAlign  = fmt.Errorf("%w: address not 8-byte aligned", ErrAlign)
	errFlushNeed    = fmt.Errorf("%w: flush needs FLUSH_GLOBAL and/or FLUSH_PERSISTENT only", errno.Invalid)
	errFlushLevel   = fmt.Errorf("%w: flush selectivity level not 0 (range) or 1 (MR)", errno.Invalid)
	errNilPD        = fmt.Errorf("%w: nil or foreign protection domain", errno.Invalid)
	errDeadPD       = fmt.Errorf("%w: protection domain deallocated", errno.Invalid)
	errForeignMR    = fmt.Errorf("%w: nil or foreign memory region", errno.Invalid)
	errForeignMW    = fmt.Errorf("%w: nil or foreign memory window", errno.Invalid)
	errDeadMR       = fmt.Errorf("%w: memory region deregistered", errno.Invalid)
	errDeadMW       = fmt.Errorf("%w: memory window deallocated", errno.Invalid)
	errNotFast      = fmt.Errorf("%w: not a fast-registration MR", errno.Invalid)
	errZeroLen      = fmt.Errorf("%w: zero length", errno.Invalid)
	errAccessFlags  = fmt.Errorf("%w: unsupported access flags", errno.Invalid)
	errRegAccess    = fmt.Errorf("%w: REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE", errno.Invalid)
	errPersistent   = fmt.Errorf("%w: FLUSH_PERSISTENT on memory that is not persistent", errno.Invalid)
	errIOVAOverflow = fmt.Errorf("%w: iova+length overflows", errno.Invalid)
)

func wrapf(sentinel error, msg string) error { return fmt.Errorf("%w: %s", sentinel, msg) }
