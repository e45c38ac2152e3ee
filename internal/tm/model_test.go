package tm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
)

// TestRandomAgainstModel runs random adds, deletes, matches, releases,
// unexpected messages and syncs on a List and on a plain model (a slice
// of the listed entries in posting order), and compares every outcome.
func TestRandomAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	type ment struct {
		handle          uint32
		tag, mask, wrid uint64
	}
	const maxTags = 6
	var cq cqLog
	l := New(maxTags, 4, 1, &cq)
	var listed []ment // in posting order
	consumed := map[uint32]bool{}
	var hw, sw uint32
	var w transport.RecvWQE
	for step := range 5000 {
		switch r.IntN(6) {
		case 0, 1: // add
			op := ibv.OpsWR{Opcode: ibv.WRTagAdd, RecvWRID: uint64(step), Tag: uint64(r.IntN(4)), Mask: []uint64{0, 1, 3, ^uint64(0)}[r.IntN(4)]}
			op.Tag &= op.Mask
			ops := []ibv.OpsWR{op}
			_, err := l.Post(ops)
			full := len(listed)+len(consumed) == maxTags
			if full != (err != nil) {
				t.Fatalf("seed %d step %d: add with %d tags held: err %v", seed, step, len(listed)+len(consumed), err)
			}
			if err == nil {
				listed = append(listed, ment{ops[0].Handle, op.Tag, op.Mask, op.RecvWRID})
			}
		case 2: // del
			h := uint32(r.IntN(maxTags))
			l.Post([]ibv.OpsWR{{Opcode: ibv.WRTagDel, Handle: h}})
			wantErr := true
			for i, e := range listed {
				if e.handle == h {
					listed, wantErr = append(listed[:i], listed[i+1:]...), false
					break
				}
			}
			got := cq.take()
			if wantErr != (len(got) == 1 && got[0].Status == ibv.WCTMErr) {
				t.Fatalf("seed %d step %d: del %d: completions %+v, want error %v", seed, step, h, got, wantErr)
			}
		case 3: // match
			tag := uint64(r.IntN(4))
			h, ok := l.Match(tag, &w)
			want := -1
			if hw == sw {
				for i, e := range listed {
					if tag&e.mask == e.tag {
						want = i
						break
					}
				}
			}
			if ok != (want >= 0) || ok && (h != listed[want].handle || w.WRID != listed[want].wrid) {
				t.Fatalf("seed %d step %d: Match(%d) = %d %v wrid %d, model %d", seed, step, tag, h, ok, w.WRID, want)
			}
			if ok {
				consumed[h] = true
				listed = append(listed[:want], listed[want+1:]...)
			}
		case 4: // a consumed message completes, or an unexpected one arrives
			if len(consumed) > 0 && r.IntN(2) == 0 {
				for h := range consumed {
					l.Release(h)
					delete(consumed, h)
					break
				}
			} else {
				l.Unexpected()
				hw++
			}
		case 5: // sync, with the right count or a stale one
			n := hw
			if r.IntN(3) == 0 && n > 0 {
				n--
			}
			l.Post([]ibv.OpsWR{{Opcode: ibv.WRTagSync, Flags: ibv.OpsTMSync | ibv.OpsSignaled, UnexpectedCnt: n}})
			sw = n
			if got := cq.take(); len(got) != 1 || (got[0].Flags&ibv.WCTMSyncReq != 0) != (sw != hw) {
				t.Fatalf("seed %d step %d: sync %d of %d: %+v", seed, step, n, hw, got)
			}
		}
	}
}
