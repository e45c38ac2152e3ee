package verbs_test

// Congestion control (DCQCN) on the fabric's marking bottleneck, on
// testing/synctest's fake time: several senders' RC WRITE streams into
// one receiver through a queue drained at a fixed rate that marks CE as
// it builds (fabric.Bottleneck).

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// ccTestParams are DCQCN's parameters for the fabric tests: the paper's
// (g = 1/256, F = 5) with its times and rates scaled from a 40 Gb/s
// link to the bottleneck's 200 Mb/s, and a line rate a little above the
// bottleneck's.
func ccTestParams() *ibv.CCParams {
	p := ibv.DefaultCCParams()
	p.NPMinTimeBetweenCNPs = 500 * time.Microsecond
	p.RPDCETCPG = 1024 - 4
	p.RPDCETCPRTT = 500 * time.Microsecond
	p.RPRateReduceMonitorPeriod = 500 * time.Microsecond
	p.RPTimeReset = 1500 * time.Microsecond
	p.RPByteReset = 1 << 20
	p.RPThreshold = 5
	p.RPAIRate = 5
	p.RPHAIRate = 20
	p.RPMaxRate = 250
	return &p
}

// The bottleneck: 200 Mb/s, marking from 20 KB to 200 KB (the
// paper's Kmin and Kmax, scaled), a queue deep enough for every
// sender's whole window at once.
const ccRate = 25e6 // bytes per second

func ccBottleneck(n int) fabric.Bottleneck {
	return fabric.Bottleneck{Rate: ccRate, Limit: n * 600 << 10, KMin: 20 << 10, KMax: 200 << 10, PMax: 0.01}
}

// flow is one sender's stream of RDMA WRITEs of ccMsg bytes, ccDepth
// outstanding, from start to stop; done holds its completion times.
type flow struct {
	a, b        *end
	start, stop time.Duration
	done        []time.Time
}

const (
	ccMsg   = 64 << 10
	ccDepth = 8
)

// incast connects n senders, each its own device, to one receiver
// device with a QP for each, on f; the receiver is at 10.0.1.1.
func incast(t *testing.T, f *fabric.Fabric, n int, o pairOpts) []*flow {
	t.Helper()
	o.defaults()
	recvAddr := netip.MustParseAddr("10.0.1.1")
	ro := o
	ro.bufSize = n * ccMsg
	r := newEnd(t, f, recvAddr, ro)
	var flows []*flow
	for i := range n {
		a := newEnd(t, f, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), o)
		b := r
		if i > 0 {
			b = &end{dev: r.dev, pd: r.pd, cq: r.cq, buf: r.buf, mr: r.mr}
			qp, err := r.pd.CreateQP(verbs.QPInitAttr{Type: o.typ, SendCQ: r.cq, RecvCQ: r.cq,
				Cap: ibv.QPCap{MaxSendWR: o.maxWR, MaxRecvWR: o.maxWR, MaxSendSGE: 4, MaxRecvSGE: 4}})
			must(t, err)
			b.qp = qp
		}
		connect(t, a, b, o, 0, 0)
		connect(t, b, a, o, 0, 0)
		flows = append(flows, &flow{a: a, b: b, stop: time.Hour})
	}
	return flows
}

// run drives every flow from t0 (now) on and returns when all stopped.
func run(t *testing.T, flows []*flow) time.Time {
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, fl := range flows {
		wg.Go(func() { fl.drive(t, i, t0) })
	}
	wg.Wait()
	return t0
}

func (fl *flow) drive(t *testing.T, i int, t0 time.Time) {
	time.Sleep(fl.start)
	stop := t0.Add(fl.stop)
	wcs := make([]ibv.WorkCompletion, 16)
	out, id := 0, uint64(0)
	for out > 0 || time.Now().Before(stop) {
		for out < ccDepth && time.Now().Before(stop) {
			wr := rdmaWR(fl.a, fl.b, id, ibv.WRRDMAWrite, 0, i*ccMsg, ccMsg)
			if _, err := fl.a.qp.PostSend(wr); err != nil {
				t.Errorf("flow %d: post: %v", i, err)
				return
			}
			id++
			out++
		}
		k := fl.a.cq.Poll(wcs)
		for _, wc := range wcs[:k] {
			if wc.Status != ibv.WCSuccess {
				t.Errorf("flow %d: %+v", i, wc)
				return
			}
			fl.done = append(fl.done, time.Now())
			out--
		}
		if k == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// rate returns the flow's throughput from..to after t0, bytes a second.
func (fl *flow) rate(t0 time.Time, from, to time.Duration) float64 {
	k := 0
	for _, d := range fl.done {
		if at := d.Sub(t0); at >= from && at < to {
			k++
		}
	}
	return float64(k*ccMsg) / (to - from).Seconds()
}

// jain returns Jain's fairness index of xs: (Σx)² / (n·Σx²).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

func rates(flows []*flow, t0 time.Time, from, to time.Duration) []float64 {
	var rs []float64
	for _, fl := range flows {
		rs = append(rs, fl.rate(t0, from, to))
	}
	return rs
}

func fmtRates(rs []float64) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf(" %.1f", r*8/1e6)
	}
	return s + " Mb/s"
}

// incastResult is what an incast run measured.
type incastResult struct {
	rates      []float64 // each flow's throughput in the measured window, bytes a second
	bn         fabric.BottleneckStats
	backlog    float64 // mean backlog sampled every 10 ms in the measured window, bytes
	cnpSent    uint64
	cnpHandled uint64
	ceMarked   uint64
}

func (r *incastResult) sum() float64 {
	var s float64
	for _, x := range r.rates {
		s += x
	}
	return s
}

func (r *incastResult) String() string {
	return fmt.Sprintf("rates%s, Jain %.3f, %.0f%% of the bottleneck, mean backlog %.0f KB, max %d KB, marked %d, dropped %d; CE received %d, CNPs sent %d, handled %d",
		fmtRates(r.rates), jain(r.rates), 100*r.sum()/ccRate, r.backlog/1024, r.bn.MaxBacklog>>10,
		r.bn.Marked.Packets, r.bn.Dropped.Packets, r.ceMarked, r.cnpSent, r.cnpHandled)
}

// runIncast runs flows (incast's, their start and stop set) through the
// bottleneck b in front of the receiver, measuring from..to.
func runIncast(t *testing.T, f *fabric.Fabric, flows []*flow, b fabric.Bottleneck, from, to time.Duration) incastResult {
	recv := flows[0].b.dev
	f.SetBottleneck(recv.Addr(), b)
	var res incastResult
	var sum float64
	var k int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				if at := time.Since(t0); at >= from && at < to {
					sum += float64(f.BottleneckStats(recv.Addr()).Backlog)
					k++
				}
			}
		}
	})
	run(t, flows) // from t0: no time passes in the bubble before it starts
	close(stop)
	wg.Wait()
	res.rates = rates(flows, t0, from, to)
	res.bn = f.BottleneckStats(recv.Addr())
	if k > 0 {
		res.backlog = sum / float64(k)
	}
	rc := recv.Counters()
	res.cnpSent, res.ceMarked = rc.NPCNPSent, rc.NPECNMarkedRoCEPackets
	for _, fl := range flows {
		res.cnpHandled += fl.a.dev.Counters().RPCNPHandled
	}
	return res
}

// TestCCIncastFair: N senders into one bottleneck with congestion
// control converge to fair shares (Jain's index at least 0.95), use the
// bottleneck (at least 90 % of its rate) and lose nothing at it, where
// without congestion control RED drops their packets and they get less
// through; every CNP sent is handled.
func TestCCIncastFair(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var off, on incastResult
			for _, cc := range []*ibv.CCParams{nil, ccTestParams()} {
				synctest.Test(t, func(t *testing.T) {
					f := fabric.New(fabric.Config{Seed: int64(n)})
					defer f.Close()
					flows := incast(t, f, n, pairOpts{cc: cc, timeout: 14, retry: 7})
					for _, fl := range flows {
						fl.stop = 400 * time.Millisecond
					}
					r := runIncast(t, f, flows, ccBottleneck(n), 200*time.Millisecond, 400*time.Millisecond)
					t.Logf("CC %v: %v", cc != nil, &r)
					if cc == nil {
						off = r
					} else {
						on = r
					}
				})
			}
			if j := jain(on.rates); j < 0.95 {
				t.Errorf("Jain's index %.3f, want >= 0.95", j)
			}
			if on.sum() < 0.9*ccRate {
				t.Errorf("aggregate %.1f Mb/s, want >= 90%% of %.0f", on.sum()*8/1e6, ccRate*8/1e6)
			}
			if on.bn.Dropped.Packets != 0 {
				t.Errorf("%d datagrams dropped at the bottleneck", on.bn.Dropped.Packets)
			}
			if off.bn.Dropped.Packets == 0 || on.sum() <= off.sum() {
				t.Errorf("without CC %d dropped and %.1f Mb/s, with %.1f Mb/s: want drops without and more with",
					off.bn.Dropped.Packets, off.sum()*8/1e6, on.sum()*8/1e6)
			}
			if on.cnpSent == 0 || on.cnpHandled != on.cnpSent || on.ceMarked < on.cnpSent {
				t.Errorf("CNPs sent %d, handled %d, CE marks %d", on.cnpSent, on.cnpHandled, on.ceMarked)
			}
			if off.cnpSent != 0 || off.ceMarked != 0 {
				t.Errorf("without CC: %d CE marks, %d CNPs", off.ceMarked, off.cnpSent)
			}
		})
	}
}

// TestCCFlowJoinsAndLeaves: two flows share the bottleneck; a third
// joins and gets its share; one leaves and the other two take its
// share.
func TestCCFlowJoinsAndLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		flows := incast(t, f, 3, pairOpts{cc: ccTestParams(), timeout: 14, retry: 7})
		flows[0].stop = 1500 * time.Millisecond
		flows[1].stop = 900 * time.Millisecond
		flows[2].start, flows[2].stop = 300*time.Millisecond, 1500*time.Millisecond
		f.SetBottleneck(flows[0].b.dev.Addr(), ccBottleneck(3))
		t0 := run(t, flows)
		for _, w := range []struct {
			from, to time.Duration
			active   []int
		}{
			{150 * time.Millisecond, 300 * time.Millisecond, []int{0, 1}},
			{700 * time.Millisecond, 900 * time.Millisecond, []int{0, 1, 2}},
			{1300 * time.Millisecond, 1500 * time.Millisecond, []int{0, 2}},
		} {
			rs := rates(flows, t0, w.from, w.to)
			var act []float64
			var sum float64
			for _, i := range w.active {
				act = append(act, rs[i])
				sum += rs[i]
			}
			t.Logf("%v..%v: rates%s, Jain %.3f", w.from, w.to, fmtRates(rs), jain(act))
			if j := jain(act); j < 0.95 {
				t.Errorf("%v..%v: Jain's index %.3f over flows %v, want >= 0.95", w.from, w.to, j, w.active)
			}
			if sum < 0.85*ccRate {
				t.Errorf("%v..%v: aggregate %.1f Mb/s, want >= 85%%", w.from, w.to, sum*8/1e6)
			}
		}
		if bs := f.BottleneckStats(flows[0].b.dev.Addr()); bs.Dropped.Packets != 0 {
			t.Errorf("%d datagrams dropped at the bottleneck", bs.Dropped.Packets)
		}
	})
}

// TestCCCNPRateLimit: with every packet marked CE the receiver sends at
// most one CNP per np_min_time_between_cnps per QP, and counts every
// mark.
func TestCCCNPRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		p := ccTestParams()
		p.NPMinTimeBetweenCNPs = 2 * time.Millisecond
		p.RPMinRate = 50 // so that packets keep coming faster than CNPs may
		flows := incast(t, f, 2, pairOpts{cc: p, timeout: 14, retry: 7})
		f.AddFilter(fabric.OnMatch(fabric.MaskIs(wire.MaskRequest), fabric.MarkCE))
		for _, fl := range flows {
			fl.stop = 100 * time.Millisecond
		}
		var cnps []fabric.Packet
		var mu sync.Mutex
		f.Tap(func(pk fabric.Packet) {
			if pk.Parsed && pk.Wire.Opcode == wire.CNP {
				mu.Lock()
				cnps = append(cnps, pk.Clone())
				mu.Unlock()
			}
		})
		t0 := time.Now()
		run(t, flows)
		d := time.Since(t0)
		rc := flows[0].b.dev.Counters()
		type qpAt struct {
			addr netip.Addr
			qpn  uint32
		}
		perQP := map[qpAt][]time.Duration{}
		for _, pk := range cnps {
			q := qpAt{pk.Dst, pk.Wire.DestQP()}
			perQP[q] = append(perQP[q], 0)
			if wire.ECN(pk.Encap.TrafficClass) != wire.ECNNotECT || pk.Encap.TrafficClass>>2 != p.NPCNPDSCP {
				t.Errorf("CNP sent with traffic class %#x", pk.Encap.TrafficClass)
			}
		}
		limit := uint64(2 * (d/p.NPMinTimeBetweenCNPs + 1))
		t.Logf("%v: %d CE marks, %d CNPs (at most %d), per QP %d", d, rc.NPECNMarkedRoCEPackets, rc.NPCNPSent, limit, len(perQP))
		if rc.NPCNPSent == 0 || rc.NPCNPSent > limit || uint64(len(cnps)) != rc.NPCNPSent {
			t.Errorf("%d CNPs sent (%d seen), want 1..%d", rc.NPCNPSent, len(cnps), limit)
		}
		for _, fl := range flows {
			if _, ok := perQP[qpAt{fl.a.dev.Addr(), fl.a.qp.QPN()}]; !ok {
				t.Errorf("no CNP for sender QP %#x", fl.a.qp.QPN())
			}
		}
		if rc.NPECNMarkedRoCEPackets < 10*rc.NPCNPSent {
			t.Errorf("%d CE marks for %d CNPs: every marked packet is counted", rc.NPECNMarkedRoCEPackets, rc.NPCNPSent)
		}
	})
}

// TestCCCNPsLost: with half the CNPs lost on the way the senders still
// share the bottleneck fairly and lose nothing at it.
func TestCCCNPsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 9})
		defer f.Close()
		flows := incast(t, f, 4, pairOpts{cc: ccTestParams(), timeout: 14, retry: 7})
		var k sync.Map
		f.AddFilter(func(p *fabric.Packet) fabric.Action {
			if !p.Parsed || p.Wire.Opcode != wire.CNP {
				return fabric.Pass
			}
			n, _ := k.LoadOrStore(p.Dst, new(atomic.Int64))
			if n.(*atomic.Int64).Add(1)%2 == 0 {
				return fabric.Drop
			}
			return fabric.Pass
		})
		for _, fl := range flows {
			fl.stop = 800 * time.Millisecond
		}
		r := runIncast(t, f, flows, ccBottleneck(4), 400*time.Millisecond, 800*time.Millisecond)
		t.Logf("%v; fabric dropped %d by filter", &r, f.Stats().DropFilter.Packets)
		if j := jain(r.rates); j < 0.95 {
			t.Errorf("Jain's index %.3f, want >= 0.95", j)
		}
		if r.bn.Dropped.Packets != 0 {
			t.Errorf("%d datagrams dropped at the bottleneck", r.bn.Dropped.Packets)
		}
		if r.cnpHandled >= r.cnpSent || r.cnpHandled == 0 {
			t.Errorf("CNPs sent %d, handled %d: want about half handled", r.cnpSent, r.cnpHandled)
		}
	})
}

// sendCNP sends a CNP for e's QP from a fabric endpoint at from: a
// stranger's, neither e nor its peer.
func sendCNP(t *testing.T, f *fabric.Fabric, from netip.Addr, e *end) {
	t.Helper()
	ep, err := f.Attach(from)
	must(t, err)
	enc := wire.Encap{Src: ep.LocalAddr(), Dst: e.dev.Addr(), SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF}
	buf := make([]byte, 64)
	n, err := wire.BuildCNP(buf, &enc, e.qp.QPN())
	must(t, err)
	if _, err := ep.WriteBatch([]link.Datagram{{Encap: enc, Buf: buf[:n]}}); err != nil {
		t.Fatal(err)
	}
}

// TestCCOffIgnoresCNPs: a device with congestion control off drops the
// CNPs that come to it (rp_cnp_ignored) without touching the QP, and
// sends none itself for CE-marked packets; a device with it on sends
// none to a peer whose packets are not ECN-capable (rxe's default).
func TestCCOffIgnoresCNPs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 2})
		defer f.Close()
		// a: CC off; b: CC on. a's packets are not ECN-capable, so
		// MarkCE leaves them: b sends no CNP. b's are, and a answers
		// none.
		o := pairOpts{timeout: 14, retry: 7}
		o.defaults()
		a := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
		o.cc = ccTestParams()
		b := newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
		o.cc = nil
		connect(t, a, b, o, 0, 0)
		connect(t, b, a, o, 0, 0)
		f.AddFilter(fabric.OnMatch(nil, fabric.MarkCE))
		// A CNP to a's QP, as an rxe peer's switch could not make but a
		// confused peer could: ignored.
		sendCNP(t, f, netip.MustParseAddr("10.0.0.9"), a)
		for i := range 20 {
			post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 4096))
			post(t, b, rdmaWR(b, a, uint64(i), ibv.WRRDMAWrite, 0, 0, 4096))
		}
		waitWC(t, a.cq, 20)
		waitWC(t, b.cq, 20)
		ca, cb := a.dev.Counters(), b.dev.Counters()
		if ca.RPCNPIgnored != 1 || ca.RPCNPHandled != 0 {
			t.Errorf("CC off: rp_cnp_ignored %d, rp_cnp_handled %d; want 1, 0", ca.RPCNPIgnored, ca.RPCNPHandled)
		}
		if ca.NPCNPSent != 0 || ca.NPECNMarkedRoCEPackets != 0 {
			t.Errorf("CC off: CE marks %d, CNPs sent %d; want none", ca.NPECNMarkedRoCEPackets, ca.NPCNPSent)
		}
		if cb.NPCNPSent != 0 || cb.NPECNMarkedRoCEPackets != 0 {
			t.Errorf("CC on, peer not ECN-capable: CE marks %d, CNPs sent %d; want none", cb.NPECNMarkedRoCEPackets, cb.NPCNPSent)
		}
		if s := f.Stats(); s.MarkedCE.Packets == 0 {
			t.Error("nothing was marked: the filter saw no ECN-capable packet from b")
		}
		if st := a.qp.State(); st != ibv.QPStateRTS {
			t.Errorf("a's QP in %v after the CNP", st)
		}
	})
}

// TestCCCNPFromAStranger: a connected QP takes CNPs from its peer only
// (rc.QP.NoteCNP): one sent from another address to a's QP, whose
// congestion control is on, is ignored (rp_cnp_ignored) and leaves its
// rate alone, while the CNPs its peer b sends for CE-marked packets are
// handled.
func TestCCCNPFromAStranger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 2})
		defer f.Close()
		o := pairOpts{timeout: 14, retry: 7}
		o.defaults()
		o.cc = ccTestParams()
		a := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
		b := newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
		connect(t, a, b, o, 0, 0)
		connect(t, b, a, o, 0, 0)

		sendCNP(t, f, netip.MustParseAddr("10.0.0.9"), a)
		synctest.Wait()
		if ca := a.dev.Counters(); ca.RPCNPIgnored != 1 || ca.RPCNPHandled != 0 {
			t.Fatalf("a stranger's CNP: rp_cnp_ignored %d, rp_cnp_handled %d; want 1, 0", ca.RPCNPIgnored, ca.RPCNPHandled)
		}

		// Now b marks what a sends: its CNPs come from a's peer.
		f.AddFilter(fabric.OnMatch(fabric.From(a.dev.Addr()), fabric.MarkCE))
		for i := range 20 {
			post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 4096))
		}
		waitWC(t, a.cq, 20)
		ca, cb := a.dev.Counters(), b.dev.Counters()
		if cb.NPCNPSent == 0 || ca.RPCNPHandled != cb.NPCNPSent || ca.RPCNPIgnored != 1 {
			t.Errorf("the peer's CNPs: sent %d, handled %d, ignored %d; want all handled, the stranger's 1 ignored",
				cb.NPCNPSent, ca.RPCNPHandled, ca.RPCNPIgnored)
		}
	})
}

// TestCCUDNotification: a CE-marked UD datagram is answered with a CNP
// to its DETH source QP at the sender's address, whose reaction point
// handles it.
func TestCCUDNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 4})
		defer f.Close()
		o := udOpts{qkey: 0x11111111, cc: ccTestParams()}
		a := newUDEnd(t, f, "10.0.0.1", o)
		b := newUDEnd(t, f, "10.0.0.2", o)
		f.AddFilter(fabric.OnMatch(fabric.OpcodeIs(wire.UDSendOnly), fabric.MarkCE))
		var cnps []fabric.Packet
		var mu sync.Mutex
		f.Tap(func(p fabric.Packet) {
			if p.Parsed && p.Wire.Opcode == wire.CNP {
				mu.Lock()
				cnps = append(cnps, p.Clone())
				mu.Unlock()
			}
		})
		b.postRecvs(t, 4, 0, 1024+verbs.GRHLen, 0)
		ah := a.ahTo(t, b, 0, 64, 0)
		for i := range 4 {
			a.send(t, ah, b.qp.QPN(), o.qkey, uint64(i), 0, 256)
		}
		waitWC(t, b.cq, 4)
		waitWC(t, a.cq, 4)
		time.Sleep(time.Millisecond)
		cb, ca := b.dev.Counters(), a.dev.Counters()
		if cb.NPECNMarkedRoCEPackets != 4 || cb.NPCNPSent == 0 || len(cnps) != int(cb.NPCNPSent) {
			t.Fatalf("CE marks %d, CNPs sent %d (%d seen); want 4, at least 1", cb.NPECNMarkedRoCEPackets, cb.NPCNPSent, len(cnps))
		}
		for _, p := range cnps {
			if p.Dst != a.dev.Addr() || p.Wire.DestQP() != a.qp.QPN() {
				t.Errorf("CNP to %v QP %#x, want %v QP %#x", p.Dst, p.Wire.DestQP(), a.dev.Addr(), a.qp.QPN())
			}
		}
		if ca.RPCNPHandled != cb.NPCNPSent || ca.RPCNPIgnored != 0 {
			t.Errorf("sender: rp_cnp_handled %d, rp_cnp_ignored %d; want %d, 0", ca.RPCNPHandled, ca.RPCNPIgnored, cb.NPCNPSent)
		}
	})
}

// TestCCReadResponsesPaced: a READ's responder is the sender of its
// data, so its responses keep to its QP's rate as requests do: b, whose
// line rate is 8 Mb/s (a byte per µs), answers a's READ of 40 KiB in
// about 40 ms of the fabric's time, waiting on its pacer's timer (a QP
// that spun would keep synctest's clock from moving), and the data
// arrives whole. Without congestion control at b the same READ takes
// a millisecond or two (waitWC looks every 1 ms).
func TestCCReadResponsesPaced(t *testing.T) {
	for _, paced := range []bool{false, true} {
		t.Run(fmt.Sprintf("paced=%v", paced), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{Seed: 4})
				defer f.Close()
				o := pairOpts{timeout: 18, retry: 7}
				o.defaults()
				a := newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
				if paced {
					o.cc = ccTestParams()
					o.cc.RPMaxRate = 8
				}
				b := newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
				connect(t, a, b, o, 0, 0)
				connect(t, b, a, o, 0, 0)
				const size = 40 << 10
				for i := range size {
					b.buf[i] = byte(i * 7)
				}
				start := time.Now()
				post(t, a, rdmaWR(a, b, 1, ibv.WRRDMARead, 0, 0, size))
				waitWC(t, a.cq, 1)
				took := time.Since(start)
				if !bytes.Equal(a.buf[:size], b.buf[:size]) {
					t.Fatal("the READ's data differ from the responder's")
				}
				// 40 responses of 1 KiB plus headers at a byte per µs, less
				// the last (its time is not waited for) and the pacer's
				// first burst (at most 4 KiB).
				pkt := 1024 + 12 + 4 + 4 + 20 + 8 // BTH, AETH, ICRC, IPv4, UDP
				lo := time.Duration(39*pkt-4096) * time.Microsecond
				switch {
				case paced && (took < lo || took > 2*lo):
					t.Errorf("paced: the READ of %d bytes took %v, want about %v", size, took, lo)
				case !paced && took > 2*time.Millisecond:
					t.Errorf("unpaced: the READ of %d bytes took %v, want 2ms at most (waitWC looks every 1ms)", size, took)
				}
				t.Logf("READ of %d bytes, responder paced %v: %v", size, paced, took)
			})
		})
	}
}

// TestCCUDPaced: a UD QP with a line rate of 8 Mb/s (a byte per µs)
// sends its datagrams at that rate, waiting on its pacer's timer (a QP
// that spun would keep synctest's clock from moving).
func TestCCUDPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 4})
		defer f.Close()
		p := ccTestParams()
		p.RPMaxRate = 8
		o := udOpts{qkey: 0x11111111, cc: p}
		a := newUDEnd(t, f, "10.0.0.1", o)
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: o.qkey})
		const n, size = 40, 1000
		b.postRecvs(t, n, 0, size+verbs.GRHLen, 0)
		ah := a.ahTo(t, b, 0, 64, 0)
		start := time.Now()
		for i := range n {
			a.send(t, ah, b.qp.QPN(), o.qkey, uint64(i), 0, size)
		}
		waitWC(t, b.cq, n)
		took := time.Since(start)
		// n datagrams of size bytes plus headers at a byte per µs, less
		// the last (its time is not waited for) and the first burst (at
		// most the pacer's minimum, 4 KiB).
		pkt := size + 12 + 8 + 4 + 20 + 8 // BTH, DETH, ICRC, IPv4, UDP
		if min := time.Duration((n-1)*pkt-4096) * time.Microsecond; took < min || took > 2*min {
			t.Errorf("%d datagrams took %v, want about %v", n, took, min)
		}
		t.Logf("%d datagrams of %d bytes at 8 Mb/s: %v", n, size, took)
	})
}
