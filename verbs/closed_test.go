package verbs_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// TestClosedDevice: after Device.Close every call on an object of the
// device fails with an error wrapping ENODEV that says the device is
// closed, instead of the stale answers it gave before (QP.State said RTS,
// ReqNotify returned nil); QP.State and WQ.State say UNKNOWN; the calls
// that release (Destroy, Dealloc, Dereg, AckEvents, Close) still work.
func TestClosedDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{ops: verbs.SendOpsSend})
		srq, err := a.pd.CreateSRQ(verbs.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
		must(t, err)
		wq, err := a.dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: 4, MaxSGE: 1, PD: a.pd, CQ: a.cq})
		must(t, err)
		fr, err := a.pd.AllocMR(verbs.MRTypeMemReg, 2)
		must(t, err)
		mw, err := a.pd.AllocMW(verbs.MWType1)
		must(t, err)
		ch := a.dev.CreateCompChannel()
		ccq, err := a.dev.CreateCQ(4, ch)
		must(t, err)
		x, err := a.qp.Ex()
		must(t, err)
		must(t, a.dev.Close())

		send := ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{a.mr.SGE(0, 8)}}
		recv := ibv.RecvWR{SGList: []ibv.SGE{a.mr.SGE(0, 8)}}
		ctx := context.Background()
		second := func(_ int, err error) error { return err }
		calls := []struct {
			name string
			err  error
		}{
			{"QP.Modify", a.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)},
			{"QP.PostSend", second(a.qp.PostSend(send))},
			{"QP.PostRecv", second(a.qp.PostRecv(recv))},
			{"QP.BindMW", func() error { _, err := a.qp.BindMW(mw, verbs.MWBind{}); return err }()},
			{"QP.DrainSQ", a.qp.DrainSQ(ctx)},
			{"QP.AttachMcast", a.qp.AttachMcast(verbs.GID{0xff, 0x0e}, 0)},
			{"QP.ToInit", a.qp.ToInit(nil)},
			{"QPEx.WrComplete", func() error { x.WrStart(); x.WrSend(); return x.WrComplete() }()},
			{"CQ.ReqNotify", a.cq.ReqNotify(false)},
			{"Device.QueryPort", func() error { _, err := a.dev.QueryPort(1); return err }()},
			{"CQ.Resize", a.cq.Resize(64)},
			{"CQ.Wait", second(a.cq.Wait(ctx, make([]ibv.WorkCompletion, 1)))},
			{"CompChannel.GetEvent", func() error { _, err := ch.GetEvent(ctx); return err }()},
			{"SRQ.Modify", srq.Modify(&ibv.SRQAttr{SRQLimit: 1}, ibv.SRQAttrLimit)},
			{"SRQ.Query", func() error { _, err := srq.Query(); return err }()},
			{"SRQ.PostRecv", second(srq.PostRecv(recv))},
			{"WQ.Modify", wq.Modify(&ibv.WQAttr{State: ibv.WQStateRdy}, ibv.WQAttrState)},
			{"WQ.PostRecv", second(wq.PostRecv(recv))},
			{"MR.MapSG", second(fr.MapSG([][]byte{make([]byte, 4096)}, 4096))},
			{"MR.UpdateFastRegKey", fr.UpdateFastRegKey(fr.LKey() + 1)},
			{"Device.QueryGID", func() error { _, err := a.dev.QueryGID(1, 0); return err }()},
		}
		for _, c := range calls {
			apiWantErr(t, c.name+" after Close", c.err, "is closed", verbs.ENODEV)
		}
		if s := a.qp.State(); s != ibv.QPStateUnknown {
			t.Errorf("QP.State after Close = %v, want UNKNOWN", s)
		}
		if attr, _ := a.qp.Query(); attr.State != ibv.QPStateUnknown {
			t.Errorf("QP.Query after Close: state %v, want UNKNOWN", attr.State)
		}
		if s := wq.State(); s != ibv.WQStateUnknown {
			t.Errorf("WQ.State after Close = %v, want UNKNOWN", s)
		}
		// What releases still works.
		must(t, a.qp.Destroy())
		must(t, srq.Destroy())
		must(t, wq.Destroy())
		must(t, fr.Dereg())
		must(t, mw.Dealloc())
		must(t, ccq.AckEvents(0))
		must(t, ccq.Destroy())
		must(t, ch.Close())
		must(t, a.mr.Dereg())
		if err := a.cq.Destroy(); err != nil && !errors.Is(err, verbs.EBUSY) {
			t.Errorf("CQ.Destroy after Close: %v", err)
		}
	})
}
