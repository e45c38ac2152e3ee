package rc

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// splitSink is a sink whose link sends payloads where they lie
// (transport.SplitOutput). It records each packet whole and the payload
// it was handed apart (nil: the packet came with its payload copied in).
type splitSink struct {
	sink
	off   bool // SendsSplit says no
	views [][]byte
	flat  [][]byte
}

func (s *splitSink) SendsSplit() bool { return !s.off }

func (s *splitSink) Send(n int, e *wire.Encap) {
	s.views = append(s.views, nil)
	s.flat = append(s.flat, slices.Clone(s.buf[:n]))
	s.sink.Send(n, e)
}

func (s *splitSink) SendSplit(n, split int, payload []byte, _ *wire.Encap) {
	p := slices.Concat(s.buf[:split], payload, s.buf[split:n])
	s.views = append(s.views, payload)
	s.flat = append(s.flat, p)
	var pkt wire.Packet
	if err := wire.Parse(slices.Clone(p), &pkt); err != nil {
		panic(err)
	}
	s.sent = append(s.sent, pkt)
}

// run makes the QP's passes into s until it has nothing more to do, and
// checks every packet's ICRC.
func (s *splitSink) run(h *harness) {
	h.t.Helper()
	for h.qp.Process(s) {
	}
	for i, p := range s.flat {
		if err := wire.CheckICRC(&h.qp.encap, p); err != nil {
			h.t.Errorf("packet %d: %v", i, err)
		}
	}
}

// kinds says for each packet sent whether its payload came apart
// ("split") or copied in ("copied").
func (s *splitSink) kinds() []string {
	k := make([]string, len(s.views))
	for i, v := range s.views {
		k[i] = "copied"
		if v != nil {
			k[i] = "split"
		}
	}
	return k
}

// reset forgets what was sent.
func (s *splitSink) reset() { s.views, s.flat, s.sent = nil, nil, nil }

// at reports whether v is the n bytes of the harness MR at offset off.
func (h *harness) at(v []byte, off, n int) bool {
	return len(v) == n && unsafe.SliceData(v) == &h.buf[off]
}

// An RC request or READ response payload of at least minSplitPayload
// bytes in one piece of one MR goes to an Output that takes it where it
// lies (SendSplit); one below that size, across two SGEs, on a UC QP
// (whose WQE completes before its packets are written), or to an Output
// that does not take split packets, is copied into the packet (Send).
// Either way the packet's bytes and ICRC are the same.
func TestSplitPayloads(t *testing.T) {
	h := newHarness(t) // path MTU 1024
	for i := range h.buf {
		h.buf[i] = byte(i * 7)
	}
	var s splitSink

	// A WRITE of 3000 bytes at offset 100: three packets, the payload of
	// each where it lies in the MR.
	h.post(h.wr(1, ibv.WRRDMAWrite, 100, 3000))
	s.run(h)
	if len(s.views) != 3 {
		t.Fatalf("%d packets, want 3", len(s.views))
	}
	for i, n := range []int{1024, 1024, 952} {
		if !h.at(s.views[i], 100+1024*i, n) {
			t.Errorf("WRITE packet %d: payload %d bytes at %p, want the MR's %d at offset %d",
				i, len(s.views[i]), unsafe.SliceData(s.views[i]), n, 100+1024*i)
		}
		if got := s.sent[i].Payload; !slices.Equal(got, h.buf[100+1024*i:100+1024*i+n]) {
			t.Errorf("WRITE packet %d carries other bytes than the MR's", i)
		}
	}

	// A SEND of 600 bytes in two SGEs: copied, whole.
	s.reset()
	w := h.wr(2, ibv.WRSend, 0, 300)
	w.SGList = append(w.SGList, ibv.SGE{Addr: 0x10000 + 5000, Length: 300, LKey: h.mr.LKey()})
	h.post(w)
	s.run(h)
	if len(s.views) != 1 || s.views[0] != nil {
		t.Fatalf("SEND across two SGEs: %v, want one packet copied", s.kinds())
	}
	if got, want := s.sent[0].Payload, slices.Concat(h.buf[:300], h.buf[5000:5300]); !slices.Equal(got, want) {
		t.Error("SEND across two SGEs carries other bytes than the SGEs'")
	}

	// Below minSplitPayload: copied.
	s.reset()
	h.post(h.wr(3, ibv.WRRDMAWrite, 0, minSplitPayload-1), h.wr(4, ibv.WRRDMAWrite, 0, minSplitPayload))
	s.run(h)
	if len(s.views) != 2 || s.views[0] != nil || !h.at(s.views[1], 0, minSplitPayload) {
		t.Errorf("WRITEs of %d and %d bytes: %v, want the first copied and the second split at offset 0",
			minSplitPayload-1, minSplitPayload, s.kinds())
	}

	// A READ of 1500 bytes: the first response (1024 bytes) split, the
	// last (476) copied.
	s.reset()
	h.deliver(readReq(0, 0x10000+2000, h.mr.RKey(), 1500), nil)
	s.run(h)
	if len(s.views) != 2 || !h.at(s.views[0], 2000, 1024) || s.views[1] != nil {
		t.Errorf("READ responses: %v, want the first split at offset 2000, the second copied", s.kinds())
	}
	if got := slices.Concat(s.sent[0].Payload, s.sent[1].Payload); !slices.Equal(got, h.buf[2000:3500]) {
		t.Error("READ responses carry other bytes than the MR's")
	}

	// An Output that takes no split packets gets every packet copied.
	s.reset()
	s.off = true
	h.post(h.wr(5, ibv.WRRDMAWrite, 0, 2048))
	s.run(h)
	if len(s.views) != 2 || s.views[0] != nil || s.views[1] != nil {
		t.Errorf("without SendsSplit: %v, want two packets copied", s.kinds())
	}

	// UC: copied.
	u := newHarnessOf(t, ibv.QPTypeUC)
	var us splitSink
	u.post(u.wr(1, ibv.WRRDMAWrite, 0, 2048))
	us.run(u)
	if len(us.views) != 2 || us.views[0] != nil || us.views[1] != nil {
		t.Errorf("UC WRITE: %v, want two packets copied", us.kinds())
	}
}
