package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/softnic/softnic/tools/perftest"
)

// The goals of issue 13 on the guests: softnic ↔ softnic against
// rxe ↔ rxe on the same two 1-vCPU guests.
const (
	GoalGuestBW      = 2.0 // bandwidth, softnic over rxe, at least
	GoalGuestMsgRate = 2.0 // message rate, softnic over rxe, at least
	GoalGuestLat     = 1.0 // latency, softnic over rxe, at most
)

// Guest-mode row names.
const (
	GuestRowWriteBW = "write_bw 64 KiB"
	GuestRowReadBW  = "read_bw 64 KiB"
	GuestRowSendBW  = "send_bw 64 B msg rate"
	GuestRowLatTyp  = "write_lat 8 B typical"
	GuestRowLatP99  = "write_lat 8 B p99"
	// GuestRowLatBusy is softnic's write_lat with --busy-poll on both
	// sides over rxe's write_lat (GuestRowLatTyp's test): rxe has no
	// busy-poll mode.
	GuestRowLatBusy = "write_lat 8 B typical, busy-poll"
)

// GuestRow is one line of the guest table: a figure for each pair, and
// softnic's over rxe's.
type GuestRow struct {
	// Name says what was measured: "write_bw 64 KiB".
	Name string `json:"name"`
	// RXE and Softnic are the figures of rxe ↔ rxe and softnic ↔ softnic,
	// in Unit; null when not measured.
	RXE     *float64 `json:"rxe"`
	Softnic *float64 `json:"softnic"`
	// Unit is the figures' unit: "MB/s" (perftest's MB/sec, 2^20 bytes
	// per second), "k msg/s", "usec".
	Unit string `json:"unit"`
	// Ratio is Softnic over RXE: higher is better for bandwidth and
	// message rate, lower for latency; null when either is missing.
	Ratio *float64 `json:"softnic_over_rxe"`
	// Floor is plain UDP's figure between the same guests, in Unit
	// (GuestFloor; the note says which); absent when not measured.
	Floor *float64 `json:"udp_floor,omitempty"`
	// Goal is issue 13's goal for Ratio, as text ("≥ 2×"); empty when it
	// has none.
	Goal string `json:"goal"`
	// Status is PASS or SHORT against Goal, FAILED when a figure is
	// missing, empty when there is no goal.
	Status string `json:"status"`
	// Note says which of perftest's columns the figure is, or why it is
	// missing.
	Note string `json:"note,omitempty"`
	// Rounds are the rounds' own Softnic/RXE, in the order they ran,
	// when there were several (GuestConfig.Rounds): RXE and Softnic are
	// then each pair's median over the rounds and Ratio the median of
	// these, each round's two runs having been back to back.
	Rounds []float64 `json:"rounds_softnic_over_rxe,omitempty"`
}

// GuestTable is the guest mode's result, and the document --guests --json
// prints.
type GuestTable struct {
	// Machine is the host the guests ran on.
	Machine Machine  `json:"machine"`
	Guests  [2]Guest `json:"guests"`
	Quick   bool     `json:"quick"`
	// Rounds is how many times each test ran, rxe's and softnic's back to
	// back each time (GuestConfig.Rounds).
	Rounds int `json:"rounds"`
	// MTU is the path MTU of each pair's QPs (the clients' results), bytes;
	// 0 when unknown.
	MTU struct {
		RXE     int `json:"rxe"`
		Softnic int `json:"softnic"`
	} `json:"path_mtu"`
	// Tests are the command-line arguments both pairs ran each tool with,
	// by row name.
	Tests map[string]GuestTest `json:"tests"`
	// Floor is what plain UDP did between the guests; absent when it was
	// not measured.
	Floor *GuestFloor `json:"udp_floor,omitempty"`
	Rows  []GuestRow  `json:"rows"`
	// Error is why the run stopped early; empty when it did not.
	Error string `json:"error,omitempty"`
	// Seconds: booting the guests, each pair's tests and the whole run.
	BedUpSeconds   float64 `json:"bed_up_seconds"`
	RXESeconds     float64 `json:"rxe_seconds"`
	SoftnicSeconds float64 `json:"softnic_seconds"`
	TotalSeconds   float64 `json:"total_seconds"`
}

// Failed says whether any figure is missing or the run stopped early.
func (t GuestTable) Failed() bool {
	if t.Error != "" {
		return true
	}
	for _, r := range t.Rows {
		if r.Status == Failed {
			return true
		}
	}
	return false
}

// BuildGuests computes the guest table's rows, ratios and verdicts.
func BuildGuests(m GuestMeasurements) GuestTable {
	t := GuestTable{Machine: m.Machine, Guests: m.Guests, Quick: m.Quick, Rounds: max(m.Rounds, 1), Tests: m.Plan, Error: m.Err, Floor: m.Floor,
		BedUpSeconds: m.BedUpSeconds, RXESeconds: m.RXE.Seconds, SoftnicSeconds: m.Softnic.Seconds, TotalSeconds: m.TotalSeconds}
	t.MTU.RXE, t.MTU.Softnic = pathMTU(m.RXE), pathMTU(m.Softnic)
	bw := func(r perftest.Result) *float64 {
		if len(r.BW) != 1 {
			return nil
		}
		return ptr(r.BW[0].BWAvg)
	}
	msgs := func(r perftest.Result) *float64 {
		if len(r.BW) != 1 {
			return nil
		}
		return ptr(r.BW[0].MsgRate * 1000)
	}
	typ := func(r perftest.Result) *float64 {
		if len(r.Lat) != 1 {
			return nil
		}
		return ptr(r.Lat[0].Typical)
	}
	p99 := func(r perftest.Result) *float64 {
		if len(r.Lat) != 1 {
			return nil
		}
		return ptr(r.Lat[0].P99)
	}
	// Each row's floor is one of udpbench's figures between the guests.
	gso := floorFig{"UDP raw/gso+gro", func(f *GuestFloor) *float64 {
		if u := findUDP(f.UDP, "raw/gso+gro"); u != nil {
			return ptr(u.Gbits * 1e9 / 8 / (1 << 20)) // perftest's MB/s are MiB/s
		}
		return nil
	}}
	plain := floorFig{"UDP raw/plain's datagrams", func(f *GuestFloor) *float64 {
		if u := findUDP(f.UDP, "raw/plain"); u != nil {
			return ptr(u.Kpps)
		}
		return nil
	}}
	pp := func(mode, what string, p99 bool) floorFig {
		return floorFig{"UDP ping-pong " + mode + " " + what, func(f *GuestFloor) *float64 {
			for _, q := range f.PingPong {
				switch {
				case q.Mode != mode:
				case p99:
					return ptr(q.P99)
				default:
					return ptr(q.Typical)
				}
			}
			return nil
		}}
	}
	// The latency rows' floor: write_lat's turn through softnic's link
	// (the ACK and the WRITE each way, as the engine sends and reads
	// them) when udpbench measured it, else one datagram each way.
	latFloor := "block"
	if m.Floor != nil && slices.ContainsFunc(m.Floor.PingPong, func(p PingPong) bool { return p.Mode == "turn" }) {
		latFloor = "turn"
	}
	// Each row's figures come from rxe's test rxeTest and softnic's test
	// test: the same test but for the busy-poll row.
	for _, d := range []struct {
		name, test, rxeTest, unit, note string
		fig                             func(perftest.Result) *float64
		goal                            float64
		higher                          bool
		floor                           floorFig
	}{
		{GuestRowWriteBW, GuestRowWriteBW, GuestRowWriteBW, "MB/s", "BW average", bw, GoalGuestBW, true, gso},
		{GuestRowReadBW, GuestRowReadBW, GuestRowReadBW, "MB/s", "BW average", bw, GoalGuestBW, true, gso},
		{GuestRowSendBW, GuestRowSendBW, GuestRowSendBW, "k msg/s", "MsgRate", msgs, GoalGuestMsgRate, true, plain},
		{GuestRowLatTyp, GuestRowLatTyp, GuestRowLatTyp, "usec", "t_typical, half round trips", typ, GoalGuestLat, false, pp(latFloor, "typical", false)},
		{GuestRowLatP99, GuestRowLatTyp, GuestRowLatTyp, "usec", "99% percentile", p99, 0, false, pp(latFloor, "p99", true)},
		{GuestRowLatBusy, GuestRowLatBusy, GuestRowLatTyp, "usec",
			"t_typical; softnic with --busy-poll on both sides, over rxe's one write_lat (rxe has no busy-poll)",
			typ, GoalGuestLat, false, pp("busy", "typical", false)},
	} {
		if _, ok := m.Plan[d.test]; !ok {
			continue
		}
		r := GuestRow{Name: d.name, Unit: d.unit, Note: d.note}
		var why []string
		for _, s := range []struct {
			pair, test string
			p          Pair
			dst        **float64
		}{{"rxe", d.rxeTest, m.RXE, &r.RXE}, {"softnic", d.test, m.Softnic, &r.Softnic}} {
			if res, ok := s.p.Results[s.test]; ok {
				*s.dst = d.fig(res)
			}
			if *s.dst == nil {
				e := s.p.Errors[s.test]
				if e == "" {
					e = "not measured"
				}
				why = append(why, s.pair+": "+e)
			}
		}
		if d.goal != 0 {
			if d.higher {
				r.Goal = fmt.Sprintf("≥ %g×", d.goal)
			} else {
				r.Goal = fmt.Sprintf("≤ %g×", d.goal)
			}
		}
		rounds := m.RXE.Rounds != nil && m.Softnic.Rounds != nil
		if rounds && len(why) == 0 {
			r.RXE, r.Softnic, r.Rounds = roundFigures(m.RXE.Rounds[d.rxeTest], m.Softnic.Rounds[d.test], d.fig)
			if r.RXE == nil || r.Softnic == nil {
				why = append(why, "no figure in any round")
			}
		}
		switch {
		case len(why) > 0:
			r.Status, r.Note = Failed, strings.Join(why, "; ")
		case rounds && len(r.Rounds) > 0:
			r.Ratio = ptr(median(r.Rounds))
		case *r.RXE > 0:
			r.Ratio = ptr(*r.Softnic / *r.RXE)
		}
		switch {
		case r.Ratio == nil, d.goal == 0:
		case d.higher:
			r.Status = verdict(*r.Ratio >= d.goal)
		default:
			r.Status = verdict(*r.Ratio <= d.goal)
		}
		if m.Floor != nil {
			r.Floor = d.floor.fig(m.Floor)
		}
		if r.Floor != nil && *r.Floor > 0 && r.RXE != nil && r.Softnic != nil {
			r.Note += fmt.Sprintf("; floor: %s, rxe %.2f× and softnic %.2f× it", d.floor.what, *r.RXE / *r.Floor, *r.Softnic / *r.Floor)
		}
		if len(r.Rounds) > 0 {
			rs := make([]string, len(r.Rounds))
			for i, x := range r.Rounds {
				rs[i] = fmt.Sprintf("%.2f×", x)
			}
			r.Note += fmt.Sprintf("; medians of %d rounds, softnic/rxe in each: %s", len(r.Rounds), strings.Join(rs, ", "))
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

// roundFigures returns the medians of the figures fig finds in rxe's and
// softnic's rounds and each round's softnic/rxe, for the rounds where
// both have a figure (rxe's above 0). A pair with no figure in any round
// gets nil.
func roundFigures(rxe, sn []Round, fig func(perftest.Result) *float64) (rxeMed, snMed *float64, ratios []float64) {
	figs := func(rs []Round) map[int]float64 {
		f := map[int]float64{}
		for _, r := range rs {
			if r.Result != nil {
				if v := fig(*r.Result); v != nil {
					f[r.N] = *v
				}
			}
		}
		return f
	}
	fr, fs := figs(rxe), figs(sn)
	med := func(f map[int]float64) *float64 {
		if len(f) == 0 {
			return nil
		}
		vs := make([]float64, 0, len(f))
		for _, v := range f {
			vs = append(vs, v)
		}
		return ptr(median(vs))
	}
	for _, r := range sn {
		if x, ok := fr[r.N]; ok && x > 0 {
			if y, ok := fs[r.N]; ok {
				ratios = append(ratios, y/x)
			}
		}
	}
	return med(fr), med(fs), ratios
}

// median returns the median of vs (the mean of the middle two for an
// even count); vs is not changed.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// floorFig is a row's floor: what it is and how to find it.
type floorFig struct {
	what string
	fig  func(*GuestFloor) *float64
}

func findUDP(us []UDP, mode string) *UDP {
	for i := range us {
		if us[i].Mode == mode {
			return &us[i]
		}
	}
	return nil
}

// pathMTU returns the path MTU a pair's results agree on, 0 when they
// have none or differ.
func pathMTU(p Pair) int {
	mtu := 0
	for _, r := range p.Results {
		if r.MTU == 0 || (mtu != 0 && r.MTU != mtu) {
			return 0
		}
		mtu = r.MTU
	}
	return mtu
}

// JSON returns t as the indented JSON document --guests --json prints.
func (t GuestTable) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Format returns t as text: the host and the guests, what ran, the table
// with both figures, the ratio, goal and status, and the time it took.
func (t GuestTable) Format() string {
	var b strings.Builder
	mc, g := t.Machine, t.Guests[0]
	fmt.Fprintf(&b, "softnic bench --guests%s: host %d CPUs (%s), Linux %s; load average %s before, %s after\n",
		map[bool]string{true: " --quick", false: ""}[t.Quick], mc.CPUs, mc.CPUModel, mc.Kernel, loadText(mc.LoadBefore), loadText(mc.LoadAfter))
	if g.Name != "" {
		fmt.Fprintf(&b, "guests %s %s → %s %s: qemu %s, %d vCPU, %d MiB each, Linux %s\n",
			t.Guests[1].Name, t.Guests[1].IP, g.Name, g.IP, g.Accel, g.CPUs, g.MemKiB/1024, g.Kernel)
	}
	fmt.Fprintf(&b, "path MTU: rxe %d, softnic %d\n", t.MTU.RXE, t.MTU.Softnic)
	if t.Rounds > 1 {
		fmt.Fprintf(&b, "%d rounds, each running every test with rxe and then softnic: each figure below is the median of its rounds, softnic/rxe the median of the rounds' own\n", t.Rounds)
	}
	names := make([]string, 0, len(t.Tests))
	for n := range t.Tests {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int { return slices.Index(guestOrder, x) - slices.Index(guestOrder, y) })
	for _, n := range names {
		ts := t.Tests[n]
		if ts.SoftnicOnly {
			fmt.Fprintf(&b, "  %-9s %s (softnic only)\n", ts.Tool, strings.Join(ts.Args, " "))
		} else {
			fmt.Fprintf(&b, "  %-9s %s (rxe: ib_%s)\n", ts.Tool, strings.Join(ts.Args, " "), ts.Tool)
		}
	}
	b.WriteString("\n")
	w := len("measure")
	for _, r := range t.Rows {
		w = max(w, len([]rune(r.Name)))
	}
	fig := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	if f := t.Floor; f != nil {
		fmt.Fprintf(&b, "UDP floor: udpbench %s → %s, %d-byte datagrams (%s)", t.Guests[1].Name, g.Name, f.Size, strings.Join(f.Args, " "))
		if f.Error != "" {
			fmt.Fprintf(&b, ": not measured: %s", f.Error)
		}
		b.WriteString("\n")
		for _, u := range f.UDP {
			fmt.Fprintf(&b, "  %-12s %8.2f MB/s %8.2f k datagrams/s, %.2f%% lost\n", u.Mode, u.Gbits*1e9/8/(1<<20), u.Kpps, u.LossPct)
		}
		for _, p := range f.PingPong {
			fmt.Fprintf(&b, "  ping-pong %-5s typical %.2f µs, p99 %.2f µs (half round trips)\n", p.Mode, p.Typical, p.P99)
		}
		b.WriteString("\n")
	}
	// the floor's column, when there is a floor
	floorCol := func(text string) string {
		if t.Floor == nil {
			return ""
		}
		return fmt.Sprintf(" %10s", text)
	}
	fmt.Fprintf(&b, "%s %10s %16s%s %-8s %12s  %-6s %s\n", pad("measure", w), "rxe↔rxe", "softnic↔softnic",
		floorCol("UDP floor"), "unit", "softnic/rxe", "goal", "status")
	for _, r := range t.Rows {
		ratio := "-"
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f×", *r.Ratio)
		}
		line := fmt.Sprintf("%s %10s %16s%s %-8s %12s  %s %s", pad(r.Name, w), fig(r.RXE), fig(r.Softnic), floorCol(fig(r.Floor)), r.Unit, ratio, pad(r.Goal, 6), r.Status)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	b.WriteString("\nnotes:\n")
	for _, r := range t.Rows {
		if r.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", r.Name, r.Note)
		}
	}
	b.WriteString("  softnic/rxe: higher is better for bandwidth and message rate, lower for latency\n")
	if t.Floor != nil {
		b.WriteString("  UDP floor: plain UDP between the same guests (Go, cmd/udpbench), what a user-space stack on them starts from\n")
	}
	if t.Error != "" {
		fmt.Fprintf(&b, "\nstopped early: %s\n", t.Error)
	}
	floor := ""
	if t.Floor != nil {
		floor = fmt.Sprintf(", UDP floor %.0f s", t.Floor.Seconds)
	}
	fmt.Fprintf(&b, "\ntime: guests up %.0f s%s, rxe ↔ rxe %.0f s, softnic ↔ softnic %.0f s, total %.0f s\n",
		t.BedUpSeconds, floor, t.RXESeconds, t.SoftnicSeconds, t.TotalSeconds)
	return b.String()
}
