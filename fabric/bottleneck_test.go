package fabric

import (
	"testing"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// sendTC sends n RC SEND ONLY datagrams of size bytes from src to dst,
// PSNs from 0, with traffic class tc.
func sendTC(t *testing.T, src *Endpoint, dst *Endpoint, n, size int, tc uint8) {
	t.Helper()
	e := newEncap(src.LocalAddr(), dst.LocalAddr())
	e.TrafficClass = tc
	for i := range n {
		pkt := build(t, &e, wire.RCSendOnly, wire.PSN(i), payload(i, size))
		if _, err := src.WriteBatch([]link.Datagram{{Encap: e, Buf: pkt}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMarkCE(t *testing.T) {
	f, _, a, b := pair(t, Config{})
	f.AddFilter(OnMatch(nil, MarkCE))
	for _, tt := range []struct{ tc, want uint8 }{
		{wire.ECNECT0, wire.ECNCE},
		{0xB8 | wire.ECNECT1, 0xB8 | wire.ECNCE},
		{wire.ECNNotECT, wire.ECNNotECT},
		{wire.ECNCE, wire.ECNCE},
	} {
		sendTC(t, a, b, 1, 64, tt.tc)
		got := drain(t, b)
		if len(got) != 1 || got[0].Encap.TrafficClass != tt.want {
			t.Fatalf("sent traffic class %#x, got %v", tt.tc, got)
		}
	}
	if s := f.Stats(); s.MarkedCE.Packets != 2 {
		t.Errorf("MarkedCE = %d, want 2", s.MarkedCE.Packets)
	}
}

// TestBottleneck drives a queue at 1 MB/s with a burst: datagrams leave
// at the rate, those that find the backlog past KMax are marked CE (or
// dropped when not ECN-capable), and those past Limit are dropped.
func TestBottleneck(t *testing.T) {
	for _, tc := range []uint8{wire.ECNECT0, wire.ECNNotECT} {
		f, mc, a, b := pair(t, Config{})
		f.SetBottleneck(b.LocalAddr(), Bottleneck{Rate: 1e6, Limit: 20_000, KMin: 2_000, KMax: 4_000, PMax: 0.5})
		// 40 datagrams of 1000 bytes (64 payload + headers padded to
		// 1000 would do too; the payload sets the size).
		const n = 40
		sendTC(t, a, b, n, 1000-wire.PacketLen(wire.RCSendOnly, 0), tc)
		if got := queued(b); got != 0 {
			t.Fatalf("%d delivered before the clock moved", got)
		}
		var got []link.Datagram
		for range 100 {
			mc.Advance(time.Millisecond)
			got = append(got, drain(t, b)...)
		}
		bs := f.BottleneckStats(b.LocalAddr())
		s := f.Stats()
		t.Logf("tc %#x: %+v", tc, bs)
		// Backlog past 20 KB: 20 queued (the first leaves at once:
		// backlog counts from its arrival), the rest dropped.
		if bs.Passed.Packets+bs.Dropped.Packets != n || s.DropBottleneck != bs.Dropped {
			t.Fatalf("passed %d + dropped %d != %d (fabric drops %d)", bs.Passed.Packets, bs.Dropped.Packets, n, s.DropBottleneck.Packets)
		}
		if uint64(len(got)) != bs.Passed.Packets {
			t.Fatalf("delivered %d, bottleneck passed %d", len(got), bs.Passed.Packets)
		}
		marked := 0
		for _, d := range got {
			if wire.ECN(d.Encap.TrafficClass) == wire.ECNCE {
				marked++
			}
		}
		if tc == wire.ECNECT0 {
			// Every datagram past KMax (backlog >= 4 KB: the 5th on) is marked;
			// the 3rd and 4th maybe.
			if bs.Passed.Packets != 20 || marked < 16 || marked > 18 || uint64(marked) != bs.Marked.Packets {
				t.Errorf("ECT: passed %d, marked %d (stats %d), want 20 and 16..18", bs.Passed.Packets, marked, bs.Marked.Packets)
			}
		} else if marked != 0 || bs.Passed.Packets > 4 {
			t.Errorf("not ECT: passed %d, marked %d; want at most 4 passed, none marked", bs.Passed.Packets, marked)
		}
		if bs.MaxBacklog < 19_000 && tc == wire.ECNECT0 {
			t.Errorf("MaxBacklog %d, want about 20000", bs.MaxBacklog)
		}
	}
}

// TestBottleneckRate checks the queue's pace: 10 datagrams of 1000 bytes
// at 1 MB/s take 10 ms.
func TestBottleneckRate(t *testing.T) {
	f, mc, a, b := pair(t, Config{})
	f.SetBottleneck(b.LocalAddr(), Bottleneck{Rate: 1e6})
	sendTC(t, a, b, 10, 1000-wire.PacketLen(wire.RCSendOnly, 0), 0)
	for i := 1; i <= 10; i++ {
		mc.Advance(time.Millisecond)
		if got := len(drain(t, b)); got != 1 {
			t.Fatalf("ms %d: %d delivered, want 1", i, got)
		}
	}
}
