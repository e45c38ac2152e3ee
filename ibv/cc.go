package ibv

// Congestion control's parameters: the value type the NIC's options
// (verbs.Config.CC), the engine (internal/cc) and the tools share.

import (
	"fmt"
	"io"
	"time"
)

// CCParams are the parameters of DCQCN (Zhu et al., SIGCOMM 2015), each
// named and defaulted as the mlx5 firmware's parameter of the same name
// (drivers/infiniband/hw/mlx5/cong.c's debugfs files; the defaults are
// ConnectX's). Rates are in Mb/s, as mlx5's.
type CCParams struct {
	// NPMinTimeBetweenCNPs (np_min_time_between_cnps, µs) is the least
	// time between two CNPs the notification point sends for one QP:
	// CE marks in between are counted and not answered.
	NPMinTimeBetweenCNPs time.Duration
	// NPCNPDSCP (np_cnp_dscp) is the DSCP of the CNPs sent; their ECN
	// field is not-ECT, so that they are never marked.
	NPCNPDSCP uint8

	// RPTimeReset (rp_time_reset, µs) is the rate-increase timer: each
	// period without a CNP is one timer stage (the paper's T).
	RPTimeReset time.Duration
	// RPByteReset (rp_byte_reset, bytes) is the byte counter: each
	// RPByteReset bytes sent without a CNP is one byte stage (the
	// paper's B). 0 turns the byte counter off.
	RPByteReset int
	// RPThreshold (rp_threshold) is the number of stages of fast
	// recovery before additive increase (the paper's F).
	RPThreshold int
	// RPAIRate (rp_ai_rate, Mb/s) is the additive increase (R_AI).
	RPAIRate float64
	// RPHAIRate (rp_hai_rate, Mb/s) is the hyper increase (R_HAI).
	RPHAIRate float64
	// RPMinDecFac (rp_min_dec_fac, %) bounds one decrease: the rate
	// after a CNP is at least this share of the rate before.
	RPMinDecFac int
	// RPMinRate (rp_min_rate, Mb/s) is the lowest rate.
	RPMinRate float64
	// RPMaxRate (rp_max_rate, Mb/s) is the highest rate, the line rate:
	// every QP is paced at most at it, from its start. 0: the NIC has
	// no line rate (a software NIC's is its CPU's): a QP sends unpaced
	// until its first CNP and again once its rate recovered to
	// CCDefaultLineRate.
	RPMaxRate float64
	// RPRateToSetOnFirstCNP (rp_rate_to_set_on_first_cnp, Mb/s) is the
	// rate a QP sending unpaced starts from on its first CNP; 0: the
	// rate it was sending at (mlx5: the line rate).
	RPRateToSetOnFirstCNP float64
	// RPDCETCPG (rp_dce_tcp_g) is α's gain g in 1024ths, counted down
	// from 1024: g = (1024 − RPDCETCPG)/1024 (mlx5's 1019 gives
	// g = 5/1024, near the paper's 1/256).
	RPDCETCPG int
	// RPDCETCPRTT (rp_dce_tcp_rtt, µs) is α's update period (the
	// paper's K): each period α = (1 − g)α, or (1 − g)α + g if a CNP
	// came in it.
	RPDCETCPRTT time.Duration
	// RPRateReduceMonitorPeriod (rp_rate_reduce_monitor_period, µs) is
	// the least time between two decreases: CNPs in between update α
	// only.
	RPRateReduceMonitorPeriod time.Duration
	// RPInitialAlphaValue (rp_initial_alpha_value) is α on the first
	// CNP, in 1024ths (1023: α ≈ 1, the paper's initial value).
	RPInitialAlphaValue int
	// RPGD (rp_gd) scales the decrease: Rc = Rc(1 − α·1024/2^RPGD); the
	// default 11 is the paper's Rc(1 − α/2).
	RPGD int
}

// CCDefaultLineRate is the line rate of a NIC without one (RPMaxRate
// 0), Mb/s: above what a software NIC sends.
const CCDefaultLineRate = 100_000

// DefaultCCParams returns mlx5's defaults: the firmware's, which the
// kernel does not hold (mlx5's cong.c reads and writes them). Those of
// the alpha update and the rate decrease — rp_dce_tcp_g 1019,
// rp_dce_tcp_rtt 1 µs, rp_initial_alpha_value 1023,
// rp_rate_to_set_on_first_cnp 0, rp_min_dec_fac 50, rp_min_rate 1,
// rp_gd 11, rp_rate_reduce_monitor_period 4 µs — are NVIDIA's table of
// DCQCN parameters for ConnectX-4 and later (DOCA documentation, "DCQCN
// CC Parameters"); the rate increase's and the notification point's are
// recalled from the same vendor's documentation and not checked against
// it.
func DefaultCCParams() CCParams {
	return CCParams{
		NPMinTimeBetweenCNPs:      4 * time.Microsecond,
		NPCNPDSCP:                 48,
		RPTimeReset:               300 * time.Microsecond,
		RPByteReset:               32767,
		RPThreshold:               1,
		RPAIRate:                  5,
		RPHAIRate:                 50,
		RPMinDecFac:               50,
		RPMinRate:                 1,
		RPMaxRate:                 0,
		RPRateToSetOnFirstCNP:     0,
		RPDCETCPG:                 1019,
		RPDCETCPRTT:               1 * time.Microsecond,
		RPRateReduceMonitorPeriod: 4 * time.Microsecond,
		RPInitialAlphaValue:       1023,
		RPGD:                      11,
	}
}

// Check reports a parameter out of range.
func (p *CCParams) Check() error {
	switch {
	case p.NPMinTimeBetweenCNPs < 0:
		return fmt.Errorf("np_min_time_between_cnps %v < 0", p.NPMinTimeBetweenCNPs)
	case p.NPCNPDSCP > 63:
		return fmt.Errorf("np_cnp_dscp %d > 63", p.NPCNPDSCP)
	case p.RPTimeReset <= 0:
		return fmt.Errorf("rp_time_reset %v <= 0", p.RPTimeReset)
	case p.RPByteReset < 0:
		return fmt.Errorf("rp_byte_reset %d < 0", p.RPByteReset)
	case p.RPThreshold < 1 || p.RPThreshold > 31:
		return fmt.Errorf("rp_threshold %d not in 1..31", p.RPThreshold)
	case p.RPAIRate < 0 || p.RPHAIRate < 0:
		return fmt.Errorf("rp_ai_rate %v or rp_hai_rate %v < 0", p.RPAIRate, p.RPHAIRate)
	case p.RPMinDecFac < 1 || p.RPMinDecFac > 100:
		return fmt.Errorf("rp_min_dec_fac %d not in 1..100", p.RPMinDecFac)
	case p.RPMinRate <= 0:
		return fmt.Errorf("rp_min_rate %v <= 0", p.RPMinRate)
	case p.RPMaxRate != 0 && p.RPMaxRate < p.RPMinRate:
		return fmt.Errorf("rp_max_rate %v < rp_min_rate %v", p.RPMaxRate, p.RPMinRate)
	case p.RPRateToSetOnFirstCNP < 0:
		return fmt.Errorf("rp_rate_to_set_on_first_cnp %v < 0", p.RPRateToSetOnFirstCNP)
	case p.RPDCETCPG < 0 || p.RPDCETCPG > 1024:
		return fmt.Errorf("rp_dce_tcp_g %d not in 0..1024", p.RPDCETCPG)
	case p.RPDCETCPRTT <= 0:
		return fmt.Errorf("rp_dce_tcp_rtt %v <= 0", p.RPDCETCPRTT)
	case p.RPRateReduceMonitorPeriod < 0:
		return fmt.Errorf("rp_rate_reduce_monitor_period %v < 0", p.RPRateReduceMonitorPeriod)
	case p.RPInitialAlphaValue < 0 || p.RPInitialAlphaValue > 1024:
		return fmt.Errorf("rp_initial_alpha_value %d not in 0..1024", p.RPInitialAlphaValue)
	case p.RPGD < 1 || p.RPGD > 20:
		return fmt.Errorf("rp_gd %d not in 1..20", p.RPGD)
	}
	return nil
}

// CCParam is one parameter as mlx5 names it, with its value in mlx5's unit.
type CCParam struct {
	Name  string
	Value float64
	Unit  string // "usec", "Mbps", "bytes", "%" or ""
}

// List returns every parameter, named as mlx5 names it and in mlx5's
// units, in cong.c's order: what softnic info shows and the tools' flags
// set.
func (p *CCParams) List() []CCParam {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return []CCParam{
		{"rp_time_reset", us(p.RPTimeReset), "usec"},
		{"rp_byte_reset", float64(p.RPByteReset), "bytes"},
		{"rp_threshold", float64(p.RPThreshold), ""},
		{"rp_ai_rate", p.RPAIRate, "Mbps"},
		{"rp_max_rate", p.RPMaxRate, "Mbps"},
		{"rp_hai_rate", p.RPHAIRate, "Mbps"},
		{"rp_min_dec_fac", float64(p.RPMinDecFac), "%"},
		{"rp_min_rate", p.RPMinRate, "Mbps"},
		{"rp_rate_to_set_on_first_cnp", p.RPRateToSetOnFirstCNP, "Mbps"},
		{"rp_dce_tcp_g", float64(p.RPDCETCPG), ""},
		{"rp_dce_tcp_rtt", us(p.RPDCETCPRTT), "usec"},
		{"rp_rate_reduce_monitor_period", us(p.RPRateReduceMonitorPeriod), "usec"},
		{"rp_initial_alpha_value", float64(p.RPInitialAlphaValue), ""},
		{"rp_gd", float64(p.RPGD), ""},
		{"np_min_time_between_cnps", us(p.NPMinTimeBetweenCNPs), "usec"},
		{"np_cnp_dscp", float64(p.NPCNPDSCP), ""},
	}
}

// Set sets the parameter named name (mlx5's name) to v, in mlx5's unit.
func (p *CCParams) Set(name string, v float64) error {
	us := func() time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	switch name {
	case "rp_time_reset":
		p.RPTimeReset = us()
	case "rp_byte_reset":
		p.RPByteReset = int(v)
	case "rp_threshold":
		p.RPThreshold = int(v)
	case "rp_ai_rate":
		p.RPAIRate = v
	case "rp_max_rate":
		p.RPMaxRate = v
	case "rp_hai_rate":
		p.RPHAIRate = v
	case "rp_min_dec_fac":
		p.RPMinDecFac = int(v)
	case "rp_min_rate":
		p.RPMinRate = v
	case "rp_rate_to_set_on_first_cnp":
		p.RPRateToSetOnFirstCNP = v
	case "rp_dce_tcp_g":
		p.RPDCETCPG = int(v)
	case "rp_dce_tcp_rtt":
		p.RPDCETCPRTT = us()
	case "rp_rate_reduce_monitor_period":
		p.RPRateReduceMonitorPeriod = us()
	case "rp_initial_alpha_value":
		p.RPInitialAlphaValue = int(v)
	case "rp_gd":
		p.RPGD = int(v)
	case "np_min_time_between_cnps":
		p.NPMinTimeBetweenCNPs = us()
	case "np_cnp_dscp":
		if v < 0 || v > 63 {
			return fmt.Errorf("np_cnp_dscp %v not in 0..63", v)
		}
		p.NPCNPDSCP = uint8(v)
	default:
		return fmt.Errorf("no congestion control parameter %q", name)
	}
	return p.Check()
}

// Write writes the parameters one a line, "name value unit".
func (p *CCParams) Write(w io.Writer) error {
	for _, q := range p.List() {
		if _, err := fmt.Fprintf(w, "%s %g %s\n", q.Name, q.Value, q.Unit); err != nil {
			return err
		}
	}
	return nil
}
