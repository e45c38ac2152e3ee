package verbs_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestIPCsumRefused: IBV_SEND_IP_CSUM, a checksum offload softnic does
// not have, is refused with EINVAL naming the flag, through PostSend (at
// the WR, those before it posted) and WrComplete (nothing posted), as
// mlx5 refuses it without IBV_DEVICE_RAW_IP_CSUM or UD_IP_CSUM, which the
// device does not advertise; nothing is sent. (Before, it was posted and
// ignored.)
func TestIPCsumRefused(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{typ: typ, ops: verbs.SendOpsSend})
				e := &opEnv{a: a, b: b, typ: typ}
				if typ == ibv.QPTypeUD {
					var err error
					e.ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
					must(t, err)
				}
				if caps := a.dev.QueryDevice().DeviceCapFlags; caps&(ibv.CapUDIPCsum|ibv.CapRawIPCsum) != 0 {
					t.Errorf("device_cap_flags %#x advertise IP checksum offload", caps)
				}
				postRecvMS(t, b, 1, 0, 256)
				sent := a.dev.Counters().SentPkts
				good := e.ud(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
				bad := e.ud(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: sig | ibv.SendIPCsum, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
				n, err := a.qp.PostSend(good, bad)
				apiWantErr(t, "PostSend with IP_CSUM", err, "IBV_SEND_IP_CSUM", verbs.EINVAL)
				if n != 1 {
					t.Errorf("posted %d, want 1 (bad_wr is the second)", n)
				}
				mone(t, a, 1, ibv.WCSuccess, ibv.WCSend)

				x, err := a.qp.Ex()
				must(t, err)
				x.WrStart()
				x.WRID, x.WRFlags = 3, sig|ibv.SendIPCsum
				x.WrSend()
				x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 8)
				if typ == ibv.QPTypeUD {
					x.WrSetUDAddr(e.ah, b.qp.QPN(), 0x1111)
				}
				apiWantErr(t, "WrComplete with IP_CSUM", x.WrComplete(), "IBV_SEND_IP_CSUM", verbs.EINVAL)
				noWC(t, a.cq, time.Millisecond)
				if got := a.dev.Counters().SentPkts - sent; got != 1 {
					t.Errorf("%d packets sent, want 1 (the good WR's)", got)
				}
			})
		})
	}
}

// TestWrSetUDAddrNotUD: ibv_wr_set_ud_addr on an RC or UC QP fails the
// batch with EINVAL (mlx5 gives the setter to UD QPs only) and nothing is
// posted. (Before, the address was ignored and the WR sent.)
func TestWrSetUDAddrNotUD(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{typ: typ, ops: verbs.SendOpsSend})
				ah, err := a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
				must(t, err)
				postRecvMS(t, b, 1, 0, 64)
				x, err := a.qp.Ex()
				must(t, err)
				x.WrStart()
				x.WRID, x.WRFlags = 1, sig
				x.WrSend()
				x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 8)
				x.WrSetUDAddr(ah, b.qp.QPN(), 0x1111)
				apiWantErr(t, "WrSetUDAddr on "+typ.String(), x.WrComplete(), "ibv_wr_set_ud_addr on a "+typ.String()+" QP", verbs.EINVAL)
				noWC(t, a.cq, time.Millisecond)
				noWC(t, b.cq, 0)
			})
		})
	}
}
