package nic

import "github.com/softnic/softnic/internal/errno"

// Wrapf gives an engine error context, its errno's text kept first
// (errno.Wrapf): "invalid argument: alloc MR of 0 pages".
func Wrapf(err error, format string, args ...any) error { return errno.Wrapf(err, format, args...) }
