package rc_test

// RC over a fabric that loses, duplicates, reorders and corrupts at
// random, both ways at once. Seeds are logged; a failure names the seed
// to replay.

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
)

// Layout of each end's 1 MiB buffer in the random workload.
const (
	rndSrc   = 0       // 64 KiB of source data, never written remotely
	rndRecv  = 1 << 16 // 128 receive slots
	rndWrite = 5 << 17 // 32 WRITE target slots (the peer writes here)
	rndRead  = 6 << 17 // 32 READ destination slots
	rndOrig  = 7 << 17 // fetch-add results, 8 bytes each
	rndCount = 1<<20 - 8
	rndSlot  = 4096
	rndMax   = 3 * 1024 // largest message
)

// flow is one direction's workload: the WRs e posts towards peer, the
// receives peer posts for them, and what must be in memory afterwards.
type flow struct {
	e, peer *end
	wrs     []ibv.SendWR
	recvs   []ibv.RecvWR
	want    []func(t *testing.T) // memory checks
	adds    int
}

func newFlow(rng *rand.Rand, e, peer *end, n, seed int) *flow {
	fl := &flow{e: e, peer: peer}
	fill(e.buf[rndSrc:rndSrc+1<<16], seed)
	lastWrite := map[int]func(t *testing.T){}
	lastRead := map[int]func(t *testing.T){}
	for i := range n {
		id := uint64(i)
		size := rng.IntN(rndMax + 1)
		off := rndSrc + rng.IntN(1<<16-size)
		switch k := rng.IntN(10); {
		case k < 4 && len(fl.recvs) < 128:
			slot := rndRecv + len(fl.recvs)*rndSlot
			fl.recvs = append(fl.recvs, recvWR(peer, id, slot, rndSlot))
			fl.wrs = append(fl.wrs, sendWR(e, id, ibv.WRSend, off, size))
			fl.want = append(fl.want, region(fmt.Sprint("SEND ", i), peer.buf[slot:slot+size], e.buf[off:off+size]))
		case k < 7:
			s := rng.IntN(32)
			dst := rndWrite + s*rndSlot
			fl.wrs = append(fl.wrs, rdmaWR(e, peer, id, ibv.WRRDMAWrite, off, dst, size))
			lastWrite[s] = region(fmt.Sprint("WRITE ", i), peer.buf[dst:dst+size], e.buf[off:off+size])
		case k < 9:
			s := rng.IntN(32)
			dst := rndRead + s*rndSlot
			fl.wrs = append(fl.wrs, rdmaWR(e, peer, id, ibv.WRRDMARead, dst, off, size))
			lastRead[s] = region(fmt.Sprint("READ ", i), e.buf[dst:dst+size], peer.buf[off:off+size])
		default:
			w := rdmaWR(e, peer, id, ibv.WRAtomicFetchAndAdd, rndOrig+8*fl.adds, rndCount, 8)
			w.CompareAdd = 1
			fl.wrs = append(fl.wrs, w)
			k := fl.adds
			fl.want = append(fl.want, func(t *testing.T) {
				if got := u64(e.buf[rndOrig+8*k:]); got != uint64(k) {
					t.Errorf("fetch-add %d returned %d, want %d", k, got, k)
				}
			})
			fl.adds++
		}
	}
	for _, c := range lastWrite {
		fl.want = append(fl.want, c)
	}
	for _, c := range lastRead {
		fl.want = append(fl.want, c)
	}
	return fl
}

// region returns a check that got holds what want holds at check time
// (both alias an end's memory; the source is never written remotely).
func region(what string, got, want []byte) func(t *testing.T) {
	return func(t *testing.T) { checkBytes(t, what, got, want) }
}

// TestRCRandomImpairments runs mixed traffic both ways through random
// loss, duplication, reordering, corruption and jitter: every WR completes
// successfully and in order, every SEND lands whole in its own receive,
// WRITEs and READs move the right bytes, each fetch-add counts once.
func TestRCRandomImpairments(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (fabric impairments and workload)", seed)
			synctest.Test(t, func(t *testing.T) { runRandom(t, seed) })
		})
	}
}

func runRandom(t *testing.T, seed int64) {
	n := tt.NewNet(t, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x50f7))
	mtu := []ibv.MTU{ibv.MTU256, ibv.MTU1024, ibv.MTU4096}[rng.IntN(3)]
	a, b := newPair(t, n, opts{mtu: mtu, timeout: 10, retry: 7, rnr: 7, bufSize: 1 << 20, maxWR: 512})
	n.Fabric().SetImpairment(fabric.Impairment{Loss: 0.02, Duplicate: 0.02, Reorder: 0.02, Corrupt: 0.01,
		Jitter: 20 * time.Microsecond})

	const count = 150
	flows := []*flow{newFlow(rng, a, b, count, 1000), newFlow(rng, b, a, count, 2000)}
	for _, fl := range flows {
		fl.peer.postRecv(fl.recvs...)
	}
	// Post in chunks so the send queues change under the loss.
	for start := 0; start < count; start += 25 {
		for _, fl := range flows {
			fl.e.post(fl.wrs[start : start+25]...)
		}
		n.Run(time.Duration(rng.IntN(3000)) * time.Microsecond)
	}

	// Each end's CQ holds its sends' completions and its receives'.
	want := map[*end]int{a: count + len(flows[1].recvs), b: count + len(flows[0].recvs)}
	n.RunUntil(fmt.Sprintf("seed %d: every completion", seed), 10*time.Minute, func() bool {
		return a.cq.Len() >= want[a] && b.cq.Len() >= want[b]
	})
	sends := map[*end][]ibv.WorkCompletion{}
	recvs := map[*end][]ibv.WorkCompletion{}
	for _, e := range []*end{a, b} {
		for _, wc := range e.waitWC(want[e]) {
			if wc.Opcode >= ibv.WCRecv {
				recvs[e] = append(recvs[e], wc)
			} else {
				sends[e] = append(sends[e], wc)
			}
		}
	}
	a.noWC(time.Second)
	b.noWC(0)

	for _, fl := range flows {
		for i, wc := range sends[fl.e] {
			if wc.WRID != uint64(i) || wc.Status != ibv.WCSuccess {
				t.Fatalf("seed %d: send completion %d: %+v", seed, i, wc)
			}
		}
		for i, wc := range recvs[fl.peer] {
			if want := fl.recvs[i].WRID; wc.WRID != want || wc.Status != ibv.WCSuccess {
				t.Fatalf("seed %d: receive completion %d: %+v, want wr_id %d", seed, i, wc, want)
			}
		}
		for _, check := range fl.want {
			check(t)
		}
		if got := u64(fl.peer.buf[rndCount:]); got != uint64(fl.adds) {
			t.Errorf("seed %d: counter %d after %d fetch-adds", seed, got, fl.adds)
		}
		wantState(t, "QP", fl.e, ibv.QPStateRTS)
	}
	ca, cb := a.ctr(), b.ctr()
	t.Logf("seed %d: MTU %d, %d timeouts, %d sequence NAKs, %d duplicates, %d fabric drops, %d ICRC errors",
		seed, mtu.Bytes(), ca.Timeouts.Load()+cb.Timeouts.Load(), ca.RcvdSeqErr.Load()+cb.RcvdSeqErr.Load(),
		ca.DuplicateRequest.Load()+cb.DuplicateRequest.Load(), n.Fabric().Stats().DropImpairment.Packets,
		ca.ICRCErr.Load()+cb.ICRCErr.Load())
}
