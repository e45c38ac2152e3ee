package verbs_test

import (
	"bytes"
	"errors"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestReregMR: ibv_rereg_mr moves a region to new memory
// (CHANGE_TRANSLATION: the same rkey reaches the new buffer at its
// address, the old one is left alone), to another PD (CHANGE_PD) and to
// other rights (CHANGE_ACCESS: a WRITE it no longer allows fails), keys
// unchanged; the refusals (no flags, access without its flag, a
// fast-registration MR, a region with a bound window: EBUSY naming it)
// change nothing. (Before, there was no MR.Rereg.)
func TestReregMR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		write := func(id uint64, addr uint64, want ibv.WCStatus) {
			t.Helper()
			copy(b.buf, "written by b")
			mpost(t, b.qp, ibv.SendWR{WRID: id, Opcode: ibv.WRRDMAWrite, Flags: sig, SGList: []ibv.SGE{b.mr.SGE(0, 12)},
				RemoteAddr: addr, RKey: a.mr.RKey()})
			mone(t, b, id, want, ibv.WCRDMAWrite)
		}
		key, old := a.mr.LKey(), a.buf
		write(1, a.mr.Addr(), ibv.WCSuccess)
		fresh := make([]byte, 4096)
		must(t, a.mr.Rereg(ibv.ReregMRChangeTranslation, nil, fresh, 0))
		if a.mr.LKey() != key || a.mr.Addr() != addrOf(fresh) || a.mr.Len() != 4096 || &a.mr.Buf()[0] != &fresh[0] {
			t.Fatalf("after rereg: key %#x addr %#x len %d, want key %#x at the new buffer", a.mr.LKey(), a.mr.Addr(), a.mr.Len(), key)
		}
		clear(old[:12])
		write(2, a.mr.Addr()+100, ibv.WCSuccess)
		if !bytes.Equal(fresh[100:112], []byte("written by b")) || !bytes.Equal(old[:12], make([]byte, 12)) {
			t.Errorf("the WRITE after rereg: new buffer %q, old %q", fresh[100:112], old[:12])
		}

		pd2, err := a.dev.AllocPD()
		must(t, err)
		must(t, a.mr.Rereg(ibv.ReregMRChangePD, pd2, nil, 0))
		if a.mr.PD() != pd2 {
			t.Errorf("MR.PD after CHANGE_PD: %p, want %p", a.mr.PD(), pd2)
		}
		if err := pd2.Dealloc(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("Dealloc of the MR's new PD: %v, want EBUSY", err)
		}
		must(t, a.mr.Rereg(ibv.ReregMRChangePD, a.pd, nil, 0))
		must(t, pd2.Dealloc())

		fr, err := a.pd.AllocMR(verbs.MRTypeMemReg, 1)
		must(t, err)
		mw := mallocMW(t, a, verbs.MWType1)
		mbind(t, a, mw, a.mr, 0, 64, ibv.AccessRemoteRead)
		for _, tc := range []struct {
			name string
			err  error
			want error
			text string
		}{
			{"no flags", a.mr.Rereg(0, nil, nil, 0), verbs.EINVAL, "rereg flags"},
			{"unknown flags", a.mr.Rereg(8, nil, nil, 0), verbs.EINVAL, "rereg flags"},
			{"access without its flag", a.mr.Rereg(ibv.ReregMRChangePD, a.pd, nil, ibv.AccessLocalWrite), verbs.EINVAL, "CHANGE_ACCESS"},
			{"empty buffer", a.mr.Rereg(ibv.ReregMRChangeTranslation, nil, nil, 0), verbs.EINVAL, ""},
			{"fast-reg MR", fr.Rereg(ibv.ReregMRChangeAccess, nil, nil, ibv.AccessLocalWrite), verbs.EINVAL, "fast-registration"},
			{"bound window", a.mr.Rereg(ibv.ReregMRChangeAccess, nil, nil, ibv.AccessLocalWrite), verbs.EBUSY, "in use by 1 MW"},
		} {
			apiWantErr(t, "Rereg with "+tc.name, tc.err, tc.text, tc.want)
		}
		mbind(t, a, mw, nil, 0, 0, 0) // unbind
		must(t, a.mr.Rereg(ibv.ReregMRChangeAccess, nil, nil, ibv.AccessLocalWrite))
		write(3, a.mr.Addr(), ibv.WCRemAccessErr)
	})
}

// TestAdviseMR: ibv_advise_mr on on-demand MRs succeeds (softnic's memory
// is always present) and is refused as the kernel refuses it: EFAULT for
// an MR registered without IBV_ACCESS_ON_DEMAND, a bad lkey, a range out
// of the MR or PREFETCH_WRITE without LOCAL_WRITE; EOPNOTSUPP for an
// unknown advice; EINVAL for unknown flags or no SGE. The device
// advertises ODP. (Before, there was no AdviseMR.)
func TestAdviseMR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{})
		if c := a.dev.QueryDeviceEx().ODPCaps; c.GeneralCaps&ibv.ODPSupport == 0 || c.RCODPCaps == 0 {
			t.Errorf("odp_caps %+v: want ODP supported on RC", c)
		}
		odp, err := a.pd.RegMR(make([]byte, 4096), ibv.AccessLocalWrite|ibv.AccessOnDemand)
		must(t, err)
		odpRO, err := a.pd.RegMR(make([]byte, 4096), ibv.AccessOnDemand)
		must(t, err)
		must(t, a.pd.AdviseMR(ibv.AdviseMRAdvicePrefetchWrite, ibv.AdviseMRFlagFlush, []ibv.SGE{odp.SGE(0, 4096)}))
		must(t, a.pd.AdviseMR(ibv.AdviseMRAdvicePrefetch, 0, []ibv.SGE{odp.SGE(100, 8), odpRO.SGE(0, 16)}))
		for _, tc := range []struct {
			name   string
			advice ibv.AdviseMRAdvice
			flags  uint32
			sgl    []ibv.SGE
			want   error
		}{
			{"not ODP", ibv.AdviseMRAdvicePrefetch, 0, []ibv.SGE{a.mr.SGE(0, 8)}, verbs.EFAULT},
			{"bad lkey", ibv.AdviseMRAdvicePrefetch, 0, []ibv.SGE{{Addr: odp.Addr(), Length: 8, LKey: odp.LKey() ^ 1}}, verbs.EFAULT},
			{"out of the MR", ibv.AdviseMRAdvicePrefetch, 0, []ibv.SGE{odp.SGE(4090, 8)}, verbs.EFAULT},
			{"write without LOCAL_WRITE", ibv.AdviseMRAdvicePrefetchWrite, 0, []ibv.SGE{odpRO.SGE(0, 8)}, verbs.EFAULT},
			{"unknown advice", 7, 0, []ibv.SGE{odp.SGE(0, 8)}, verbs.EOPNOTSUPP},
			{"unknown flag", ibv.AdviseMRAdvicePrefetch, 2, []ibv.SGE{odp.SGE(0, 8)}, verbs.EINVAL},
			{"no SGE", ibv.AdviseMRAdvicePrefetch, 0, nil, verbs.EINVAL},
		} {
			if err := a.pd.AdviseMR(tc.advice, tc.flags, tc.sgl); !errors.Is(err, tc.want) {
				t.Errorf("AdviseMR %s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, err := a.pd.AllocNullMR(); !errors.Is(err, verbs.EOPNOTSUPP) {
			t.Errorf("AllocNullMR: %v, want EOPNOTSUPP", err)
		}
	})
}

// addrOf is the address of b's first byte, as RegMR registers it.
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
