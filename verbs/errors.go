package verbs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/softnic/softnic/nic"
	"github.com/softnic/softnic/nic/cq"
	"github.com/softnic/softnic/nic/mem"
	"github.com/softnic/softnic/transport"
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
)

// errno maps an engine error to the errno libibverbs would return and
// wraps both, so errors.Is works with the errno and the message keeps
// the engine's detail.
func errno(err error) error {
	if err == nil {
		return nil
	}
	var e error
	switch {
	case errors.Is(err, transport.ErrFull):
		// A full queue: providers return ENOMEM (rxe, mlx5); softnic's
		// error also matches ENOSPC.
		return fmt.Errorf("%w: %w: %w", ENOMEM, ENOSPC, err)
	case errors.Is(err, mem.ErrBusy), errors.Is(err, cq.ErrBusy), errors.Is(err, nic.ErrBusy):
		e = EBUSY
	case errors.Is(err, mem.ErrNoMemory), errors.Is(err, nic.ErrNoMemory):
		e = ENOMEM
	case errors.Is(err, nic.ErrClosed):
		e = ENODEV
	case errors.Is(err, nic.ErrNotFound):
		e = ENOENT
	default:
		e = EINVAL
	}
	return fmt.Errorf("%w: %w", e, err)
}

// errNil is the error of a method called on a nil or zero-value object:
// only this package's constructors make usable ones.
func errNil(what string) error {
	return fmt.Errorf("%w: %s is nil or was not made by this package", EINVAL, what)
}
