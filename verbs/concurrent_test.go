package verbs_test

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// blockedIn waits until some goroutine's stack shows it blocked in fn
// (waiting on a lock taken in fn), and fails the test after a minute.
// It is how a test sees that a goroutine waits rather than returns:
// a goroutine waiting on a sync.Mutex is not durably blocked for
// testing/synctest, so these tests run on the real scheduler.
func blockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); runtime.Gosched() {
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				return
			}
		}
	}
	t.Fatalf("no goroutine blocked in %s", fn)
}

// TestPostWaitsForBatch: while one goroutine holds a WrStart batch,
// another goroutine's PostSend and BindMW on the QP wait, as they do on
// mlx5 (one send-queue lock), and post once the batch ends, after its
// WRs; before, they failed at once with EBUSY.
func TestPostWaitsForBatch(t *testing.T) {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := mpair(t, f, mopts{ops: verbs.SendOpsSend | verbs.SendOpsBindMW})
	x, err := a.qp.Ex()
	must(t, err)
	mw, err := a.pd.AllocMW(verbs.MWType1)
	must(t, err)
	for i, end := range []string{"WrComplete", "WrAbort"} {
		id := uint64(10 * (i + 1))
		postRecvMS(t, b, id, 0, 64)
		postRecvMS(t, b, id+1, 0, 64)
		x.WrStart()
		x.WRID, x.WRFlags = id, sig
		x.WrSend()
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 8)
		done := make(chan error, 2)
		go func() {
			_, err := a.qp.PostSend(ibv.SendWR{WRID: id + 1, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(0, 8)}})
			done <- err
			_, err = a.qp.BindMW(mw, verbs.MWBind{WRID: id + 2, SendFlags: sig})
			done <- err
		}()
		blockedIn(t, "verbs.(*QP).lockPost")
		select {
		case err := <-done:
			t.Fatalf("%s: PostSend of another goroutine during a batch returned %v; want it to wait", end, err)
		default:
		}
		want := []uint64{id + 1, id + 2}
		if end == "WrComplete" {
			must(t, x.WrComplete())
			want = append([]uint64{id}, want...)
		} else {
			x.WrAbort()
		}
		must(t, <-done)
		must(t, <-done)
		got := waitWC(t, a.cq, len(want))
		if len(got) != len(want) {
			t.Fatalf("%s: %d completions, want %d: %+v", end, len(got), len(want), got)
		}
		for k, wc := range got {
			if wc.WRID != want[k] || wc.Status != ibv.WCSuccess {
				t.Errorf("%s: completion %d: WR %d %v, want WR %d success", end, k, wc.WRID, wc.Status, want[k])
			}
		}
	}
}

// TestConcurrentPost: goroutines post RDMA WRITEs to one QP at once
// through PostSend, WrStart batches and BindMW, in random mixes; every WR
// completes exactly once and none is refused (run it under -race).
func TestConcurrentPost(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	f := fabric.New(fabric.Config{})
	defer f.Close()
	a, b := mpair(t, f, mopts{ops: verbs.SendOpsRDMAWrite | verbs.SendOpsBindMW})
	x, err := a.qp.Ex()
	must(t, err)
	const workers, perWorker = 8, 150
	credits := make(chan struct{}, 64) // the send queue's depth
	for range cap(credits) {
		credits <- struct{}{}
	}
	take := func(n int) {
		for range n {
			<-credits
		}
	}
	write := func(id uint64) ibv.SendWR {
		return ibv.SendWR{WRID: id, Opcode: ibv.WRRDMAWrite, Flags: sig, SGList: []ibv.SGE{a.mr.SGE(int(id%64)*8, 8)},
			RemoteAddr: b.mr.Addr() + id%64*8, RKey: b.mr.RKey()}
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			mw, err := a.pd.AllocMW(verbs.MWType1)
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < perWorker; {
				id := uint64(w*perWorker + i)
				n, kind := min(1+r.IntN(3), perWorker-i), r.IntN(3)
				if kind == 2 {
					n = 1
				}
				take(n)
				switch kind {
				case 0:
					wrs := make([]ibv.SendWR, n)
					for k := range wrs {
						wrs[k] = write(id + uint64(k))
					}
					if _, err := a.qp.PostSend(wrs...); err != nil {
						errs <- err
						return
					}
				case 1:
					x.WrStart()
					for k := range n {
						wr := write(id + uint64(k))
						x.WRID, x.WRFlags = wr.WRID, sig
						x.WrRDMAWrite(wr.RKey, wr.RemoteAddr)
						x.WrSetSGE(wr.SGList[0].LKey, wr.SGList[0].Addr, wr.SGList[0].Length)
					}
					if err := x.WrComplete(); err != nil {
						errs <- err
						return
					}
				case 2:
					if _, err := a.qp.BindMW(mw, verbs.MWBind{WRID: id, SendFlags: sig}); err != nil {
						errs <- err
						return
					}
				}
				i += n
			}
		}()
	}
	seen := make(map[uint64]int)
	wc := make([]ibv.WorkCompletion, 16)
	for end := time.Now().Add(2 * time.Minute); len(seen) < workers*perWorker; runtime.Gosched() {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d WRs completed", len(seen), workers*perWorker)
		}
		for _, c := range wc[:a.cq.Poll(wc)] {
			if c.Status != ibv.WCSuccess {
				t.Fatalf("WR %d: %v", c.WRID, c.Status)
			}
			if seen[c.WRID]++; seen[c.WRID] > 1 {
				t.Fatalf("WR %d completed twice", c.WRID)
			}
			credits <- struct{}{}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if k := a.cq.Poll(wc); k != 0 {
		t.Fatalf("%d completions more than WRs: %+v", k, wc[:k])
	}
}
