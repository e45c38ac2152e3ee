package main

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// ipv4 returns an IPv4 packet of n bytes with the ECN field ecn and a valid header checksum.
func ipv4(n int, ecn byte) []byte {
	p := make([]byte, n)
	p[0] = 0x45
	p[1] = 0x68<<2&0xfc | ecn // some DSCP the marking must keep
	binary.BigEndian.PutUint16(p[2:4], uint16(n))
	p[8], p[9] = 64, 17
	copy(p[12:16], []byte{10, 33, 1, 2})
	copy(p[16:20], []byte{10, 33, 100, 3})
	binary.BigEndian.PutUint16(p[10:12], ^headerSum(p))
	return p
}

// headerSum is the ones' complement sum of an IPv4 header's 16-bit words.
func headerSum(p []byte) uint16 {
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestMarkCE(t *testing.T) {
	for _, ecn := range []byte{1, 2, 3} {
		p := ipv4(100, ecn)
		dscp := p[1] >> 2
		markCE(p)
		if p[1]&3 != 3 || p[1]>>2 != dscp {
			t.Errorf("ECN %d: TOS after marking %#x, want DSCP %#x and CE", ecn, p[1], dscp)
		}
		if s := headerSum(p); s != 0xffff {
			t.Errorf("ECN %d: header sums to %#x after marking, want 0xffff", ecn, s)
		}
	}
}

// TestREDProbability checks the marking curve: none at or below Kmin, Pmax rising linearly in
// between, every ECN-capable packet at or above Kmax, and never a packet that is not
// ECN-capable.
func TestREDProbability(t *testing.T) {
	cfg := Config{RateBps: 1e6, Limit: 1 << 20, Kmin: 10000, Kmax: 50000, Pmax: 0.2}
	for _, c := range []struct {
		queued int
		want   float64
	}{{0, 0}, {10000, 0}, {20000, 0.05}, {30000, 0.1}, {49999, 0.2 * 39999 / 40000}, {50000, 1}, {90000, 1}} {
		p := NewPort(cfg, nil)
		if got := p.markProb(c.queued); got != c.want {
			t.Errorf("markProb(%d) = %v, want %v", c.queued, got, c.want)
		}
	}

	// Fill the queue to 30000 bytes (probability 0.1) and offer ECT packets with a seeded
	// source: about a tenth are marked.
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	now := time.Unix(0, 0)
	p := NewPort(Config{RateBps: 1e6, Limit: 1 << 30, Kmin: 10000, Kmax: 50000, Pmax: 0.2}, r.Float64)
	for p.Backlog() < 30000 {
		if v := p.Enqueue(now, ipv4(1000, 0)); v != Queued {
			t.Fatalf("not-ECT packet: verdict %v, want Queued", v)
		}
	}
	const n = 20000
	marked := 0
	for range n {
		pkt := ipv4(1000, 2)
		v := p.Enqueue(now, pkt)
		if v == Marked {
			marked++
			if pkt[1]&3 != 3 {
				t.Fatalf("a Marked packet has ECN %d", pkt[1]&3)
			}
		}
		p.Dequeue(now.Add(time.Hour)) // keep the backlog at 30000
	}
	if got := float64(marked) / n; got < 0.09 || got > 0.11 {
		t.Errorf("marked %d of %d at probability 0.1 (%.3f)", marked, n, got)
	}
	if p.Marked != uint64(marked) || p.ECT != n {
		t.Errorf("counters: marked %d ect %d, want %d and %d", p.Marked, p.ECT, marked, n)
	}
}

// TestTailDrop: a packet that does not fit is dropped and counted; the ones queued are untouched.
func TestTailDrop(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPort(Config{RateBps: 1e6, Limit: 3500, Kmin: 1 << 20, Kmax: 2 << 20}, nil)
	var got []Verdict
	for _, ecn := range []byte{0, 0, 2, 0, 2} {
		got = append(got, p.Enqueue(now, ipv4(1000, ecn)))
	}
	want := []Verdict{Queued, Queued, Queued, Dropped, Dropped}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
	}
	if p.Dropped != 2 || p.DroppedECT != 1 || p.DroppedBytes != 2000 || p.Backlog() != 3000 || p.Len() != 3 {
		t.Errorf("dropped %d (ECT %d, %d bytes), backlog %d in %d packets; want 2 (1, 2000), 3000 in 3",
			p.Dropped, p.DroppedECT, p.DroppedBytes, p.Backlog(), p.Len())
	}
}

// TestDrainRate: the link sends at its rate on a fake clock, whether the caller polls it
// often or wakes late, and an idle link starts a new packet at once.
func TestDrainRate(t *testing.T) {
	const rate = 200e6 // bits per second: a 1250-byte packet takes 50 µs
	t0 := time.Unix(1000, 0)
	for _, step := range []time.Duration{time.Microsecond, 37 * time.Microsecond, 100 * time.Microsecond, 3 * time.Millisecond} {
		p := NewPort(Config{RateBps: rate, Limit: 1 << 30, Kmin: 1 << 29, Kmax: 1 << 30}, nil)
		for range 1000 {
			p.Enqueue(t0, ipv4(1250, 0))
		}
		var sent int
		now := t0
		for ; p.Len() > 0; now = now.Add(step) {
			for {
				pkt, wait := p.Dequeue(now)
				if pkt == nil {
					if p.Len() == 0 {
						break
					}
					if wait <= 0 || wait > 50*time.Microsecond {
						t.Fatalf("step %v: Dequeue waits %v with %d queued, want (0, 50µs]", step, wait, p.Len())
					}
					break
				}
				// The k-th packet (from 0) may leave at t0 + k·50µs, not before.
				if due := t0.Add(time.Duration(sent) * 50 * time.Microsecond); now.Before(due) {
					t.Fatalf("step %v: packet %d left at %v, due at %v", step, sent, now.Sub(t0), due.Sub(t0))
				}
				sent++
			}
		}
		// 1000 packets take 50 ms; the last leaves at 49.95 ms, seen by the first poll at or after.
		if end := now.Sub(t0) - step; end < 49950*time.Microsecond || end >= 49950*time.Microsecond+step {
			t.Errorf("step %v: the last packet left at %v, want 49.95 ms (+ one step)", step, end)
		}
		if p.Sent != 1000 || p.SentBytes != 1250000 || p.Backlog() != 0 {
			t.Errorf("step %v: sent %d (%d bytes), backlog %d", step, p.Sent, p.SentBytes, p.Backlog())
		}

		// Idle for a second: the next packet leaves at once, and the one after 50 µs later
		// (the idle time is not credit for a burst).
		later := now.Add(time.Second)
		p.Enqueue(later, ipv4(1250, 0))
		p.Enqueue(later, ipv4(1250, 0))
		if pkt, _ := p.Dequeue(later); pkt == nil {
			t.Fatalf("step %v: an idle link did not take a packet at once", step)
		}
		if pkt, wait := p.Dequeue(later); pkt != nil || wait != 50*time.Microsecond {
			t.Errorf("step %v: the second packet after idling: sent %v, wait %v; want to wait 50µs", step, pkt != nil, wait)
		}
	}
}
