package verbs_test

import (
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The receive-queue benchmarks measure what posting one receive WR with
// two SGEs to an SRQ or a WQ costs, ring and checks included; whatever
// empties the full queue between rounds is left out of the figures.

const benchRQWR = 1024

// benchRQ returns a device's PD, an MR and a CQ on a clean fabric.
func benchRQ(b *testing.B) (*verbs.Device, *verbs.PD, *verbs.MR, *verbs.CQ) {
	b.Helper()
	f := fabric.New(fabric.Config{})
	b.Cleanup(func() { f.Close() })
	dev := openDev(b, f, "10.0.0.1", 0)
	pd, err := dev.AllocPD()
	must(b, err)
	mr, err := pd.RegMR(make([]byte, 1<<16), ibv.AccessLocalWrite)
	must(b, err)
	cq, err := dev.CreateCQ(64, nil)
	must(b, err)
	return dev, pd, mr, cq
}

// BenchmarkSRQPostRecv posts one WR at a time to an SRQ of 1024 WRs,
// made afresh when full.
func BenchmarkSRQPostRecv(b *testing.B) {
	_, pd, mr, _ := benchRQ(b)
	attr := verbs.SRQInitAttr{MaxWR: benchRQWR, MaxSGE: 2}
	srq, err := pd.CreateSRQ(attr)
	must(b, err)
	wr := ibv.RecvWR{SGList: []ibv.SGE{mr.SGE(0, 64), mr.SGE(64, 64)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if srq.Len() == benchRQWR {
			b.StopTimer()
			must(b, srq.Destroy())
			srq, err = pd.CreateSRQ(attr)
			must(b, err)
			b.StartTimer()
		}
		wr.WRID = uint64(i)
		if _, err := srq.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWQPostRecv posts one WR at a time to a RDY WQ of 1024 WRs,
// emptied through RESET when full.
func BenchmarkWQPostRecv(b *testing.B) {
	dev, pd, mr, cq := benchRQ(b)
	wq, err := dev.CreateWQ(verbs.WQInitAttr{Type: ibv.WQTypeRQ, MaxWR: benchRQWR, MaxSGE: 2, PD: pd, CQ: cq})
	must(b, err)
	wqTo(b, wq, ibv.WQStateRdy)
	wr := ibv.RecvWR{SGList: []ibv.SGE{mr.SGE(0, 64), mr.SGE(64, 64)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if wq.Len() == benchRQWR {
			b.StopTimer()
			wqTo(b, wq, ibv.WQStateReset)
			wqTo(b, wq, ibv.WQStateRdy)
			b.StartTimer()
		}
		wr.WRID = uint64(i)
		if _, err := wq.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
	}
}
