// Package errno declares the engine's errors once, each with the errno
// the verbs API reports for it, so that errors.Is(err, syscall.EINVAL)
// holds for an engine error as the engine returns it and nothing above
// maps it again (quic-go's internal/qerr maps its transport errors once
// in the same way; STYLE.md 15, 27).
//
// The errors of every kind of engine object share one errno each:
// Invalid (EINVAL), NoMemory (ENOMEM), Busy (EBUSY), NotSupported
// (EOPNOTSUPP) and Full (a full queue: ENOMEM, as rxe and mlx5 return,
// and ENOSPC, as ibv_wr_complete does). A package declares its own error
// only for a refusal narrower than its errno that a caller tells apart
// (mem's ErrInvalidKey, which the responder NAKs as a remote access
// error; transport's ErrState), with New, so that it carries its errno
// too. The package imports nothing of softnic's: mem, the lowest of the
// engine packages, and every package above it use it.
//
// Every engine error's text begins with its errno's text, then the
// detail ("invalid argument: QP needs a PD and both CQs"): wrap an error
// with "%w: detail", and give context to an error made elsewhere with
// Wrapf, which keeps the errno first.
package errno

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Error is an engine error: the errnos it matches with errors.Is and a
// text that names them first.
type Error struct {
	msg    string
	prefix string  // the errnos' texts, joined as in msg
	errnos []error // matched by errors.Is; never empty
}

// New returns an error matching errnos (at least one), whose text is
// theirs followed by text, if any: New("invalid key", syscall.EINVAL)
// reads "invalid argument: invalid key".
func New(text string, errnos ...syscall.Errno) *Error {
	if len(errnos) == 0 {
		panic("errno.New without an errno")
	}
	e := &Error{errnos: make([]error, len(errnos))}
	texts := make([]string, len(errnos))
	for i, n := range errnos {
		e.errnos[i], texts[i] = n, n.Error()
	}
	e.prefix = strings.Join(texts, ": ")
	e.msg = e.prefix
	if text != "" {
		e.msg += ": " + text
	}
	return e
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the errnos: errors.Is(err, syscall.EINVAL) holds for
// every error wrapping an Invalid.
func (e *Error) Unwrap() []error { return e.errnos }

// The errors every kind of engine object shares.
var (
	// Invalid is EINVAL: a bad argument, an object already destroyed, an
	// operation the object's state does not allow.
	Invalid = New("", syscall.EINVAL)
	// NoMemory is ENOMEM: a table of the device is full.
	NoMemory = New("", syscall.ENOMEM)
	// Busy is EBUSY: the object is in use (a CQ with QPs, a PD with
	// objects, an MR with bound windows, a QP number taken).
	Busy = New("", syscall.EBUSY)
	// NotSupported is EOPNOTSUPP: an operation the object's type does
	// not have (list operations on a basic SRQ, a UC QP on a
	// tag-matching SRQ).
	NotSupported = New("", syscall.EOPNOTSUPP)
	// Full is a full queue (ibv_post_send, ibv_post_recv, a tag list):
	// ENOMEM as rxe and mlx5 return it, and ENOSPC, what ibv_wr_complete
	// returns when a batch does not fit (rxe provider wr_complete).
	Full = New("queue full", syscall.ENOMEM, syscall.ENOSPC)
)

// Wrapf returns err with the context format names, placed after err's
// errnos so that they stay first: Wrapf(err, "WR %d", 1) of "invalid
// argument: opcode 9 not supported" reads "invalid argument: WR 1:
// opcode 9 not supported". The result wraps err. An error that does not
// begin with its errnos' text (one not made here) gets the context first,
// as fmt.Errorf("context: %w") would give it.
func Wrapf(err error, format string, args ...any) error {
	ctx := fmt.Sprintf(format, args...)
	msg := err.Error()
	var e *Error
	if errors.As(err, &e) {
		if rest, ok := strings.CutPrefix(msg, e.prefix); ok && (rest == "" || strings.HasPrefix(rest, ": ")) {
			return &wrapped{msg: e.prefix + ": " + ctx + rest, err: err}
		}
	}
	return &wrapped{msg: ctx + ": " + msg, err: err}
}

// wrapped is an error with context (Wrapf).
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
