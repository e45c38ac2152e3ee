package main

// #include "softnic_engine.h"
import "C"

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// The errnos the exported functions return.
const (
	einval     = C.int(syscall.EINVAL)
	eagain     = C.int(syscall.EAGAIN)
	enomem     = C.int(syscall.ENOMEM)
	eopnotsupp = C.int(syscall.EOPNOTSUPP)
	ebusy      = C.int(syscall.EBUSY)
)

// errnoOf returns the errno err wraps (verbs errors wrap libibverbs'),
// EINVAL when it wraps none, and prints err with what when SOFTNIC_DEBUG
// is set.
func errnoOf(err error, what string) syscall.Errno {
	var en syscall.Errno
	if !errors.As(err, &en) {
		en = syscall.EINVAL
	}
	debugf("%s: %v", what, err)
	return en
}

// fail is errnoOf for an exported function's return value.
func fail(err error, what string) C.int { return C.int(errnoOf(err, what)) }

// signalFD adds one to the eventfd fd (a completion channel's or a
// context's async fd), so that a program polling it sees it readable and
// ibv_get_cq_event or ibv_get_async_event reads one event.
func signalFD(fd int) {
	one := [8]byte{1}
	for {
		_, err := unix.Write(fd, one[:])
		if err != unix.EINTR {
			return
		}
	}
}
