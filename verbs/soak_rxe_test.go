package verbs_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// TestSoakRxeWriter: a softnic NIC, its whole engine (receive goroutine,
// processors, timers), as the responder of a model of rxe's requester
// writing 4 MiB (transporttest.RxeWriter) through the interop bed's
// netem (3% loss, 1% duplication, 5% reordering, 200 µs) — the case one
// run of which stopped answering in the bed (docs/performance.md,
// "rc.reorderWindow"). Every byte must land, and the responder must
// answer until the last: two seconds without progress (thirty
// retransmit timeouts of rxe's) fail the test with the responder's
// state. The requester's first PSN is random, so runs wrap the PSN
// space now and then.
func TestSoakRxeWriter(t *testing.T) {
	seed := seedFor(t)
	synctest.Test(t, func(t *testing.T) {
		const writes, size = 64, 64 << 10
		f := fabric.New(fabric.Config{Seed: int64(seed)})
		defer f.Close()
		rng := rand.New(rand.NewPCG(seed, 0x7e1e))
		d := newSoakDev(t, f, mAddrB, make([]byte, 8))
		cq, err := d.dev.CreateCQ(16, nil)
		must(t, err)
		buf := make([]byte, writes*size)
		mr, err := d.pd.RegMR(buf, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
		must(t, err)
		qp, err := d.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(t, err)
		const peerQPN = 0x99
		raw := tt.AttachRaw(t, f, mAddrA.String(), mAddrB, wire.ConnectedSrcPort(peerQPN, qp.QPN()))
		psn0 := wire.PSN(rng.Uint32() & wire.PSNMask)
		must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, AccessFlags: ibv.AccessRemoteWrite},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
		must(t, qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: ibv.MTU1024, DestQPN: peerQPN,
			RQPSN: uint32(psn0), MaxDestRdAtomic: 16, MinRNRTimer: 12,
			AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: mAddrA, HopLimit: 64}}},
			ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
				ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))

		w := &tt.RxeWriter{PSN: psn0, Size: size, VA: mr.Addr(), RKey: mr.RKey(),
			Data: make([]byte, writes*size), Timeout: 4096 << 14 * time.Nanosecond}
		w.Send = func(h wire.Headers, payload []byte) {
			h.BTH.DestQP, h.BTH.PKey = qp.QPN(), wire.DefaultPKey
			raw.Send(h, payload)
		}
		for i := range w.Data {
			w.Data[i] = byte(rng.Uint32())
		}
		f.SetImpairment(fabric.Impairment{Loss: 0.03, Duplicate: 0.01, Reorder: 0.05,
			Delay: 200 * time.Microsecond, ReorderTimeout: 200 * time.Microsecond})

		start := time.Now()
		if err := w.Run(time.Sleep, time.Now, raw.Receive, 2*time.Second); err != nil {
			attr, _ := qp.Query()
			t.Fatalf("%v; responder %v, rq_psn %d; counters %+v", err, attr.State, wire.PSN(attr.RQPSN).Diff(psn0), d.dev.Counters())
		}
		if !bytes.Equal(buf, w.Data) {
			t.Fatal("the WRITEs' data differ from what was sent")
		}
		t.Logf("%d packets for %d, %d retries (%d timeouts), %d WQEs sent again from past their end, %v",
			d.dev.Counters().RcvdPkts, w.Total(), w.Retries, w.Timeouts, w.Renumbered, time.Since(start))
	})
}
