package mem

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps exactly one of
// them (or ErrAlign), so callers map errors with errors.Is: the responder
// turns ErrInvalidKey, ErrWrongPD, ErrAccess and ErrRange into a Remote
// Access Error NAK and ErrAlign into an Invalid Request NAK (rxe_resp.c
// RESPST_ERR_RKEY_VIOLATION and RESPST_ERR_MISALIGNED_ATOMIC); the requester
// turns a failed local SGE lookup into a local protection error.
var (
	// ErrInvalidKey: no MR or MW has the key's index, the key byte does not
	// match, or the region or window is not valid (freed, invalidated,
	// unbound, deregistered).
	ErrInvalidKey = errors.New("invalid key")
	// ErrWrongPD: the region's or window's protection domain is not the
	// QP's.
	ErrWrongPD = errors.New("protection domain mismatch")
	// ErrAccess: an access right is missing.
	ErrAccess = errors.New("access right missing")
	// ErrRange: the access lies (partly) outside the region or window.
	ErrRange = errors.New("access outside the region")
	// ErrBusy: the resource is in use (an MR with bound windows, a PD that
	// still has users, a bound type-2 window, a registered fast-reg MR).
	ErrBusy = errors.New("resource busy")
	// ErrInvalid: an invalid argument (bad access flags, zero length, wrong
	// MR type, object of another table, object already freed).
	ErrInvalid = errors.New("invalid argument")
	// ErrNoMemory: a table is full.
	ErrNoMemory = errors.New("no resources")
	// ErrAlign: an atomic (or ATOMIC WRITE) address is not 8-byte aligned
	// (rxe_mr_do_atomic_op, rxe_mr_do_atomic_write "See IBA A19.4.2").
	ErrAlign = errors.New("misaligned atomic")
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
	errNeedRights   = fmt.Errorf("%w: remote", ErrAccess)
	errOutOfRegion  = fmt.Errorf("%w", ErrRange)
	errOutOfWindow  = fmt.Errorf("%w: outside the memory window", ErrRange)
	errAtomicAlign  = fmt.Errorf("%w: address not 8-byte aligned", ErrAlign)
	errFlushNeed    = fmt.Errorf("%w: flush needs FLUSH_GLOBAL and/or FLUSH_PERSISTENT only", ErrInvalid)
	errFlushLevel   = fmt.Errorf("%w: flush selectivity level not 0 (range) or 1 (MR)", ErrInvalid)
	errNilPD        = fmt.Errorf("%w: nil or foreign protection domain", ErrInvalid)
	errDeadPD       = fmt.Errorf("%w: protection domain deallocated", ErrInvalid)
	errForeignMR    = fmt.Errorf("%w: nil or foreign memory region", ErrInvalid)
	errForeignMW    = fmt.Errorf("%w: nil or foreign memory window", ErrInvalid)
	errDeadMR       = fmt.Errorf("%w: memory region deregistered", ErrInvalid)
	errDeadMW       = fmt.Errorf("%w: memory window deallocated", ErrInvalid)
	errNotFast      = fmt.Errorf("%w: not a fast-registration MR", ErrInvalid)
	errZeroLen      = fmt.Errorf("%w: zero length", ErrInvalid)
	errAccessFlags  = fmt.Errorf("%w: unsupported access flags", ErrInvalid)
	errRegAccess    = fmt.Errorf("%w: REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE", ErrInvalid)
	errPersistent   = fmt.Errorf("%w: FLUSH_PERSISTENT on memory that is not persistent", ErrInvalid)
	errIOVAOverflow = fmt.Errorf("%w: iova+length overflows", ErrInvalid)
)

func wrapf(sentinel error, msg string) error { return fmt.Errorf("%w: %s", sentinel, msg) }
