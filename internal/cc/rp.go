// Package cc is softnic's congestion control: DCQCN (Zhu et al.,
// "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015),
// the scheme of RoCE NICs, with the parameters named as mlx5 names its
// firmware's (drivers/infiniband/hw/mlx5/cong.c: the rp_* knobs of the
// reaction point, the np_* knobs of the notification point).
//
// A switch whose queue builds marks ECN-capable packets Congestion
// Experienced (CE). The notification point, the receiving NIC, answers
// a CE-marked packet with a CNP to the QP that sent it, at most one per
// np_min_time_between_cnps per QP (NP). The reaction point, the sending
// QP, cuts its rate on a CNP and raises it again by timer and by byte
// counter (RP), and a pacer holds its packets to the rate. This package
// is the arithmetic and the pacer, on times the caller passes in
// (STYLE.md 10); the engine wires it: nic answers CE marks and routes
// CNPs, the transports pace their requesters.
package cc

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/ibv"
)

// Params are the NIC's congestion control parameters (ibv.CCParams).
type Params = ibv.CCParams

// RP is one QP's reaction point (DCQCN section 3.3, Figure 7 of the
// paper): its current rate Rc, target rate Rt and congestion estimate α,
// the timer and byte counter that raise the rate between CNPs, and the
// pacer that holds the QP's packets to Rc.
//
// Without a line rate (RPMaxRate 0) a QP that never got a CNP sends
// unpaced, as a NIC without a rate limiter for the flow does; its first
// CNP starts the rate limiter at the rate it was sending at (or
// RPRateToSetOnFirstCNP), and a rate that recovers to CCDefaultLineRate
// releases it. With a line rate the QP is paced at most at it always.
//
// The receive path only notes a CNP (Note, an atomic add, from any
// goroutine); everything else runs on the goroutine running the QP,
// which owns the RP, with the time of its pass: Wait before each packet,
// Sent after it. Timers are not armed: the timer stages and α's decay
// are counted from the time passed in, so that a QP that sends nothing
// costs nothing (STYLE.md 10).
type RP struct {
	p     *Params
	notes atomic.Uint32 // CNPs noted and not yet handled

	active bool      // rate limited: a CNP came and the rate has not recovered, or a line rate holds it
	first  bool      // paced at the line rate, no CNP yet: the first takes α from RPInitialAlphaValue
	rc, rt float64   // current and target rate, Mb/s
	alpha  float64   // α, 0..1
	alphaT time.Time // start of α's current period (RPDCETCPRTT)
	cutAt  time.Time // the last decrease
	cut    bool      // a decrease was made (cutAt is set)
	timerT time.Time // when the next timer stage ends
	tStage int       // timer stages since the last decrease (the paper's T)
	bStage int       // byte stages since the last decrease (the paper's BC)
	bytes  int       // bytes sent in the current byte stage

	// avail is the pacer: the earliest time the next packet may go.
	avail time.Time

	// The rate an unpaced QP sends at, measured over windows of
	// measureWindow, for its first CNP.
	winT     time.Time
	winBytes int
	measured float64 // Mb/s, 0 until a window ended

	handled, decreases uint64
}

// measureWindow is the window an unpaced QP's rate is measured over.
const measureWindow = time.Millisecond

// maxStages bounds the timer stages one call counts after a long idle
// time: the rate is at the line rate long before.
const maxStages = 64

// NewRP returns the reaction point of a QP, with the NIC's parameters p
// (which must stay as they are). With a line rate (RPMaxRate) the QP is
// paced at it from the start, as a NIC's port holds it; without, it
// sends unpaced until its first CNP.
func NewRP(p *Params) *RP {
	r := &RP{p: p}
	if p.RPMaxRate > 0 {
		r.active = true
		r.rc, r.rt = p.RPMaxRate, p.RPMaxRate
		r.alpha = float64(p.RPInitialAlphaValue) / 1024
		r.first = true
	}
	return r
}

// Note records a CNP for the QP; the next Wait handles it. Safe from any
// goroutine.
func (r *RP) Note() { r.notes.Add(1) }

// Active reports whether the QP is rate limited.
func (r *RP) Active() bool { return r.active }

// Rate returns the current rate Rc in Mb/s, 0 when the QP sends unpaced.
func (r *RP) Rate() float64 {
	if !r.active {
		return 0
	}
	return r.rc
}

// Target returns the target rate Rt in Mb/s.
func (r *RP) Target() float64 { return r.rt }

// Alpha returns α.
func (r *RP) Alpha() float64 { return r.alpha }

// Handled returns the CNPs handled.
func (r *RP) Handled() uint64 { return r.handled }

// lineRate is the highest rate, Mb/s.
func (r *RP) lineRate() float64 {
	if r.p.RPMaxRate > 0 {
		return r.p.RPMaxRate
	}
	return ibv.CCDefaultLineRate
}

// g is α's gain.
func (r *RP) g() float64 { return float64(1024-r.p.RPDCETCPG) / 1024 }

// Wait handles the CNPs noted, counts the timer stages and α's periods
// up to now, and returns how long the QP must wait before its next
// packet: 0 when it may send now.
func (r *RP) Wait(now time.Time) time.Duration {
	if k := r.notes.Load(); k != 0 {
		r.notes.Add(-k)
		r.OnCNP(now)
	}
	if !r.active {
		return 0
	}
	r.advance(now)
	if !r.active || !r.avail.After(now) {
		return 0
	}
	return r.avail.Sub(now)
}

// OnCNP handles a CNP at time now: α is decayed to now, then, unless a
// decrease was made less than RPRateReduceMonitorPeriod ago, the rate is
// cut (Rt = Rc, Rc = Rc(1 − α/2), at most to RPMinDecFac % and not
// below RPMinRate), and α = (1 − g)α + g. The stages restart.
func (r *RP) OnCNP(now time.Time) {
	r.handled++
	switch {
	case !r.active:
		r.start(now)
	case r.first:
		r.first = false
		r.alpha = float64(r.p.RPInitialAlphaValue) / 1024
		r.alphaT = now
		if v := r.p.RPRateToSetOnFirstCNP; v > 0 {
			r.rc = min(max(v, r.p.RPMinRate), r.lineRate())
			r.rt = r.rc
		}
	default:
		r.decay(now)
	}
	if !r.cut || now.Sub(r.cutAt) >= r.p.RPRateReduceMonitorPeriod {
		f := 1 - r.alpha*1024/float64(uint64(1)<<r.p.RPGD)
		f = max(f, float64(r.p.RPMinDecFac)/100)
		r.rt = r.rc
		r.rc = max(r.rc*f, r.p.RPMinRate)
		r.cut, r.cutAt = true, now
		r.decreases++
	}
	g := r.g()
	r.alpha = (1-g)*r.alpha + g
	r.alphaT = now
	r.tStage, r.bStage, r.bytes = 0, 0, 0
	r.timerT = now.Add(r.p.RPTimeReset)
}

// start starts the rate limiter of an unpaced QP at its first CNP.
func (r *RP) start(now time.Time) {
	rate := r.p.RPRateToSetOnFirstCNP
	if rate == 0 {
		rate = r.measured
		if d := now.Sub(r.winT); rate == 0 && r.winBytes > 0 && d > 0 {
			rate = float64(r.winBytes) * 8 / (float64(d) / float64(time.Microsecond))
		}
	}
	if rate == 0 {
		rate = r.lineRate()
	}
	r.active = true
	r.rc = min(max(rate, r.p.RPMinRate), r.lineRate())
	r.rt = r.rc
	r.alpha = float64(r.p.RPInitialAlphaValue) / 1024
	r.alphaT = now
	r.cut = false
	r.avail = now
}

// decay applies α's periods without a CNP up to now: α = (1 − g)α for
// each (the paper's alpha timer, K = RPDCETCPRTT).
func (r *RP) decay(now time.Time) {
	k := now.Sub(r.alphaT) / r.p.RPDCETCPRTT
	if k <= 0 {
		return
	}
	r.alpha *= math.Pow(1-r.g(), float64(k))
	r.alphaT = r.alphaT.Add(k * r.p.RPDCETCPRTT)
}

// advance counts the timer stages that ended by now and decays α.
func (r *RP) advance(now time.Time) {
	r.decay(now)
	for i := 0; r.active && !now.Before(r.timerT); i++ {
		if i == maxStages {
			r.timerT = now.Add(r.p.RPTimeReset)
			break
		}
		r.timerT = r.timerT.Add(r.p.RPTimeReset)
		r.tStage++
		r.increase()
	}
}

// increase raises the rate after a stage (the paper's Figure 7):
// fast recovery while both counters are at most F (Rt unchanged),
// hyper increase once both are past it (Rt += i·R_HAI, i the stages
// past F), additive increase between (Rt += R_AI); then Rc = (Rt + Rc)/2.
// A rate back at the line rate releases the rate limiter.
func (r *RP) increase() {
	f := r.p.RPThreshold
	hi, lo := max(r.tStage, r.bStage), min(r.tStage, r.bStage)
	if r.p.RPByteReset == 0 {
		hi, lo = r.tStage, r.tStage
	}
	switch {
	case hi <= f:
	case lo > f:
		r.rt += float64(lo-f) * r.p.RPHAIRate
	default:
		r.rt += r.p.RPAIRate
	}
	line := r.lineRate()
	r.rt = min(r.rt, line)
	r.rc = min((r.rt+r.rc)/2, line)
	if r.rc >= line && r.p.RPMaxRate == 0 {
		// Back to no line rate: unpaced.
		r.active = false
		r.winT, r.winBytes, r.measured = time.Time{}, 0, 0
	}
}

// Sent charges a packet of n bytes sent at time now: to the pacer and
// the byte counter of a rate-limited QP, to the rate measurement of an
// unpaced one.
func (r *RP) Sent(n int, now time.Time) {
	if !r.active {
		if r.winT.IsZero() {
			r.winT = now
		}
		if d := now.Sub(r.winT); d >= measureWindow {
			r.measured = float64(r.winBytes) * 8 / (float64(d) / float64(time.Microsecond))
			r.winT, r.winBytes = now, 0
		}
		r.winBytes += n
		return
	}
	// A QP idle for a while may send a burst of what it saved, up to
	// burstBytes: enough for one GSO send.
	ns := 8000 / r.rc // nanoseconds per byte at Rc Mb/s
	burst := min(max(r.rc*1e6/8*burstTime.Seconds(), minBurst), maxBurst)
	if floor := now.Add(-time.Duration(burst * ns)); r.avail.Before(floor) {
		r.avail = floor
	}
	r.avail = r.avail.Add(time.Duration(float64(n) * ns))
	if b := r.p.RPByteReset; b > 0 {
		r.bytes += n
		for r.bytes >= b && r.active {
			r.bytes -= b
			r.bStage++
			r.increase()
		}
	}
}

// The pacer's burst: what a rate-limited QP may send at once after
// being idle, the bytes of burstTime at its rate, within minBurst (a
// packet of the largest path MTU) and maxBurst (one UDP GSO send).
// burstTime covers a timer that wakes the QP late (Go's timers, on a
// busy host, by a few hundred µs): the QP then sends what it saved
// meanwhile, and a late timer does not lower its rate.
const (
	burstTime = time.Millisecond
	minBurst  = 4096
	maxBurst  = 65536
)

// NP is one QP's notification point: when it last sent a CNP.
type NP struct {
	last atomic.Int64 // UnixNano of the last CNP sent, 0: none
}

// Allow reports whether a CNP may be sent at now, at least min after
// the last one, and if so takes the turn.
func (n *NP) Allow(now time.Time, min time.Duration) bool {
	t := now.UnixNano()
	for {
		last := n.last.Load()
		if last != 0 && t-last < int64(min) {
			return false
		}
		if n.last.CompareAndSwap(last, t) {
			return true
		}
	}
}
