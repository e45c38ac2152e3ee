package ud

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/mem"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// fakeCQ records completions.
type fakeCQ struct{ wcs []ibv.WorkCompletion }

func (c *fakeCQ) Push(wc *ibv.WorkCompletion, _ bool) bool {
	c.wcs = append(c.wcs, *wc)
	return true
}

// scriptOut is a transport.Output and Flusher that keeps every datagram
// and answers each Flush with the next errno list of its script (all 0
// when the script has run out).
type scriptOut struct {
	buf    [8192]byte
	sent   [][]byte // every datagram queued, BTH through ICRC
	script [][]syscall.Errno
	n      int // datagrams queued since the last Flush
}

func (o *scriptOut) Buf() []byte { return o.buf[:] }

func (o *scriptOut) Send(n int, _ *wire.Encap) {
	o.sent = append(o.sent, append([]byte(nil), o.buf[:n]...))
	o.n++
}

func (o *scriptOut) Flush() []syscall.Errno {
	errs := make([]syscall.Errno, o.n)
	if len(o.script) > 0 {
		copy(errs, o.script[0])
		o.script = o.script[1:]
	}
	o.n = 0
	return errs
}

var _ transport.Flusher = (*scriptOut)(nil)

// tsoQP makes a UD QP in RTS with max_tso_header 32 at port MTU 1024,
// and a registered buffer of 64 KiB filled with a pattern.
func tsoQP(t *testing.T) (*QP, *fakeCQ, *mem.MR, []byte) {
	t.Helper()
	tab := mem.NewTable(mem.Limits{KeySeed: 1})
	pd, err := tab.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	mr, err := tab.RegMR(pd, buf, 0x10000, true, ibv.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	cq := &fakeCQ{}
	qp, err := New(Config{QPN: 0x11, PD: pd, Mem: tab, SendCQ: cq, RecvCQ: cq, RQ: transport.NewRecvQueue(4, 1),
		Cap:       ibv.QPCap{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 64},
		LocalAddr: netip.MustParseAddr("10.0.0.1"), MTU: func() int { return 1024 }, MaxTSOHeader: 32})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, QKey: 0x55}, ibv.QPAttrState|ibv.QPAttrQKey); err != nil {
		t.Fatal(err)
	}
	return qp, cq, mr, buf
}

var tsoAV = &ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: netip.MustParseAddr("10.0.0.2"), HopLimit: 64}}

// checkPieces checks datagrams against the TSO pieces they should carry:
// PSN psn0+first+i, the header and piece first+i of payload cut at mss.
func checkPieces(t *testing.T, dgs [][]byte, psn0 wire.PSN, first int, hdr, payload []byte, mss int) {
	t.Helper()
	for i, d := range dgs {
		var p wire.Packet
		if err := wire.Parse(d, &p); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		k := first + i
		piece := payload[k*mss : min((k+1)*mss, len(payload))]
		want := append(append([]byte(nil), hdr...), piece...)
		if p.Opcode != wire.UDSendOnly || p.PSN() != psn0.Add(uint32(k)) || !bytes.Equal(p.Payload, want) {
			t.Errorf("datagram %d: %v PSN %d, %d bytes; want UD_SEND_ONLY PSN %d, piece %d (%d bytes)",
				i, p.Opcode, p.PSN(), len(p.Payload), psn0.Add(uint32(k)), k, len(want))
		}
	}
}

// TestTSOResendsFromRefusedPiece: a piece the link refuses (ENOBUFS) is
// sent again, with its PSN, in the next pass together with the pieces
// after it, as rxe's requester rolls a WQE back to the packet that
// failed; the WR completes once, as TSO, when the last piece is out, and
// rdma_sends counts each piece once the link took it. (sent_pkts is the
// Output's to count, for what the link took.)
func TestTSOResendsFromRefusedPiece(t *testing.T) {
	qp, cq, mr, buf := tsoQP(t)
	hdr := []byte("hdr-hdr-")
	const mss, n = 100, 450
	wr := ibv.SendWR{WRID: 9, Opcode: ibv.WRTSO, Flags: ibv.SendSignaled, SGList: []ibv.SGE{{Addr: mr.Addr() + 5, Length: n, LKey: mr.LKey()}},
		TSOHeader: hdr, MSS: mss, AH: tsoAV, RemoteQPN: 0x22, RemoteQKey: 0x55}
	if _, _, err := qp.PostSend([]ibv.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	payload := buf[5 : 5+n]
	out := &scriptOut{script: [][]syscall.Errno{{0, syscall.ENOBUFS, 0, 0, 0}}}
	if more := qp.Process(out); !more || len(cq.wcs) != 0 {
		t.Fatalf("after a refused piece: more %v, completions %+v; want more work and none", more, cq.wcs)
	}
	checkPieces(t, out.sent, 0, 0, hdr, payload, mss)
	if got := qp.cfg.Counters.RDMASends.Load(); got != 1 {
		t.Errorf("rdma_sends %d after the first pass, want 1 (the pieces before the refused one)", got)
	}
	out.sent = nil
	if more := qp.Process(out); more {
		t.Errorf("second pass reports more work")
	}
	if len(out.sent) != 4 {
		t.Fatalf("second pass sent %d datagrams, want pieces 1 to 4", len(out.sent))
	}
	checkPieces(t, out.sent, 0, 1, hdr, payload, mss)
	if len(cq.wcs) != 1 || cq.wcs[0].Opcode != ibv.WCTSO || cq.wcs[0].Status != ibv.WCSuccess || cq.wcs[0].ByteLen != n || cq.wcs[0].WRID != 9 {
		t.Fatalf("completions %+v, want one TSO of %d bytes", cq.wcs, n)
	}
	if got := qp.cfg.Counters.RDMASends.Load(); got != 5 {
		t.Errorf("rdma_sends %d, want 5", got)
	}
	if a := qp.Query(); a.SQPSN != 5 {
		t.Errorf("next PSN %d, want 5", a.SQPSN)
	}
}

// TestTSOUnroutable: a piece with no route fails the WR with
// LOC_QP_OP_ERR and moves the QP to SQE, as for an ordinary UD send.
func TestTSOUnroutable(t *testing.T) {
	qp, cq, mr, _ := tsoQP(t)
	wr := ibv.SendWR{WRID: 3, Opcode: ibv.WRTSO, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: 300, LKey: mr.LKey()}},
		TSOHeader: []byte{1}, MSS: 100, AH: tsoAV, RemoteQPN: 0x22, RemoteQKey: 0x55}
	if _, _, err := qp.PostSend([]ibv.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	qp.Process(&scriptOut{script: [][]syscall.Errno{{0, 0, syscall.ENETUNREACH}}})
	if len(cq.wcs) != 1 || cq.wcs[0].Status != ibv.WCLocQPOpErr || qp.State() != ibv.QPStateSQE {
		t.Fatalf("completions %+v, state %v; want one LOC_QP_OP_ERR and SQE", cq.wcs, qp.State())
	}
}

// TestTSOAcrossPasses: a TSO WR of more pieces than a pass's budget
// sends them over two passes and completes once; the SEND behind it
// takes the PSN after its last piece.
func TestTSOAcrossPasses(t *testing.T) {
	qp, cq, mr, buf := tsoQP(t)
	const mss, pieces = 10, budget + 6
	wrs := []ibv.SendWR{
		{WRID: 1, Opcode: ibv.WRTSO, Flags: ibv.SendSignaled, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: mss * pieces, LKey: mr.LKey()}},
			TSOHeader: []byte("H"), MSS: mss, AH: tsoAV, RemoteQPN: 0x22, RemoteQKey: 0x55},
		{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled | ibv.SendInline, InlineData: []byte("after"),
			AH: tsoAV, RemoteQPN: 0x22, RemoteQKey: 0x55},
	}
	if _, _, err := qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	out := &scriptOut{}
	if more := qp.Process(out); !more || len(out.sent) != budget || len(cq.wcs) != 0 {
		t.Fatalf("first pass: more %v, %d datagrams, completions %+v; want more, %d, none", more, len(out.sent), cq.wcs, budget)
	}
	for qp.Process(out) {
	}
	if len(out.sent) != pieces+1 {
		t.Fatalf("%d datagrams, want %d pieces and the SEND", len(out.sent), pieces)
	}
	checkPieces(t, out.sent[:pieces], 0, 0, []byte("H"), buf[:mss*pieces], mss)
	var p wire.Packet
	if err := wire.Parse(out.sent[pieces], &p); err != nil || p.PSN() != pieces || string(p.Payload) != "after" {
		t.Errorf("the SEND after: PSN %d payload %q (%v), want PSN %d", p.PSN(), p.Payload, err, pieces)
	}
	if len(cq.wcs) != 2 || cq.wcs[0].Opcode != ibv.WCTSO || cq.wcs[1].Opcode != ibv.WCSend {
		t.Fatalf("completions %+v, want TSO then SEND", cq.wcs)
	}
}

// TestTSOCheck: checkTSO's refusals, each wrapping ErrInvalid.
func TestTSOCheck(t *testing.T) {
	qp, _, mr, _ := tsoQP(t)
	ok := ibv.SendWR{Opcode: ibv.WRTSO, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: 100, LKey: mr.LKey()}},
		TSOHeader: make([]byte, 32), MSS: 1024 - 32, AH: tsoAV}
	for _, c := range []struct {
		name string
		mod  func(w *ibv.SendWR)
		ok   bool
	}{
		{"at every limit", func(w *ibv.SendWR) {}, true},
		{"header over max_tso_header", func(w *ibv.SendWR) { w.TSOHeader, w.MSS = make([]byte, 33), 100 }, false},
		{"mss 0", func(w *ibv.SendWR) { w.MSS = 0 }, false},
		{"over the MTU", func(w *ibv.SendWR) { w.MSS++ }, false},
	} {
		w := ok
		c.mod(&w)
		err := qp.checkSendWR(&w)
		if (err == nil) != c.ok || (err != nil && !isInvalid(err)) {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
	if got := fmt.Sprint(tsoPieces(0, 10), tsoPieces(10, 10), tsoPieces(11, 10)); got != "1 1 2" {
		t.Errorf("tsoPieces(0|10|11, 10) = %s, want 1 1 2", got)
	}
}

func isInvalid(err error) bool { return errors.Is(err, errno.Invalid) }

// discardOut is an Output that drops every datagram and is no Flusher.
type discardOut struct{ buf [8192]byte }

func (o *discardOut) Buf() []byte           { return o.buf[:] }
func (o *discardOut) Send(int, *wire.Encap) {}

// TestPostNoAlloc: posting and sending an ordinary UD SEND, and a TSO WR,
// allocates nothing once the QP exists.
func TestPostNoAlloc(t *testing.T) {
	qp, cq, mr, _ := tsoQP(t)
	out := &discardOut{}
	for _, wr := range []ibv.SendWR{
		{Opcode: ibv.WRSend, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: 512, LKey: mr.LKey()}}, AH: tsoAV, RemoteQPN: 0x22},
		{Opcode: ibv.WRTSO, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: 3000, LKey: mr.LKey()}},
			TSOHeader: []byte("header"), MSS: 1000, AH: tsoAV, RemoteQPN: 0x22},
	} {
		wrs := []ibv.SendWR{wr}
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, err := qp.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			qp.Process(out)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per post and send, want 0", wr.Opcode, allocs)
		}
	}
	if len(cq.wcs) != 0 || qp.State() != ibv.QPStateRTS {
		t.Errorf("unsignaled WRs gave completions %+v, state %v", cq.wcs[:min(len(cq.wcs), 2)], qp.State())
	}
}

// TestTSOFinishesInSQD: a TSO WR caught midway by a modify to SQD sends
// its other pieces and completes, the SEND behind it does not start,
// and SQ_DRAINED is reported once the TSO WR is done, not before.
func TestTSOFinishesInSQD(t *testing.T) {
	qp, cq, mr, _ := tsoQP(t)
	var events []ibv.AsyncEventType
	qp.cfg.OnAsync = func(ev ibv.AsyncEventType) { events = append(events, ev) }
	const mss, pieces = 10, budget + 6
	wrs := []ibv.SendWR{
		{WRID: 1, Opcode: ibv.WRTSO, Flags: ibv.SendSignaled, SGList: []ibv.SGE{{Addr: mr.Addr(), Length: mss * pieces, LKey: mr.LKey()}},
			TSOHeader: []byte("H"), MSS: mss, AH: tsoAV, RemoteQPN: 0x22},
		{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, AH: tsoAV, RemoteQPN: 0x22},
	}
	if _, _, err := qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	out := &scriptOut{}
	qp.Process(out)
	if _, err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true}, ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Fatalf("events %v with a TSO WR midway, want none yet", events)
	}
	for qp.Process(out) {
	}
	if len(out.sent) != pieces || len(cq.wcs) != 1 || cq.wcs[0].Opcode != ibv.WCTSO {
		t.Fatalf("%d datagrams, completions %+v; want the %d pieces and the TSO completion alone", len(out.sent), cq.wcs, pieces)
	}
	if len(events) != 1 || events[0] != ibv.EventSQDrained {
		t.Fatalf("events %v, want SQ_DRAINED", events)
	}
	// Back to RTS, the SEND goes.
	if _, err := qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState); err != nil {
		t.Fatal(err)
	}
	for qp.Process(out) {
	}
	if len(out.sent) != pieces+1 || len(cq.wcs) != 2 || len(events) != 1 {
		t.Fatalf("after RTS: %d datagrams, completions %+v, events %v", len(out.sent), cq.wcs, events)
	}
}
