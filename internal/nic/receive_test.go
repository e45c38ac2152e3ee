package nic_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/softnic/softnic/internal/nic"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// scriptLink hands its datagrams to the first ReadBatch and reports the
// second call, which the engine makes only after receiving the first
// batch; then it blocks until Close.
type scriptLink struct {
	addr    netip.Addr
	dgs     []link.Datagram
	calls   int
	drained chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (l *scriptLink) ReadBatch(msgs []link.Datagram) (int, error) {
	l.calls++
	if l.calls == 1 {
		n := 0
		for ; n < len(l.dgs) && n < len(msgs); n++ {
			msgs[n].Encap = l.dgs[n].Encap
			msgs[n].Buf = msgs[n].Buf[:copy(msgs[n].Buf[:cap(msgs[n].Buf)], l.dgs[n].Buf)]
			msgs[n].ICRC = l.dgs[n].ICRC
		}
		return n, nil
	}
	if l.calls == 2 {
		close(l.drained)
	}
	<-l.closed
	return 0, link.ErrLinkClosed
}

func (l *scriptLink) WriteBatch(msgs []link.Datagram) (int, error) { return len(msgs), nil }
func (l *scriptLink) BatchSize() int                               { return 8 }
func (l *scriptLink) LocalAddr() netip.Addr                        { return l.addr }
func (l *scriptLink) SrcPort() uint16                              { return 0 }
func (l *scriptLink) MTU() int                                     { return 0 }
func (l *scriptLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// TestReceiveTakesTheLinksICRCVerdict: the engine checks the ICRC of what
// the link left unchecked (rxe_icrc_check), and takes the link's verdict
// on what it checked itself (the UDP link's IPv4 datagrams, whose
// identification it solves for) or could not check.
func TestReceiveTakesTheLinksICRCVerdict(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.2")
	e := wire.Encap{Src: netip.MustParseAddr("10.0.0.1"), Dst: addr, SrcPort: 0xC000, DstPort: wire.UDPPort,
		HopLimit: 64, FragOff: wire.IPv4DF}
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x123456, PSN: 1}}
	b := make([]byte, link.MaxDatagram)
	n, err := wire.Build(b, &e, &h, []byte("to no QP"))
	if err != nil {
		t.Fatal(err)
	}
	good := b[:n]
	bad := append([]byte(nil), good...)
	bad[wire.BTHLen] ^= 0x01 // the payload: the packet still parses
	guess := e
	guess.ID = 0x1234 // what a UDP socket cannot show
	// One in 2^16 corruptions is matched by some identification; this one
	// (fixed bytes) is not.
	if _, ok := wire.SolveIPv4ID(wire.ComputeICRC(&guess, bad), wire.StoredICRC(bad), len(bad)); ok {
		t.Fatal("the corrupted packet solves for an identification: corrupt another bit")
	}
	l := &scriptLink{addr: addr, drained: make(chan struct{}), closed: make(chan struct{}), dgs: []link.Datagram{
		{Encap: e, Buf: good, ICRC: link.ICRCUnchecked},         // checked by the engine: right
		{Encap: e, Buf: bad, ICRC: link.ICRCUnchecked},          // checked by the engine: wrong
		{Encap: e, Buf: good, ICRC: link.ICRCBad},               // the link's verdict
		{Encap: e, Buf: bad, ICRC: link.ICRCGood},               // the link's verdict
		{Encap: e, Buf: bad, ICRC: link.ICRCUnverifiable},       // counted, accepted
		{Encap: guess, Buf: good, ICRC: link.ICRCGuessedIPv4ID}, // solved by the engine
		{Encap: guess, Buf: bad, ICRC: link.ICRCGuessedIPv4ID},  // no identification fits
	}}
	dev, err := nic.New(nic.Config{Link: l, Processors: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	<-l.drained
	c := dev.Counters()
	wantErr, wantPast := uint64(3), uint64(4)
	if got := c.ICRCErr.Load(); got != wantErr {
		t.Errorf("ICRCErr = %d, want %d", got, wantErr)
	}
	if got := c.ICRCUnverified.Load(); got != 1 {
		t.Errorf("ICRCUnverified = %d, want 1", got)
	}
	if got := c.DropNoQP.Load(); got != wantPast {
		t.Errorf("DropNoQP = %d (the datagrams past the ICRC check), want %d", got, wantPast)
	}
}
