package cc

import (
	"math"
	"testing"
	"time"

	"github.com/softnic/softnic/ibv"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// paperParams are the DCQCN paper's settings (Zhu et al., SIGCOMM 2015,
// section 5: g = 1/256, K = 55 µs, timer 55 µs, byte counter 10 MB,
// F = 5, R_AI = 40 Mb/s, R_HAI = 200 Mb/s) on a 40 Gb/s line.
func paperParams() ibv.CCParams {
	p := ibv.DefaultCCParams()
	p.RPDCETCPG = 1024 - 4 // g = 4/1024 = 1/256
	p.RPDCETCPRTT = 55 * time.Microsecond
	p.RPTimeReset = 55 * time.Microsecond
	p.RPByteReset = 10 << 20
	p.RPThreshold = 5
	p.RPAIRate = 40
	p.RPHAIRate = 200
	p.RPMaxRate = 40_000
	p.RPRateToSetOnFirstCNP = 40_000
	p.RPRateReduceMonitorPeriod = 50 * time.Microsecond
	p.RPInitialAlphaValue = 1024
	return p
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %.12g, want %.12g", what, got, want)
	}
}

// TestRPDecrease checks the cut and α against the paper's equations:
// on a CNP Rt = Rc, Rc = Rc(1 − α/2), α = (1 − g)α + g; without CNPs
// α = (1 − g)α every K.
func TestRPDecrease(t *testing.T) {
	p := paperParams()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	r := NewRP(&p)
	g := 1.0 / 256
	if r.Wait(t0) != 0 {
		t.Fatal("an RP without CNPs waits")
	}
	r.OnCNP(t0)
	alpha := 1.0
	rc := 40_000 * (1 - alpha/2)
	near(t, "Rc after the first CNP", r.Rate(), rc)
	near(t, "Rt after the first CNP", r.Target(), 40_000)
	alpha = (1-g)*alpha + g
	near(t, "α after the first CNP", r.Alpha(), alpha)

	// 3 periods of K without a CNP, then one: α decays three times
	// before the cut uses it.
	now := t0.Add(3*55*time.Microsecond + 10*time.Microsecond)
	alpha *= math.Pow(1-g, 3)
	r.OnCNP(now)
	rt := rc
	rc *= 1 - alpha/2
	alpha = (1-g)*alpha + g
	near(t, "Rt after the second CNP", r.Target(), rt)
	near(t, "Rc after the second CNP", r.Rate(), rc)
	near(t, "α after the second CNP", r.Alpha(), alpha)

	// A CNP within the monitor period updates α only.
	r.OnCNP(now.Add(10 * time.Microsecond))
	alpha = (1-g)*alpha + g
	near(t, "Rc after a CNP in the monitor period", r.Rate(), rc)
	near(t, "α after a CNP in the monitor period", r.Alpha(), alpha)
}

// TestRPIncrease checks the increase by timer and byte counter: F
// stages of fast recovery (Rc = (Rt + Rc)/2, Rt unchanged), additive
// increase (Rt += R_AI) once one counter passed F, hyper increase
// (Rt += i·R_HAI) once both did.
func TestRPIncrease(t *testing.T) {
	p := paperParams()
	p.RPByteReset = 1000
	p.RPMaxRate = 100_000
	r := NewRP(&p)
	r.OnCNP(t0)
	rc, rt := r.Rate(), r.Target()
	now := t0
	// Five timer stages: fast recovery.
	for i := 1; i <= 5; i++ {
		now = now.Add(55 * time.Microsecond)
		r.Wait(now)
		rc = (rt + rc) / 2
		near(t, "Rc in fast recovery", r.Rate(), rc)
		near(t, "Rt in fast recovery", r.Target(), rt)
	}
	// A sixth timer stage, no byte stage: additive increase.
	now = now.Add(55 * time.Microsecond)
	r.Wait(now)
	rt += 40
	rc = (rt + rc) / 2
	near(t, "Rt after additive increase", r.Target(), rt)
	near(t, "Rc after additive increase", r.Rate(), rc)
	// Seven byte stages: six of them at most F (T = 6 > F: additive),
	// the seventh with both past F: hyper increase, i = min(T, BC) − F.
	for b := 1; b <= 7; b++ {
		r.Sent(1000, now)
		switch {
		case b <= 5:
			rt += 40
		default:
			rt += float64(min(6, b)-5) * 200
		}
		rc = (rt + rc) / 2
		near(t, "Rt by the byte counter", r.Target(), rt)
		near(t, "Rc by the byte counter", r.Rate(), rc)
	}
}

// TestRPBounds: the cut is bounded by rp_min_dec_fac and rp_min_rate,
// and a rate that recovers to the line rate releases the rate limiter.
func TestRPBounds(t *testing.T) {
	p := paperParams()
	p.RPGD = 9 // Rc(1 − 2α): more than rp_min_dec_fac allows
	p.RPMinDecFac = 70
	p.RPMinRate = 20_000
	r := NewRP(&p)
	r.OnCNP(t0)
	near(t, "Rc bounded by rp_min_dec_fac", r.Rate(), 40_000*0.7)
	r.OnCNP(t0.Add(time.Millisecond))
	near(t, "Rc bounded by rp_min_rate", r.Rate(), 20_000)
	now := t0.Add(time.Millisecond)
	for range 1000 {
		now = now.Add(55 * time.Microsecond)
		r.Wait(now)
	}
	// With a line rate (rp_max_rate) the QP stays paced at it.
	near(t, "Rc recovered to rp_max_rate", r.Rate(), 40_000)

	// Without one it sends unpaced again once recovered.
	p.RPMaxRate = 0
	r = NewRP(&p)
	if r.Active() {
		t.Fatal("an RP without a line rate paces before its first CNP")
	}
	r.OnCNP(now)
	for i := 0; r.Active() && i < 100000; i++ {
		now = now.Add(55 * time.Microsecond)
		r.Wait(now)
	}
	if r.Active() || r.Rate() != 0 {
		t.Fatalf("rate %v still limited after recovering", r.Rate())
	}
}

// TestRPLineRate: with rp_max_rate a QP is paced at it before any CNP,
// and its first CNP cuts from it.
func TestRPLineRate(t *testing.T) {
	p := paperParams()
	r := NewRP(&p)
	if !r.Active() || r.Rate() != 40_000 {
		t.Fatalf("before any CNP: active %v at %v, want paced at 40000", r.Active(), r.Rate())
	}
	r.OnCNP(t0)
	near(t, "Rc after the first CNP", r.Rate(), 20_000)
}

// TestRPFirstCNPMeasures: an unpaced QP's first CNP starts from the rate
// it was sending at.
func TestRPFirstCNPMeasures(t *testing.T) {
	p := ibv.DefaultCCParams()
	p.RPMinDecFac = 100 // no cut: Rc is the measured rate
	r := NewRP(&p)
	now := t0
	for range 2000 { // 1000 bytes per µs: 8000 Mb/s
		r.Sent(1000, now)
		now = now.Add(time.Microsecond)
	}
	r.OnCNP(now)
	near(t, "Rc on the first CNP", r.Rate(), 8000)
}

// TestPacer: at 8 Mb/s (a byte per µs) a QP sends one packet, after an
// idle second a burst, then one 1000-byte packet per millisecond.
func TestPacer(t *testing.T) {
	p := ibv.DefaultCCParams()
	p.RPRateToSetOnFirstCNP = 16
	p.RPInitialAlphaValue = 1024
	p.RPTimeReset = time.Hour // no increase
	p.RPByteReset = 0
	r := NewRP(&p)
	r.Note()
	now := t0
	burst := func() int {
		sent := 0
		for r.Wait(now) == 0 {
			r.Sent(1000, now)
			sent++
		}
		return sent
	}
	if n := burst(); n != 1 {
		t.Fatalf("%d packets at once on the first CNP, want 1", n)
	}
	near(t, "Rc", r.Rate(), 8)
	now = now.Add(time.Second) // idle: a burst saved
	if n := burst(); n < 4 || n > 5 {
		t.Fatalf("burst of %d packets, want minBurst's 4 or 5", n)
	}
	for i := range 10 {
		w := r.Wait(now)
		if w <= 0 || w > time.Millisecond {
			t.Fatalf("packet %d: wait %v, want (0, 1ms]", i, w)
		}
		now = now.Add(w)
		if r.Wait(now) != 0 {
			t.Fatalf("packet %d: still waiting after %v", i, w)
		}
		r.Sent(1000, now)
	}
}

func TestNPAllow(t *testing.T) {
	var n NP
	min := 50 * time.Microsecond
	for _, tt := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {10 * time.Microsecond, false}, {49 * time.Microsecond, false}, {50 * time.Microsecond, true}, {60 * time.Microsecond, false}, {time.Millisecond, true}} {
		if got := n.Allow(t0.Add(tt.at), min); got != tt.want {
			t.Errorf("Allow at %v = %v, want %v", tt.at, got, tt.want)
		}
	}
}

func TestParamsSet(t *testing.T) {
	p := ibv.DefaultCCParams()
	for _, q := range p.List() {
		if err := p.Set(q.Name, q.Value); err != nil {
			t.Errorf("Set(%s, %v): %v", q.Name, q.Value, err)
		}
	}
	if p != ibv.DefaultCCParams() {
		t.Errorf("setting every default changed the parameters: %+v", p)
	}
	if err := p.Set("rp_threshold", 0); err == nil {
		t.Error("rp_threshold 0 accepted")
	}
	if err := p.Set("rp_nonsense", 1); err == nil {
		t.Error("an unknown name accepted")
	}
}
