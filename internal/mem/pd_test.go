package mem

import (
	"testing"

	"github.com/softnic/softnic/internal/errno"
)

func TestAllocPDHandles(t *testing.T) {
	tab := NewTable(Limits{MaxPD: 3})
	seen := map[uint32]bool{}
	var pds []*PD
	for range 3 {
		pd, err := tab.AllocPD()
		if err != nil {
			t.Fatalf("AllocPD: %v", err)
		}
		if pd.Handle() == 0 || seen[pd.Handle()] {
			t.Fatalf("AllocPD: handle %d zero or reused among live PDs %v", pd.Handle(), seen)
		}
		seen[pd.Handle()] = true
		pds = append(pds, pd)
	}
	if _, err := tab.AllocPD(); !isErr(err, errno.NoMemory) {
		t.Errorf("AllocPD beyond MaxPD: got %v, want errno.NoMemory", err)
	}
	if err := tab.DeallocPD(pds[1]); err != nil {
		t.Fatalf("DeallocPD: %v", err)
	}
	pd, err := tab.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD after a free: %v", err)
	}
	if pd.Handle() != pds[1].Handle() {
		t.Errorf("AllocPD after freeing handle %d in a full table: got handle %d, want the freed one", pds[1].Handle(), pd.Handle())
	}
}

func TestDeallocPDBusy(t *testing.T) {
	f := newFixture(t)
	buf := make([]byte, 64)
	mr := f.reg(buf, 0x1000, LW)
	mw := f.allocMW(1)
	f.pd.Ref()

	steps := []struct {
		name string
		undo func() error
		want error // DeallocPD's result after undo
	}{
		{"with an MR, an MW and a Ref", func() error { return nil }, errno.Busy},
		{"after DeregMR", func() error { return f.tab.DeregMR(mr) }, errno.Busy},
		{"after DeallocMW", func() error { return f.tab.DeallocMW(mw) }, errno.Busy},
		{"after Unref", func() error { f.pd.Unref(); return nil }, nil},
	}
	for _, s := range steps {
		if err := s.undo(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		wantErr(t, "DeallocPD "+s.name, f.tab.DeallocPD(f.pd), s.want)
	}
	wantErr(t, "DeallocPD twice", f.tab.DeallocPD(f.pd), errno.Invalid)
	_, err := f.tab.RegMR(f.pd, buf, 0, true, 0)
	wantErr(t, "RegMR on a freed PD", err, errno.Invalid)
	_, err = f.tab.AllocMW(f.pd, 1)
	wantErr(t, "AllocMW on a freed PD", err, errno.Invalid)
	_, err = f.tab.AllocMR(f.pd, 1)
	wantErr(t, "AllocMR on a freed PD", err, errno.Invalid)
}

func TestForeignPD(t *testing.T) {
	f := newFixture(t)
	other := NewTable(Limits{})
	opd, err := other.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeallocPD of another table's PD", f.tab.DeallocPD(opd), errno.Invalid)
	wantErr(t, "DeallocPD(nil)", f.tab.DeallocPD(nil), errno.Invalid)
	_, err = f.tab.RegMR(opd, make([]byte, 8), 0, true, 0)
	wantErr(t, "RegMR with another table's PD", err, errno.Invalid)
	_, err = f.tab.RegMR(nil, make([]byte, 8), 0, true, 0)
	wantErr(t, "RegMR with a nil PD", err, errno.Invalid)
}

func TestUnrefPanics(t *testing.T) {
	f := newFixture(t)
	defer func() {
		if recover() == nil {
			t.Errorf("Unref without Ref: got no panic, want one")
		}
	}()
	f.pd.Unref()
}
