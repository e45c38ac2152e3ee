package fabric

// A marking bottleneck: the egress queue of a switch port in front of an
// endpoint, drained at a fixed rate, that marks ECN-capable datagrams
// Congestion Experienced as its queue builds (RED with ECN, RFC 3168 7;
// the Kmin/Kmax/Pmax marking DCQCN assumes, Zhu et al., SIGCOMM 2015
// section 3.1) and drops the others, and drops every datagram that
// finds it full. Congestion control is tested on it with the fabric's
// clock (a manual clock or testing/synctest).

import (
	"net/netip"
	"sync"
	"time"

	"github.com/softnic/softnic/wire"
)

// Bottleneck configures the egress queue in front of an endpoint
// (Fabric.SetBottleneck).
type Bottleneck struct {
	// Rate is the bytes per second the queue drains at (UDP payloads:
	// the IP and UDP headers are not counted). Must be positive.
	Rate int64
	// Limit is the queue's size in bytes: a datagram that would take the
	// backlog past it is dropped (DropBottleneck). 0: no limit.
	Limit int
	// KMin and KMax are the marking thresholds in bytes of backlog, PMax
	// the marking probability at KMax: below KMin nothing is marked,
	// from KMin to KMax a datagram is marked with a probability rising
	// linearly from 0 to PMax, above KMax every one is (RED's
	// "gentle" variant left out, as in DCQCN's switches). An
	// ECN-capable datagram is marked CE as it leaves the queue, by the
	// backlog behind it; one that is not ECN-capable is dropped instead
	// as it arrives, by the backlog in front of it (DropBottleneck), as
	// RED with ECN does.
	// KMax 0: no marking.
	KMin, KMax int
	PMax       float64
}

// BottleneckStats are what a bottleneck saw.
type BottleneckStats struct {
	Marked     Counter // datagrams marked CE
	Dropped    Counter // datagrams dropped (full, or marked but not ECN-capable)
	Passed     Counter // datagrams queued
	MaxBacklog int     // the largest backlog a datagram found, bytes
	Backlog    int     // the backlog now, bytes
}

// bottleneck is the state of one Bottleneck.
type bottleneck struct {
	cfg Bottleneck
	mu  sync.Mutex
	// free is when the queue has sent everything queued so far.
	free  time.Time       // guarded by mu
	stats BottleneckStats // guarded by mu
}

// SetBottleneck puts every datagram to the endpoint at dst through the
// marking queue b from now on, delaying each by its time in the queue and
// on the wire; the zero Bottleneck removes it. Delivery through the
// queue is by Config.Clock, as delayed datagrams are.
func (f *Fabric) SetBottleneck(dst netip.Addr, b Bottleneck) {
	k := canon(dst)
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Rate <= 0 {
		delete(f.bns, k)
		return
	}
	if f.bns == nil {
		f.bns = make(map[netip.Addr]*bottleneck)
	}
	f.bns[k] = &bottleneck{cfg: b}
	f.hasBN.Store(true)
}

// BottleneckStats returns what the bottleneck in front of dst saw (the
// zero value when it has none).
func (f *Fabric) BottleneckStats(dst netip.Addr) BottleneckStats {
	f.mu.RLock()
	bn := f.bns[canon(dst)]
	f.mu.RUnlock()
	if bn == nil {
		return BottleneckStats{}
	}
	bn.mu.Lock()
	defer bn.mu.Unlock()
	s := bn.stats
	if d := bn.free.Sub(f.clk.Now()); d > 0 {
		s.Backlog = int(d.Seconds() * float64(bn.cfg.Rate))
	}
	return s
}

// bottleneckTo returns the bottleneck in front of canonical address a,
// or nil.
func (f *Fabric) bottleneckTo(a netip.Addr) *bottleneck {
	if !f.hasBN.Load() {
		return nil
	}
	f.mu.RLock()
	bn := f.bns[a]
	f.mu.RUnlock()
	return bn
}

// admit queues fr, datagram idx of its path, at time now: it reports how
// long the datagram waits in the queue and on the wire, or false when the
// queue drops it: full, or found past KMin and drawn for marking while
// not ECN-capable (RED drops those at once). An ECN-capable datagram is
// marked as it leaves the queue (dequeue).
func (bn *bottleneck) admit(fr *frame, idx uint64, now time.Time) (time.Duration, bool) {
	n := len(fr.data)
	bn.mu.Lock()
	defer bn.mu.Unlock()
	c := &bn.cfg
	if bn.free.Before(now) {
		bn.free = now
	}
	backlog := bn.backlog(now)
	bn.stats.MaxBacklog = max(bn.stats.MaxBacklog, backlog)
	if c.Limit > 0 && backlog+n > c.Limit {
		bn.stats.Dropped.add(n)
		return 0, false
	}
	if wire.ECN(fr.enc.TrafficClass) == wire.ECNNotECT && bn.mark(fr, idx, backlog) {
		bn.stats.Dropped.add(n)
		return 0, false
	}
	bn.free = bn.free.Add(time.Duration(float64(n) / float64(c.Rate) * float64(time.Second)))
	bn.stats.Passed.add(n)
	fr.bn, fr.bnIdx = bn, idx
	return bn.free.Sub(now), true
}

// dequeue marks fr, leaving the queue at now, CE if the backlog behind
// it calls for a mark (RED on the queue at dequeue, as switches can
// mark: the mark then does not wait out the queue it reports). It
// reports whether it marked fr.
func (bn *bottleneck) dequeue(fr *frame, now time.Time) bool {
	bn.mu.Lock()
	defer bn.mu.Unlock()
	ecn := wire.ECN(fr.enc.TrafficClass)
	if ecn != wire.ECNECT0 && ecn != wire.ECNECT1 || !bn.mark(fr, fr.bnIdx, bn.backlog(now)) {
		return false
	}
	fr.enc.TrafficClass = wire.WithECN(fr.enc.TrafficClass, wire.ECNCE)
	bn.stats.Marked.add(len(fr.data))
	return true
}

// backlog is the bytes queued at now; bn.mu is held.
func (bn *bottleneck) backlog(now time.Time) int {
	if !bn.free.After(now) {
		return 0
	}
	return int(bn.free.Sub(now).Seconds() * float64(bn.cfg.Rate))
}

// mark draws RED's decision for datagram idx of fr's path at backlog
// bytes: never below KMin, always from KMax, between with a probability
// rising linearly to PMax.
func (bn *bottleneck) mark(fr *frame, idx uint64, backlog int) bool {
	c := &bn.cfg
	if c.KMax <= 0 || backlog <= c.KMin {
		return false
	}
	if backlog >= c.KMax {
		return true
	}
	p := c.PMax * float64(backlog-c.KMin) / float64(c.KMax-c.KMin)
	return fr.path.uniform(idx, slotMark) < p
}

func (c *Counter) add(n int) {
	c.Packets++
	c.Bytes += uint64(n)
}
