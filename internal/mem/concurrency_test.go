package mem

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentLookups runs lock-free lookups while other goroutines
// register, deregister, bind, invalidate and fast-register. Under -race it
// checks the hot path's synchronization; always, it checks that a lookup
// that succeeds returns the memory registered under that exact key.
func TestConcurrentLookups(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	f := newFixtureLim(t, Limits{KeySeed: seed})

	const (
		readers    = 2
		iterations = 1000
		bufLen     = 64
	)
	var (
		tags sync.Map                 // key → tag byte of the memory behind it
		keys atomic.Pointer[[]uint32] // keys readers try, live and dead
		hits atomic.Int64
	)
	publish := func(k uint32, tag byte) {
		tags.Store(k, tag)
		for {
			old := keys.Load()
			var next []uint32
			if old != nil {
				next = append(next, (*old)[max(0, len(*old)-63):]...)
			}
			next = append(next, k)
			if keys.CompareAndSwap(old, &next) {
				return
			}
		}
	}
	filled := func(tag byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = tag
		}
		return b
	}

	stop := make(chan struct{})
	var readersWG sync.WaitGroup
	for r := range readers {
		readersWG.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(r)))
			dst := make([][]byte, 0, 4)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ks := keys.Load()
				if ks == nil {
					continue
				}
				k := (*ks)[rng.IntN(len(*ks))]
				var b []byte
				var err error
				switch rng.IntN(3) {
				case 0:
					b, err = f.tab.Remote(f.pd, 1, k, 0x1000, 8, RR)
				case 1:
					b, err = f.tab.Local(f.pd, sge(0x1000, 8, k), false)
				case 2:
					var v [][]byte
					v, err = f.tab.RemoteV(f.pd, 1, k, 0x1000, 8, RR, dst[:0])
					if err == nil {
						b = v[0]
					}
				}
				if err != nil {
					continue
				}
				tag, ok := tags.Load(k)
				if !ok || b[0] != tag.(byte) || b[7] != tag.(byte) {
					t.Errorf("key %#x: got memory tagged %d, want %v", k, b[0], tag)
					return
				}
				hits.Add(1)
			}
		})
	}

	var writersWG sync.WaitGroup
	// Ordinary MRs: register, publish, deregister.
	writersWG.Go(func() {
		var live []*MR
		for i := range iterations {
			tag := byte(i)
			mr, err := f.tab.RegMR(f.pd, filled(tag, bufLen), 0x1000, true, LW|RR|MWB)
			if err != nil {
				t.Errorf("RegMR: %v", err)
				return
			}
			publish(mr.RKey(), tag)
			live = append(live, mr)
			if len(live) > 8 {
				if err := f.tab.DeregMR(live[0]); err != nil {
					t.Errorf("DeregMR: %v", err)
					return
				}
				live = live[1:]
			}
		}
	})
	// Type-2 windows over a fixed MR: bind, publish, invalidate.
	writersWG.Go(func() {
		target := f.reg(filled(0xee, bufLen), 0x1000, LW|MWB)
		mw, err := f.tab.AllocMW(f.pd, 2)
		if err != nil {
			t.Errorf("AllocMW: %v", err)
			return
		}
		for i := range iterations {
			rkey, err := f.tab.BindMW(mw, 1, f.pd, target.LKey(), 0x1000, bufLen, RR, uint32(i))
			if err != nil {
				t.Errorf("BindMW: %v", err)
				return
			}
			publish(rkey, 0xee)
			if err := f.tab.Invalidate(f.pd, 1, rkey); err != nil {
				t.Errorf("Invalidate: %v", err)
				return
			}
		}
	})
	// A fast-reg MR: map, register with a rotated key, publish, invalidate.
	writersWG.Go(func() {
		mr, err := f.tab.AllocMR(f.pd, 1)
		if err != nil {
			t.Errorf("AllocMR: %v", err)
			return
		}
		page := aligned(ps, ps)
		for i := range page {
			page[i] = 0xfa
		}
		key := mr.LKey()
		for range iterations {
			if _, err := f.tab.MapMRSG(mr, [][]byte{page}, ps); err != nil {
				t.Errorf("MapMRSG: %v", err)
				return
			}
			key = key&^0xff | (key+1)&0xff
			if err := f.tab.RegFast(f.pd, mr, key, 0x1000, bufLen, LW|RR); err != nil {
				t.Errorf("RegFast: %v", err)
				return
			}
			publish(key, 0xfa)
			if err := f.tab.Invalidate(f.pd, 1, key); err != nil {
				t.Errorf("Invalidate: %v", err)
				return
			}
		}
	})
	writersWG.Wait()
	close(stop)
	readersWG.Wait()
	t.Logf("%d successful lookups during the churn", hits.Load())
}
