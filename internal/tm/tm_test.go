package tm

import (
	"errors"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/transport"
)

type cqLog []ibv.WorkCompletion

func (c *cqLog) Push(wc *ibv.WorkCompletion, _ bool) bool { *c = append(*c, *wc); return true }

func (c *cqLog) take() []ibv.WorkCompletion { w := *c; *c = nil; return w }

func add(wrid, tag, mask uint64, flags ibv.OpsFlags) ibv.OpsWR {
	return ibv.OpsWR{WRID: wrid, Opcode: ibv.WRTagAdd, Flags: flags, RecvWRID: wrid + 1000, Tag: tag, Mask: mask,
		SGList: []ibv.SGE{{Addr: wrid, Length: 64, LKey: 1}}}
}

func mustPost(t *testing.T, l *List, ops ...ibv.OpsWR) []ibv.OpsWR {
	t.Helper()
	if bad, err := l.Post(ops); err != nil {
		t.Fatalf("Post: bad %d: %v", bad, err)
	}
	return ops
}

func TestAddMatchEarliestWins(t *testing.T) {
	var cq cqLog
	l := New(8, 8, 1, &cq)
	ops := mustPost(t, l,
		add(1, 0x10, 0xff, 0),     // matches 0x10 exactly
		add(2, 0x00, 0x00, 0),     // matches everything
		add(3, 0x10, 0xf0, 0),     // matches 0x1?
		add(4, 0xabc0, 0xfff0, 0)) // matches 0xabc?
	for i, op := range ops {
		if op.Handle != uint32(i) {
			t.Errorf("op %d handle %d, want %d", i, op.Handle, i)
		}
	}
	if got := cq.take(); len(got) != 0 {
		t.Fatalf("unsignaled adds completed: %+v", got)
	}
	var w transport.RecvWQE
	for _, c := range []struct {
		tag    uint64
		handle uint32
		wrid   uint64
	}{
		{0xabc5, 1, 1002}, // the wildcard was posted before the 0xabc? entry
		{0xabc5, 3, 1004}, // then the 0xabc? entry
		{0x10, 0, 1001},   // the exact entry is the earliest
		{0x1f, 2, 1003},
	} {
		h, ok := l.Match(c.tag, &w)
		if !ok || h != c.handle || w.WRID != c.wrid || w.Length != 64 {
			t.Errorf("Match(%#x) = %d %v wrid %d len %d, want %d true wrid %d len 64", c.tag, h, ok, w.WRID, w.Length, c.handle, c.wrid)
		}
	}
	if h, ok := l.Match(0x10, &w); ok {
		t.Errorf("Match on an emptied list = %d, want none", h)
	}
}

func TestMaxTagsAndHandleReuse(t *testing.T) {
	var cq cqLog
	l := New(2, 8, 1, &cq)
	ops := []ibv.OpsWR{add(1, 1, ^uint64(0), 0), add(2, 2, ^uint64(0), 0), add(3, 3, ^uint64(0), 0)}
	bad, err := l.Post(ops)
	if bad != 2 || !errors.Is(err, errno.Full) {
		t.Fatalf("third add of 2: bad %d err %v, want 2 ErrFull", bad, err)
	}
	// Free handle 1, then 0: they come back in that order.
	mustPost(t, l, ibv.OpsWR{Opcode: ibv.WRTagDel, Handle: 1}, ibv.OpsWR{Opcode: ibv.WRTagDel, Handle: 0})
	again := mustPost(t, l, add(4, 4, ^uint64(0), 0), add(5, 5, ^uint64(0), 0))
	if again[0].Handle != 1 || again[1].Handle != 0 {
		t.Errorf("reused handles %d %d, want 1 0", again[0].Handle, again[1].Handle)
	}
}

func TestPostRefusals(t *testing.T) {
	var cq cqLog
	l := New(4, 2, 1, &cq)
	two := []ibv.SGE{{Length: 1}, {Length: 1}}
	for _, c := range []struct {
		name string
		ops  []ibv.OpsWR
		bad  int
		want error
	}{
		{"too many SGEs", []ibv.OpsWR{add(1, 1, 1, 0), {Opcode: ibv.WRTagAdd, SGList: two}}, 1, errno.Invalid},
		{"bad opcode", []ibv.OpsWR{{Opcode: 9}}, 0, errno.Invalid},
		{"handle outside the list", []ibv.OpsWR{{Opcode: ibv.WRTagDel, Handle: 4}}, 0, errno.Invalid},
		{"beyond max_ops", []ibv.OpsWR{{Opcode: ibv.WRTagSync}, {Opcode: ibv.WRTagSync}, {Opcode: ibv.WRTagSync}}, 2, errno.Full},
	} {
		bad, err := l.Post(c.ops)
		if bad != c.bad || !errors.Is(err, c.want) {
			t.Errorf("%s: bad %d err %v, want %d %v", c.name, bad, err, c.bad, c.want)
		}
	}
}

func TestDelete(t *testing.T) {
	var cq cqLog
	l := New(4, 8, 1, &cq)
	ops := mustPost(t, l, add(1, 7, ^uint64(0), ibv.OpsSignaled), add(2, 8, ^uint64(0), 0))
	if got := cq.take(); len(got) != 1 || got[0].Opcode != ibv.WCTMAdd || got[0].WRID != 1 || got[0].Status != ibv.WCSuccess {
		t.Fatalf("signaled add completions %+v, want one TM_ADD wr_id 1", got)
	}
	var w transport.RecvWQE
	if _, ok := l.Match(8, &w); !ok {
		t.Fatal("tag 8 did not match")
	}
	// Deleting the listed tag succeeds; deleting the consumed one fails,
	// with a completion even though unsignaled; so does deleting twice.
	mustPost(t, l,
		ibv.OpsWR{WRID: 10, Opcode: ibv.WRTagDel, Handle: ops[0].Handle, Flags: ibv.OpsSignaled},
		ibv.OpsWR{WRID: 11, Opcode: ibv.WRTagDel, Handle: ops[1].Handle},
		ibv.OpsWR{WRID: 12, Opcode: ibv.WRTagDel, Handle: ops[0].Handle})
	got := cq.take()
	want := []ibv.WorkCompletion{
		{WRID: 10, Opcode: ibv.WCTMDel, Status: ibv.WCSuccess},
		{WRID: 11, Opcode: ibv.WCTMDel, Status: ibv.WCTMErr},
		{WRID: 12, Opcode: ibv.WCTMDel, Status: ibv.WCTMErr},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d completions %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("completion %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, ok := l.Match(7, &w); ok {
		t.Error("a deleted tag matched")
	}
	// Once released, the consumed handle is free for a new add.
	l.Release(ops[1].Handle)
	l.Release(ops[1].Handle) // a second release changes nothing
	n := 0
	for {
		if _, err := l.Post([]ibv.OpsWR{add(3, 3, 3, 0)}); err != nil {
			break
		}
		n++
	}
	if n != 4 {
		t.Errorf("free tags after release %d, want 4", n)
	}
}

func TestPhaseSync(t *testing.T) {
	var cq cqLog
	l := New(4, 8, 1, &cq)
	mustPost(t, l, add(1, 5, ^uint64(0), 0))
	if !l.Unexpected() {
		t.Fatal("an unexpected message did not ask for a sync")
	}
	var w transport.RecvWQE
	if _, ok := l.Match(5, &w); ok {
		t.Fatal("matched while software lags the unexpected count")
	}
	if !l.Unexpected() {
		t.Fatal("the second unexpected message did not ask for a sync")
	}
	// A sync with a stale count leaves matching off and asks again.
	mustPost(t, l, ibv.OpsWR{WRID: 20, Opcode: ibv.WRTagSync, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 1})
	if got := cq.take(); len(got) != 1 || got[0].Opcode != ibv.WCTMSync || got[0].Flags&ibv.WCTMSyncReq == 0 {
		t.Fatalf("stale sync completions %+v, want one TM_SYNC with TM_SYNC_REQ", got)
	}
	if on, n := l.Matching(); on || n != 2 {
		t.Fatalf("Matching() = %v %d, want false 2", on, n)
	}
	if _, ok := l.Match(5, &w); ok {
		t.Fatal("matched after a stale sync")
	}
	// The right count, carried by an add, turns matching back on.
	mustPost(t, l, ibv.OpsWR{WRID: 21, Opcode: ibv.WRTagAdd, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 2, Tag: 6, Mask: ^uint64(0)})
	if got := cq.take(); len(got) != 1 || got[0].Opcode != ibv.WCTMAdd || got[0].Flags != 0 {
		t.Fatalf("sync completions %+v, want one TM_ADD without flags", got)
	}
	if h, ok := l.Match(5, &w); !ok || h != 0 || w.WRID != 1001 {
		t.Fatalf("Match(5) after sync = %d %v wrid %d, want 0 true 1001", h, ok, w.WRID)
	}
}
