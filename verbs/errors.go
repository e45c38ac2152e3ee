package verbs

import (
	"fmt"
	"syscall"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// The errno values verbs errors wrap, as libibverbs returns them: test
// with errors.Is(err, verbs.EINVAL). The engine's errors carry theirs
// from where they are made, and their text names it first ("invalid
// argument: QP needs a PD and both CQs"); verbs returns them as they are.
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
	EFAULT     error = syscall.EFAULT
)

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
// errIPCsum refuses IBV_SEND_IP_CSUM. mlx5 computes IP and L4 checksums
// on RAW_PACKET QPs (and UD over an underlay) when it advertises
// IBV_DEVICE_RAW_IP_CSUM or IBV_DEVICE_UD_IP_CSUM, and fails the post with
// EINVAL when it does not (mlx5 qp.c: "IBV_SEND_IP_CSUM" without
// MLX5_CSUM_SUPPORT_*). softnic has no RAW_PACKET QPs and its UD payload
// is no IP packet, so it advertises neither capability (ibv.CapUDIPCsum,
// ibv.CapRawIPCsum) and refuses the flag as mlx5 does without them,
// rather than accept it and never report IBV_WC_IP_CSUM_OK.
var errIPCsum = fmt.Errorf("%w: IBV_SEND_IP_CSUM: no checksum offload (the device has neither IBV_DEVICE_UD_IP_CSUM nor IBV_DEVICE_RAW_IP_CSUM)", EINVAL)

func (d *Device) checkWRs(wrs []ibv.SendWR) (int, error) {
	for i := range wrs {
		if wrs[i].Flags&ibv.SendIPCsum != 0 {
			return i, errIPCsum
		}
		if ah, ok := wrs[i].AH.(*AH); ok && ah.ok() {
			if err := d.sameDevice("SendWR.AH", ah.pd.d); err != nil {
				return i, err
			}
		}
		if r := wrs[i].Reg; r != nil {
			if m, ok := r.MR.(*nic.MR); ok && !d.n.Mem().Owns(m) {
				return i, fmt.Errorf("%w: SendWR.Reg.MR belongs to another device than %v", EINVAL, d)
			}
		}
	}
	return len(wrs), nil
}

// After Device.Close every call on an object of the device fails with
// ENODEV (the device's check), whatever it would have answered before,
// except the calls that release what an object holds (Destroy, Dealloc,
// Dereg, Close, AckEvents), which go on working so that a program can
// tear down in any order; calls without an error answer as for an object
// not made by this package (QP.State is QPStateUnknown). Each type's live
// is that one check, the first thing every such call does.

func (qp *QP) live() error {
	if !qp.ok() {
		return errNil("QP")
	}
	return qp.pd.d.check()
}

func (c *CQ) live() error {
	if !c.ok() {
		return errNil("CQ")
	}
	return c.d.check()
}

func (c *CompChannel) live() error {
	if !c.ok() {
		return errNil("CompChannel")
	}
	return c.d.check()
}

func (s *SRQ) live() error {
	if !s.ok() {
		return errNil("SRQ")
	}
	return s.pd.d.check()
}

func (w *WQ) live() error {
	if !w.ok() {
		return errNil("WQ")
	}
	return w.pd.d.check()
}

func (mr *MR) live() error {
	if !mr.ok() {
		return errNil("MR")
	}
	return mr.d.check()
}
