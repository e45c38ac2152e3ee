package verbs

import (
	"fmt"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/nic"
)

// Rereg re-registers the region (ibv_rereg_mr): with
// ibv.ReregMRChangeTranslation its memory becomes buf (its address is
// buf's own, as RegMR's, 0 with ZERO_BASED access), with ReregMRChangePD
// its PD becomes pd (a PD or parent domain of the device; pd is ignored
// otherwise), with ReregMRChangeAccess its access becomes access (RegMR's
// rules); buf and access are ignored without their flag, but access must
// then be 0, as libibverbs checks. The lkey and rkey stay, as rxe keeps
// them (rxe_rereg_user_mr). An access already under way finishes on the
// old memory; every later one uses the new.
//
// Refused with nothing changed (the C library's IBV_REREG_MR_ERR_INPUT:
// the old MR is still valid): EINVAL for no or unknown flags, access
// without ReregMRChangeAccess, an empty buf with
// ReregMRChangeTranslation, a fast-registration MR (libibverbs takes only
// IBV_MR_TYPE_MR), a PD of another device or deallocated; EBUSY while
// memory windows are bound to the region (their ranges and rights were
// checked against it as it is: unbind them first), the error naming them.
func (mr *MR) Rereg(flags ibv.ReregMRFlags, pd *PD, buf []byte, access ibv.Access) error {
	if err := mr.live(); err != nil {
		return err
	}
	var newPD *nic.PD
	if flags&ibv.ReregMRChangePD != 0 {
		release, err := pd.use()
		if err != nil {
			return err
		}
		defer release()
		if err := mr.d.sameDevice("the new PD", pd.d); err != nil {
			return err
		}
		newPD = pd.pd
	}
	err := mr.d.n.Mem().ReregMR(mr.mr, int(flags), newPD, buf, 0, false, access)
	if err != nil {
		return mr.d.busy(err, fmt.Sprintf("MR %#x", mr.LKey()), func(obj any) bool {
			mw, ok := obj.(*MW)
			return ok && mw.mw.BoundTo(mr.mr)
		})
	}
	if flags&ibv.ReregMRChangePD != 0 {
		mr.pd.Store(pd)
	}
	return nil
}

// PD returns the protection domain (or parent domain) the region is
// registered in (ibv_mr.pd).
func (mr *MR) PD() *PD {
	if !mr.ok() {
		return nil
	}
	return mr.pd.Load()
}

// odpCaps is what QueryDeviceEx reports as odp_caps: a software NIC
// reads and writes an MR's memory when an operation needs it and pins
// nothing, so every MR is an on-demand one and every operation of every
// transport may use it (IBV_ACCESS_ON_DEMAND is accepted and changes
// nothing). Implicit ODP (ibv_reg_mr of the whole address space, addr
// NULL and length SIZE_MAX) is not offered: a Go program can register
// only memory it holds.
var odpCaps = ibv.ODPCaps{
	GeneralCaps: ibv.ODPSupport,
	RCODPCaps: ibv.ODPSupportSend | ibv.ODPSupportRecv | ibv.ODPSupportWrite | ibv.ODPSupportRead |
		ibv.ODPSupportAtomic | ibv.ODPSupportSRQRecv,
	UCODPCaps: ibv.ODPSupportSend | ibv.ODPSupportRecv | ibv.ODPSupportWrite | ibv.ODPSupportSRQRecv,
	UDODPCaps: ibv.ODPSupportSend | ibv.ODPSupportRecv | ibv.ODPSupportSRQRecv,
}

// AdviseMR gives advice about ranges of on-demand MRs of the PD
// (ibv_advise_mr): prefetch them for reading (AdviseMRAdvicePrefetch,
// PrefetchNoFault) or writing (PrefetchWrite). softnic's memory is
// always present, so there is nothing to fetch, but the SGEs are checked
// as the kernel checks them (ib_uverbs_advise_mr, mlx5_ib_advise_mr):
// each lkey must name a valid MR of the PD registered with
// IBV_ACCESS_ON_DEMAND, with LOCAL_WRITE for PrefetchWrite, and the
// range must lie inside it, else EFAULT; an unknown advice is
// EOPNOTSUPP, flags other than AdviseMRFlagFlush or no SGE EINVAL.
// With or without the flush flag it returns once done.
func (pd *PD) AdviseMR(advice ibv.AdviseMRAdvice, flags uint32, sgl []ibv.SGE) error {
	release, err := pd.use()
	if err != nil {
		return err
	}
	defer release()
	switch {
	case advice > ibv.AdviseMRAdvicePrefetchNoFault:
		return fmt.Errorf("%w: advice %d", EOPNOTSUPP, advice)
	case flags&^ibv.AdviseMRFlagFlush != 0:
		return fmt.Errorf("%w: advise flags %#x", EINVAL, flags)
	case len(sgl) == 0:
		return fmt.Errorf("%w: no SGE to advise on", EINVAL)
	}
	for i, s := range sgl {
		if err := pd.d.n.Mem().CheckAdvise(pd.pd, s, advice == ibv.AdviseMRAdvicePrefetchWrite); err != nil {
			return fmt.Errorf("%w: SGE %d (lkey %#x addr %#x length %d): %w", EFAULT, i, s.LKey, s.Addr, s.Length, err)
		}
	}
	return nil
}

// AllocNullMR would allocate a null MR (ibv_alloc_null_mr): one that
// discards what is written to it and reads as zeros. softnic does not
// have it, as rxe does not: it returns EOPNOTSUPP.
func (pd *PD) AllocNullMR() (*MR, error) {
	release, err := pd.use()
	if err != nil {
		return nil, err
	}
	release()
	return nil, errUnsupported("ibv_alloc_null_mr")
}
