package mem

import (
	"testing"

	"github.com/softnic/softnic/ibv"
)

type benchSetup struct {
	tab       *Table
	pd        *PD
	mrKey     uint32
	mwKey     uint32
	fastKey   uint32
	word      []byte
	localSGE  ibv.SGE
	badKey    uint32
	fastStart uint64
}

func newBench(tb testing.TB) *benchSetup {
	tab := NewTable(Limits{KeySeed: testSeed})
	pd, _ := tab.AllocPD()
	buf := aligned(1<<16, 8)
	// Some neighbours, so the lookup is not into an otherwise empty table.
	for range 100 {
		if _, err := tab.RegMR(pd, buf, 0, true, LW); err != nil {
			tb.Fatal(err)
		}
	}
	mr, err := tab.RegMR(pd, buf, 0x1_0000_0000, true, allRemote|MWB)
	if err != nil {
		tb.Fatal(err)
	}
	mw, _ := tab.AllocMW(pd, 2)
	mwKey, err := tab.BindMW(mw, 1, pd, mr.LKey(), 0x1_0000_0000, 1<<12, RR|RW, 0x42)
	if err != nil {
		tb.Fatal(err)
	}
	fast, _ := tab.AllocMR(pd, 4)
	p := pages(4)
	if _, err := tab.MapMRSG(fast, p, ps); err != nil {
		tb.Fatal(err)
	}
	if err := tab.RegFast(pd, fast, fast.LKey(), 0x2_0000_0000, 4*ps, LW|RR|RW); err != nil {
		tb.Fatal(err)
	}
	word, err := tab.RemoteAtomic(pd, 1, mr.RKey(), 0x1_0000_0008, RA)
	if err != nil {
		tb.Fatal(err)
	}
	return &benchSetup{
		tab: tab, pd: pd, mrKey: mr.RKey(), mwKey: mwKey, fastKey: fast.RKey(), word: word,
		localSGE: ibv.SGE{Addr: 0x1_0000_0100, Length: 1024, LKey: mr.LKey()},
		badKey:   flipKeyByte(mr.RKey()), fastStart: 0x2_0000_0000,
	}
}

// TestHotPathAllocations pins the 0-allocation promise of the lookups,
// refused or not.
func TestHotPathAllocations(t *testing.T) {
	s := newBench(t)
	dst := make([][]byte, 0, 4)
	cases := []struct {
		name string
		f    func()
	}{
		{"Remote MR", func() { s.tab.Remote(s.pd, 1, s.mrKey, 0x1_0000_0000, 4096, RW) }},
		{"Remote MW", func() { s.tab.Remote(s.pd, 1, s.mwKey, 0x1_0000_0000, 4096, RR) }},
		{"Remote bad key", func() { s.tab.Remote(s.pd, 1, s.badKey, 0x1_0000_0000, 8, RR) }},
		{"Remote out of range", func() { s.tab.Remote(s.pd, 1, s.mrKey, 0, 8, RR) }},
		{"Remote missing right", func() { s.tab.Remote(s.pd, 1, s.mwKey, 0x1_0000_0000, 8, RA) }},
		{"Remote discontiguous", func() { s.tab.Remote(s.pd, 1, s.fastKey, s.fastStart+ps-4, 8, RR) }},
		{"RemoteV fast", func() { s.tab.RemoteV(s.pd, 1, s.fastKey, s.fastStart+100, 3*ps, RR, dst[:0]) }},
		{"RemoteAtomic", func() { s.tab.RemoteAtomic(s.pd, 1, s.mrKey, 0x1_0000_0008, RA) }},
		{"RemoteAtomic misaligned", func() { s.tab.RemoteAtomic(s.pd, 1, s.mrKey, 0x1_0000_0004, RA) }},
		{"Local", func() { s.tab.Local(s.pd, s.localSGE, true) }},
		{"LocalV", func() { s.tab.LocalV(s.pd, s.localSGE, true, dst[:0]) }},
		{"Flush", func() { s.tab.Flush(s.pd, 1, s.mrKey, 0x1_0000_0000, 64, FG, FlushRange) }},
		{"FetchAdd", func() { s.tab.FetchAdd(s.word, 1) }},
	}
	for _, c := range cases {
		if got := testing.AllocsPerRun(100, c.f); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, got)
		}
	}
}

func BenchmarkRemoteMR(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tab.Remote(s.pd, 1, s.mrKey, 0x1_0000_0000, 4096, RW); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRemoteMW(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tab.Remote(s.pd, 1, s.mwKey, 0x1_0000_0000, 4096, RR); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRemoteRefused(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tab.Remote(s.pd, 1, s.badKey, 0x1_0000_0000, 4096, RW); err == nil {
			b.Fatal("accepted a bad key")
		}
	}
}

func BenchmarkRemoteVFastReg(b *testing.B) {
	s := newBench(b)
	dst := make([][]byte, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tab.RemoteV(s.pd, 1, s.fastKey, s.fastStart+100, 3*ps, RR, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLocal(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.tab.Local(s.pd, s.localSGE, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRemoteMRParallel(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.tab.Remote(s.pd, 1, s.mrKey, 0x1_0000_0000, 4096, RW); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkFetchAdd(b *testing.B) {
	s := newBench(b)
	b.ReportAllocs()
	for b.Loop() {
		s.tab.FetchAdd(s.word, 1)
	}
}
