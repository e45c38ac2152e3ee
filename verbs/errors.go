package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/nic"
	"github.com/softnic/softnic/internal/nic/cq"
	"github.com/softnic/softnic/internal/transport"
)

// The errno values verbs errors wrap, as libibverbs returns them: test
// with errors.Is(err, verbs.EINVAL).
var (
	EINVAL     error = syscall.EINVAL
	ENOMEM     error = syscall.ENOMEM
	ENOSPC     error = syscall.ENOSPC
	EBUSY      error = syscall.EBUSY
	ENOENT     error = syscall.ENOENT
	EOPNOTSUPP error = syscall.EOPNOTSUPP
	EACCES     error = syscall.EACCES
	ENODEV     error = syscall.ENODEV
	EAGAIN     error = syscall.EAGAIN
	ETIMEDOUT  error = syscall.ETIMEDOUT
)

// errno maps an engine error to the errno libibverbs would return and
// wraps both, so errors.Is works with the errno and the message keeps
// the engine's detail. The message names the errno once: the engine
// sentinel that only restates it ("invalid argument", "resource busy")
// is left out of the text (errors.Is still finds it). An error that
// already wraps an errno is returned as it is.
func errno(err error) error {
	if err == nil {
		return nil
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return err
	}
	if errors.Is(err, transport.ErrFull) {
		// A full queue: providers return ENOMEM (rxe, mlx5); softnic's
		// error also matches ENOSPC.
		return fmt.Errorf("%w: %w: %w", ENOMEM, ENOSPC, err)
	}
	for _, m := range errnoMap {
		if errors.Is(err, m.engine) {
			return newErrno(m.errno, err, m.same...)
		}
	}
	return newErrno(EINVAL, err, transport.ErrInvalid, mem.ErrInvalid, cq.ErrInvalid)
}

// errnoMap maps engine sentinels to errnos, with the sentinels whose text
// only restates the errno.
var errnoMap = []struct {
	engine error
	errno  error
	same   []error
}{
	{mem.ErrBusy, EBUSY, []error{mem.ErrBusy}},
	{cq.ErrBusy, EBUSY, []error{cq.ErrBusy}},
	{cq.ErrTimedOut, ETIMEDOUT, nil},
	{nic.ErrBusy, EBUSY, []error{nic.ErrBusy}},
	{mem.ErrNoMemory, ENOMEM, []error{mem.ErrNoMemory}},
	{nic.ErrNoMemory, ENOMEM, []error{nic.ErrNoMemory}},
	{nic.ErrClosed, ENODEV, nil},
	{nic.ErrNotFound, ENOENT, []error{nic.ErrNotFound}},
	{nic.ErrNotSupported, EOPNOTSUPP, []error{nic.ErrNotSupported}},
}

// errnoError is an engine error err wrapped with the errno e: both match
// errors.Is; msg is the text.
type errnoError struct {
	errno, err error
	msg        string
}

func (e *errnoError) Error() string   { return e.msg }
func (e *errnoError) Unwrap() []error { return []error{e.errno, e.err} }

// newErrno wraps err with errno e, leaving out of the text the first of
// same that err wraps and whose text err's carries (as "text: " or at its
// end).
func newErrno(e, err error, same ...error) error {
	msg := err.Error()
	for _, s := range same {
		if !errors.Is(err, s) {
			continue
		}
		t := s.Error()
		switch {
		case msg == t:
			msg = ""
		case strings.Contains(msg, t+": "):
			msg = strings.Replace(msg, t+": ", "", 1)
		case strings.HasSuffix(msg, ": "+t):
			msg = strings.TrimSuffix(msg, ": "+t)
		}
		break
	}
	if msg == "" {
		return &errnoError{errno: e, err: err, msg: e.Error()}
	}
	return &errnoError{errno: e, err: err, msg: e.Error() + ": " + msg}
}

// errNilCtx is the error of a blocking call given a nil context (use
// context.Background to wait without a bound).
var errNilCtx = fmt.Errorf("%w: nil context (pass context.Background() to wait without a bound)", EINVAL)

// errNil is the error of a method called on a nil or zero-value object:
// only this package's constructors make usable ones.
func errNil(what string) error {
	return fmt.Errorf("%w: %s is nil or was not made by this package", EINVAL, what)
}

// String names the device in errors: its name and address (two devices
// may share a name).
func (d *Device) String() string {
	if !d.ok() {
		return "device(nil)"
	}
	return fmt.Sprintf("%s (%v)", d.n.Name(), d.n.Addr())
}

// sameDevice refuses an object of device other passed to a call on
// device d: lkeys and rkeys are per device, but a typed object (a CQ, an
// SRQ, an AH, ...) of another device would tie the two devices' lifetimes
// together (completions landing in a CQ of a closed device) and is always
// a mistake, which libibverbs cannot even express across contexts.
func (d *Device) sameDevice(what string, other *Device) error {
	if other == d {
		return nil
	}
	return fmt.Errorf("%w: %s belongs to device %v, not %v", EINVAL, what, other, d)
}

// checkWRs returns the index of the first of wrs naming a typed object of
// another device than d (an *AH, a fast-registration MR) and why, or
// len(wrs) and nil.
func (d *Device) checkWRs(wrs []ibv.SendWR) (int, error) {
	for i := range wrs {
		if ah, ok := wrs[i].AH.(*AH); ok && ah.ok() {
			if err := d.sameDevice("SendWR.AH", ah.pd.d); err != nil {
				return i, err
			}
		}
		if r := wrs[i].Reg; r != nil {
			if m, ok := r.MR.(*mem.MR); ok && !d.n.Mem().Owns(m) {
				return i, fmt.Errorf("%w: SendWR.Reg.MR belongs to another device than %v", EINVAL, d)
			}
		}
	}
	return len(wrs), nil
}
