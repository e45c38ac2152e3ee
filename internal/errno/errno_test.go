package errno

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
)

func TestErrorText(t *testing.T) {
	narrow := New("invalid key", syscall.EINVAL)
	for _, tc := range []struct {
		name   string
		err    error
		want   string
		errnos []error
	}{
		{"Invalid", Invalid, "invalid argument", []error{syscall.EINVAL}},
		{"detail", fmt.Errorf("%w: QP needs a PD", Invalid), "invalid argument: QP needs a PD", []error{syscall.EINVAL, Invalid}},
		{"narrow", fmt.Errorf("%w: no MR", narrow), "invalid argument: invalid key: no MR", []error{syscall.EINVAL, narrow}},
		{"Busy", Busy, "device or resource busy", []error{syscall.EBUSY}},
		{"Full", fmt.Errorf("%w: send queue holds 4 WRs", Full),
			"cannot allocate memory: no space left on device: queue full: send queue holds 4 WRs", []error{syscall.ENOMEM, syscall.ENOSPC, Full}},
		{"Wrapf", Wrapf(fmt.Errorf("%w: opcode 9", Invalid), "WR %d", 1), "invalid argument: WR 1: opcode 9", []error{syscall.EINVAL, Invalid}},
		{"Wrapf bare", Wrapf(Invalid, "alloc MR of %d pages", 0), "invalid argument: alloc MR of 0 pages", []error{syscall.EINVAL}},
		{"Wrapf narrow", Wrapf(fmt.Errorf("%w: no MR", narrow), "SGE 1"), "invalid argument: SGE 1: invalid key: no MR", []error{narrow}},
		{"Wrapf twice", Wrapf(Wrapf(narrow, "SGE 1"), "inline data"), "invalid argument: inline data: SGE 1: invalid key", []error{narrow}},
		{"Wrapf Full", Wrapf(Full, "drain"), "cannot allocate memory: no space left on device: drain: queue full", []error{syscall.ENOSPC}},
		{"Wrapf foreign", Wrapf(io.EOF, "read"), "read: EOF", []error{io.EOF}},
		{"Wrapf errno", Wrapf(syscall.ENETUNREACH, "join"), "join: network is unreachable", []error{syscall.ENETUNREACH}},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		for _, e := range tc.errnos {
			if !errors.Is(tc.err, e) {
				t.Errorf("%s: %v does not match %v", tc.name, tc.err, e)
			}
		}
	}
	if errors.Is(narrow, Invalid) {
		t.Error("a narrower error matches Invalid: the responder tells them apart (rc remoteErr)")
	}
	var en syscall.Errno
	if !errors.As(fmt.Errorf("%w: x", Busy), &en) || en != syscall.EBUSY {
		t.Errorf("errors.As finds errno %v, want EBUSY", en)
	}
}
