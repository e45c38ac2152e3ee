package main

import (
	"encoding/binary"
	"time"
)

// Config is a bottleneck port: its rate, its buffer and its marking.
type Config struct {
	RateBps int64 // the link's rate in bits per second
	Limit   int   // the buffer in bytes: a packet that does not fit is dropped (tail drop)
	// RED on the instantaneous queue, as a DCQCN switch marks (Zhu et al., SIGCOMM 2015, §3.1):
	// an ECN-capable packet that finds Kmin bytes or fewer queued passes unmarked, one that
	// finds Kmax or more is marked CE, and in between it is marked with a probability rising
	// linearly from 0 to Pmax.
	Kmin, Kmax int
	Pmax       float64
}

// Verdict is what Enqueue did with a packet.
type Verdict int

const (
	Queued  Verdict = iota // queued unmarked
	Marked                 // queued, marked CE
	Dropped                // the buffer was full
)

// Stats are a port's counters.
type Stats struct {
	Enqueued     uint64 `json:"enqueued"`      // packets queued (marked or not)
	ECT          uint64 `json:"ect"`           // of those offered, ECN-capable ones
	Marked       uint64 `json:"marked"`        // packets marked CE
	Dropped      uint64 `json:"dropped"`       // packets dropped, the buffer full
	DroppedECT   uint64 `json:"dropped_ect"`   // of those, ECN-capable ones
	DroppedBytes uint64 `json:"dropped_bytes"` // their bytes
	Sent         uint64 `json:"sent"`          // packets that left
	SentBytes    uint64 `json:"sent_bytes"`    // their bytes
}

// Port is a switch's egress port: a byte-limited FIFO that marks at enqueue by RED and drains at
// the link's rate. It holds no lock and reads no clock: every call takes now, so a test drives
// it on a fake clock.
type Port struct {
	cfg  Config
	rand func() float64 // uniform in [0, 1)

	q        [][]byte // the FIFO; q[head:] are queued
	head     int
	bytes    int       // bytes queued
	linkFree time.Time // when the link has sent what it took and can take the head
	Stats
}

// NewPort returns an empty port that draws its marking decisions from rand.
func NewPort(cfg Config, rand func() float64) *Port {
	return &Port{cfg: cfg, rand: rand}
}

// Backlog returns the bytes queued.
func (p *Port) Backlog() int { return p.bytes }

// Len returns the packets queued.
func (p *Port) Len() int { return len(p.q) - p.head }

// markProb is RED's marking probability for a packet that finds queued bytes ahead of it.
func (p *Port) markProb(queued int) float64 {
	switch {
	case queued <= p.cfg.Kmin:
		return 0
	case queued >= p.cfg.Kmax:
		return 1
	}
	return p.cfg.Pmax * float64(queued-p.cfg.Kmin) / float64(p.cfg.Kmax-p.cfg.Kmin)
}

// Enqueue offers an IP packet to the port at now. The port keeps pkt if it is queued.
func (p *Port) Enqueue(now time.Time, pkt []byte) Verdict {
	ect := ecnCapable(pkt)
	if ect {
		p.ECT++
	}
	if p.bytes+len(pkt) > p.cfg.Limit {
		p.Dropped++
		p.DroppedBytes += uint64(len(pkt))
		if ect {
			p.DroppedECT++
		}
		return Dropped
	}
	v := Queued
	if ect {
		if pr := p.markProb(p.bytes); pr > 0 && p.rand() < pr {
			markCE(pkt)
			p.Marked++
			v = Marked
		}
	}
	if p.Len() == 0 && p.linkFree.Before(now) {
		p.linkFree = now // the link was idle: it takes this packet now, owing nothing
	}
	if p.head > 0 && p.head == len(p.q) {
		p.q, p.head = p.q[:0], 0
	}
	p.q = append(p.q, pkt)
	p.bytes += len(pkt)
	p.Enqueued++
	return v
}

// Dequeue returns the head packet if the link can take it at now, and how long until it can
// otherwise (0 if the port is empty). The link takes a packet when it has sent the one before:
// each packet holds it for len·8/rate from the time the one before was done, so a caller
// that wakes late sends what fell due at once and the average rate is exact.
func (p *Port) Dequeue(now time.Time) ([]byte, time.Duration) {
	if p.Len() == 0 {
		return nil, 0
	}
	if now.Before(p.linkFree) {
		return nil, p.linkFree.Sub(now)
	}
	pkt := p.q[p.head]
	p.q[p.head] = nil
	p.head++
	p.bytes -= len(pkt)
	p.linkFree = p.linkFree.Add(p.txTime(len(pkt)))
	p.Sent++
	p.SentBytes += uint64(len(pkt))
	return pkt, 0
}

// txTime is how long the link takes to send n bytes.
func (p *Port) txTime(n int) time.Duration {
	return time.Duration(int64(n) * 8 * int64(time.Second) / p.cfg.RateBps)
}

// ecnCapable reports whether pkt is an IPv4 packet with ECT(0), ECT(1) or CE (RFC 3168 §5).
func ecnCapable(pkt []byte) bool {
	return len(pkt) >= 20 && pkt[0]>>4 == 4 && pkt[1]&3 != 0
}

// markCE sets an IPv4 packet's ECN field to CE and updates its header checksum (RFC 1624). The
// UDP checksum does not cover the TOS byte, and RoCEv2's ICRC masks it.
func markCE(pkt []byte) {
	old := binary.BigEndian.Uint16(pkt[0:2])
	pkt[1] |= 3
	sum := uint32(^binary.BigEndian.Uint16(pkt[10:12])) + uint32(^old) + uint32(binary.BigEndian.Uint16(pkt[0:2]))
	sum = (sum & 0xffff) + sum>>16
	sum = (sum & 0xffff) + sum>>16
	binary.BigEndian.PutUint16(pkt[10:12], ^uint16(sum))
}
