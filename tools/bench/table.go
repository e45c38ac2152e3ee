// Package bench is the logic of scripts/bench: it measures, in one run on
// one machine, the raw UDP limits (cmd/udpbench: RoCEv2-sized datagrams
// for the bandwidth, the 80-byte packet of a 64-byte SEND for the message
// rate), the floor for write_lat (udpbench's ping-pong, spinning and
// blocking) and softnic's own figures (two softnic processes on 127.0.0.1
// and 127.0.0.2 running the perftest look-alikes with --json), and prints
// them as one table with each figure's share of the machine's GSO→GRO
// limit, the CPU time each moved gigabyte cost, and the goals next to
// each figure, marked PASS or SHORT: issue 34's (closer to what UDP
// allows: shares of the limits, CPU against softnic's UDP link alone,
// many QPs against one, busy polling against its floor and against
// blocking) and issue 13's absolute ones (a run-to-completion datapath)
// where issue 34 sets none. write_lat 8 B runs twice: with blocking
// waits, and with --busy-poll on both sides.
//
// The CPU column is user and system time per 10^9 bytes moved: for
// udpbench's modes its process (sender and receiver) over the run; for
// softnic's the client's and the server's processes together from start
// to exit (their rusage) less the same of a setup run, the same pair with
// SetupIters iterations, over the bytes beyond the setup run's: the
// processes' start, device, QPs and connection, a cost that does not
// grow with the data, would otherwise weigh on a short run.
//
// The guest mode (scripts/bench --guests, guest.go and guesttable.go)
// runs the same perftest measurements between two 1-vCPU qemu guests of
// the interop bed, rxe ↔ rxe and then softnic ↔ softnic (softnic's
// write_lat a second time with --busy-poll, over rxe's one write_lat),
// and prints both with softnic's figure over rxe's against the issue's
// goals for the guests ([BuildGuests]).
//
// This file holds the table: what the measurements are ([Measurements]),
// how the rows, ratios and verdicts follow from them ([Build]), the
// latency histograms, and the text and JSON forms ([Table.Format],
// [Table.JSON]). run.go runs the tools and reads their output.
//
// # JSON output
//
// With --json, standard output carries one [Table], indented, and nothing
// else (progress goes to standard error), following package tooljson's
// conventions: lower_snake_case keys, units in the key names or the
// field's doc comment. "not_built" is always present, an empty array
// when everything the issue asks for is measured (the text form then
// prints no "not built:" section).
package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/softnic/softnic/tools/perftest"
)

// The goals of issue 13 (a run-to-completion datapath) that issue 34
// left: absolute figures.
const (
	GoalWriteGbit       = 20.0 // write_bw 64 KiB, Gbit/s
	GoalLatBlockingUsec = 25.0 // write_lat 8 B typical, blocking waits
	GoalLatBusyUsec     = 10.0 // write_lat 8 B typical, --busy-poll on both sides
	GoalP99OverTypical  = 3.0  // write_lat 8 B p99 over its typical (issue 34's too)
)

// The goals of issue 34 (closer to what UDP allows), each figure against
// another of the same run.
const (
	GoalBWOfGSO       = 0.75 // write_bw and read_bw 64 KiB over raw GSO→GRO (issue 13's: write_bw 0.40)
	GoalCPUOverLink   = 1.5  // write_bw's and read_bw's CPU s/GB over link/gso+gro's
	GoalSendMmsgs     = 2.0  // send_bw 64 B, million messages/s (issue 13's: 1)
	GoalSendOfGSO     = 0.50 // send_bw 64 B over the 80-byte datagrams' raw GSO→GRO rate
	GoalBusyOverFloor = 1.5  // write_lat 8 B typical with --busy-poll over the busy ping-pong's
	GoalBusyOverBlock = 1.0  // write_lat 8 B typical with --busy-poll over the blocking one's
	GoalManyQPOfOne   = 0.85 // write_bw 64 KiB over ManyQPs QPs over one QP's
)

// The goals of issue 31 (softnic as libibverbs): Debian's perftest over
// the library against softnic's look-alikes in the same run.
const (
	GoalCOfGo    = 0.90 // ib_write_bw and ib_send_bw over write_bw and send_bw
	GoalCLatOfGo = 1.2  // ib_write_lat's typical over write_lat's (blocking waits)
)

// Verdicts of a row.
const (
	Pass     = "PASS"
	Short    = "SHORT"
	NotBuilt = "n/a (not built)"
	Failed   = "FAILED"
)

// UDP is one line of cmd/udpbench's table.
type UDP struct {
	// Mode is udpbench's mode: "raw/plain", "raw/gso+gro", "link/gso+gro".
	Mode string `json:"mode"`
	// Gbits is the UDP payload delivered, in Gbit/s (10^9 bits per second).
	Gbits float64 `json:"gbit_per_sec"`
	// Kpps is the datagrams delivered, in thousands per second: with
	// SmallDatagram-byte datagrams, the message-rate limit.
	Kpps float64 `json:"kpkt_per_sec"`
	// LossPct is the share of the datagrams sent that the receiver did not
	// take, in percent.
	LossPct float64 `json:"loss_percent"`
	// CPUPerGB is the CPU seconds (user and system) udpbench's process,
	// sender and receiver, spent per 10^9 bytes of UDP payload delivered;
	// null when udpbench did not say (between two hosts, or an
	// udpbench before the column).
	CPUPerGB *float64 `json:"cpu_sec_per_gb"`
}

// PingPong is one line of cmd/udpbench's ping-pong table (-pingpong):
// the floor for write_lat, a small datagram back and forth.
type PingPong struct {
	// Mode is "busy" (spinning on a non-blocking recvfrom) or "block"
	// (Go's net.UDPConn, its network poller).
	Mode string `json:"mode"`
	// Typical and P99 are the median and 99th percentile of the half
	// round trips, µs.
	Typical float64 `json:"t_typical_usec"`
	P99     float64 `json:"p99_usec"`
}

// BW is a softnic bandwidth or message-rate run: the client's result and
// the CPU time of both processes, and the same of its setup run.
type BW struct {
	perftest.BWResult
	// CPU is the user and system time of the client and the server
	// together, each from its start to its exit (its rusage).
	CPU time.Duration
	// Setup is the same pair's run of SetupIters iterations a QP: the
	// CPU of everything but moving the data. nil when there was none
	// (or it failed).
	Setup *BW
}

// Bytes returns the bytes of messages the run moved: Size × Iters.
func (b *BW) Bytes() float64 { return float64(b.Size) * float64(b.Iters) }

// moved returns the CPU time and the bytes and messages of the run
// beyond its setup run's; ok is false without a setup run, or when the
// run has not more of both.
func (b *BW) moved() (cpu time.Duration, bytes, msgs float64, ok bool) {
	if b.Setup == nil {
		return 0, 0, 0, false
	}
	cpu, bytes, msgs = b.CPU-b.Setup.CPU, b.Bytes()-b.Setup.Bytes(), float64(b.Iters)-float64(b.Setup.Iters)
	return cpu, bytes, msgs, cpu > 0 && bytes > 0 && msgs > 0
}

// CPUPerGB returns the CPU seconds per 10^9 bytes moved, beyond the
// setup run's time and bytes; nil without a setup run or more than it.
func (b *BW) CPUPerGB() *float64 {
	cpu, bytes, _, ok := b.moved()
	if !ok {
		return nil
	}
	return ptr(cpu.Seconds() / (bytes / 1e9))
}

// Measurements are what one run measured. A nil result, or an error in
// Errors under its row's name, means that figure was not measured.
type Measurements struct {
	Machine Machine
	// DatagramSize is the UDP payload of udpbench's datagrams, bytes.
	DatagramSize int
	UDP          []UDP
	// SmallDatagramSize is the UDP payload of udpbench's datagrams in
	// UDPSmall, its run for the message-rate limit (SmallDatagram).
	SmallDatagramSize int
	UDPSmall          []UDP
	PingPong          []PingPong
	// The clients' results (bandwidth and message rate; latency).
	WriteBW, ReadBW, SendBW *BW
	WriteLat                *perftest.LatResult
	// WriteLatBusy is write_lat 8 B again with --busy-poll on both sides.
	WriteLatBusy *perftest.LatResult
	// ManyQP is write_bw 64 KiB over ManyQPs QPs (perftest's -q).
	ManyQP  *BW
	ManyQPs int
	// CLib says Debian's perftest ran over softnic's libibverbs
	// (Config.CLib): ib_write_bw 64 KiB, ib_send_bw 64 B and
	// ib_write_lat 8 B, the clients' results.
	CLib              bool
	CWriteBW, CSendBW *perftest.BWResult
	CWriteLat         *perftest.LatResult
	// Errors says why a measurement failed, by row name; a failed
	// setup run's under its row's name and SetupRun.
	Errors map[string]string
	// Quick marks a short smoke run (--quick): fewer iterations.
	Quick bool
	// GOMAXPROCS is each softnic process's GOMAXPROCS (Config.GOMAXPROCS;
	// 0: Go's default).
	GOMAXPROCS int
}

// Machine describes where the run happened.
type Machine struct {
	// CPUs is the number of CPUs Linux lets this process use (nproc).
	CPUs int `json:"nproc"`
	// CPUModel is /proc/cpuinfo's "model name".
	CPUModel string `json:"cpu_model"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel"`
	// LoadBefore and LoadAfter are the 1-, 5- and 15-minute load averages
	// (/proc/loadavg) when the run started and when it ended.
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// Row is one line of the table.
type Row struct {
	// Name says what was measured: "write_bw 64 KiB".
	Name string `json:"name"`
	// Value is the figure, in Unit; null when it was not measured.
	Value *float64 `json:"value"`
	// Unit is Value's unit: "Gbit/s", "M msg/s", "M pkt/s", "usec", "x".
	Unit string `json:"unit"`
	// OfGSOGRO is the figure over raw GSO→GRO's: a bandwidth over its
	// Gbit/s, a message or datagram rate (send_bw, the 80-byte modes)
	// over the 80-byte datagrams' raw GSO→GRO rate; null for the others
	// and for raw GSO→GRO itself.
	OfGSOGRO *float64 `json:"of_gso_gro"`
	// CPUPerGB is the CPU seconds, user and system, per 10^9 bytes
	// moved (UDP payload for udpbench's modes, messages for softnic's):
	// udpbench's process over its run, or softnic's two processes from
	// start to exit less their setup run's (BW.CPUPerGB); null for rows
	// that move no data, or without a setup run.
	CPUPerGB *float64 `json:"cpu_sec_per_gb"`
	// Goal is the figure's goal, issue 34's or issue 13's, as text
	// ("≥ 20 Gbit/s", "≥ 0.75"); empty when it has none.
	Goal string `json:"goal"`
	// Status is PASS or SHORT against Goal, "n/a (not built)" for a mode
	// that does not exist yet, FAILED when the measurement failed, empty
	// when there is no goal.
	Status string `json:"status"`
	// Note adds what the figure needs said: how it was measured, or why
	// it is missing.
	Note string `json:"note,omitempty"`
}

// Bucket is one bar of the latency histogram: the samples in [From, To).
type Bucket struct {
	From  float64 `json:"from_usec"`
	To    float64 `json:"to_usec"`
	Count int     `json:"count"`
}

// Table is the whole result, and the document --json prints.
type Table struct {
	Machine Machine `json:"machine"`
	// Quick marks a --quick run.
	Quick bool `json:"quick"`
	// DatagramSize is the UDP payload of udpbench's datagrams, bytes.
	DatagramSize int `json:"udp_datagram_bytes"`
	// SmallDatagramSize is the UDP payload of udpbench's datagrams for
	// the message-rate limit (a 64-byte SEND's packet), bytes.
	SmallDatagramSize int `json:"udp_small_datagram_bytes"`
	// GOMAXPROCS is each softnic process's GOMAXPROCS, 0 when it was
	// Go's default (every CPU). udpbench always runs with Go's default.
	GOMAXPROCS int `json:"softnic_gomaxprocs"`
	// UDP is udpbench's table; UDPSmall its table of the small
	// datagrams.
	UDP      []UDP `json:"udp"`
	UDPSmall []UDP `json:"udp_small"`
	// PingPong is udpbench's ping-pong table: write_lat's floor.
	PingPong []PingPong `json:"udp_ping_pong"`
	Rows     []Row      `json:"rows"`
	// Histogram is write_lat 8 B's latencies with blocking waits
	// (perftest's -H samples, half round trips), in buckets growing by
	// powers of two; empty when not measured.
	Histogram []Bucket `json:"write_lat_histogram"`
	// Samples is the number of latencies in Histogram.
	Samples int `json:"write_lat_samples"`
	// BusyHistogram and BusySamples are the same for the write_lat 8 B run
	// with --busy-poll on both sides.
	BusyHistogram []Bucket `json:"write_lat_busy_poll_histogram"`
	BusySamples   int      `json:"write_lat_busy_poll_samples"`
	// NotBuilt lists what the issue asks for that this run cannot measure
	// yet: an empty array, not null, when there is nothing.
	NotBuilt []string `json:"not_built"`
}

// MBpsToGbits converts perftest's MB/sec (2^20 bytes per second) to
// Gbit/s (10^9 bits per second).
func MBpsToGbits(mb float64) float64 { return mb * (1 << 20) * 8 / 1e9 }

// Row names. The 80-byte rows are SmallDatagram's.
const (
	RowUDPPlain     = "UDP raw/plain"
	RowUDPGSOGRO    = "UDP raw/gso+gro"
	RowUDPLink      = "UDP link/gso+gro"
	RowWriteBW      = "write_bw 64 KiB"
	RowWriteRatio   = "write_bw / raw gso+gro"
	RowWriteCPU     = "write_bw CPU / link's"
	RowReadBW       = "read_bw 64 KiB"
	RowReadRatio    = "read_bw / raw gso+gro"
	RowReadCPU      = "read_bw CPU / link's"
	RowSmallPlain   = "UDP raw/plain 80 B"
	RowSmallGSOGRO  = "UDP raw/gso+gro 80 B"
	RowSmallLink    = "UDP link/gso+gro 80 B"
	RowSendBW       = "send_bw 64 B"
	RowSendRatio    = "send_bw / raw gso+gro 80 B"
	RowPingBlock    = "UDP ping-pong typical"
	RowPingBusy     = "UDP ping-pong typical, busy"
	RowLatTyp       = "write_lat 8 B typical"
	RowLatP99       = "write_lat 8 B p99"
	RowLatBusy      = "write_lat 8 B typical, busy-poll"
	RowLatBusyFloor = "write_lat busy-poll / busy ping-pong"
	RowLatBusyBlock = "write_lat busy-poll / blocking"
	RowLatBusyP99   = "write_lat 8 B p99, busy-poll"
	RowManyQP       = "write_bw 64 KiB, %d QPs"
	RowManyQPRatio  = "write_bw %d QPs / 1 QP"
	RowCWriteBW     = "ib_write_bw 64 KiB, libibverbs"
	RowCSendBW      = "ib_send_bw 64 B, libibverbs"
	RowCWriteLat    = "ib_write_lat 8 B typical, libibverbs"
)

// NotBuiltYet is what issue 13 asks for that does not exist yet: nothing
// since the run-to-completion datapath and --busy-poll landed.
var NotBuiltYet = []string{}

// Build computes the table's rows, ratios and verdicts from m.
func Build(m Measurements) Table {
	t := Table{Machine: m.Machine, Quick: m.Quick, DatagramSize: m.DatagramSize, SmallDatagramSize: m.SmallDatagramSize,
		GOMAXPROCS: m.GOMAXPROCS, UDP: m.UDP, UDPSmall: m.UDPSmall, PingPong: m.PingPong,
		NotBuilt: append([]string{}, NotBuiltYet...)}
	over := func(v, of *float64) *float64 {
		if v == nil || of == nil || *of == 0 {
			return nil
		}
		return ptr(*v / *of)
	}
	// ratioRow is a row of a figure over another, with its goal: at
	// least goal (atLeast) or at most; what says what it needs when a
	// figure is missing.
	ratioRow := func(name string, v, of *float64, atLeast bool, goal float64, what string) Row {
		r := Row{Name: name, Unit: "x", Value: over(v, of)}
		cmp := "≤"
		if atLeast {
			cmp = "≥"
		}
		r.Goal = fmt.Sprintf("%s %.2f", cmp, goal)
		switch {
		case r.Value == nil:
			r.Status, r.Note = Failed, "needs "+what
		case atLeast:
			r.Status = verdict(*r.Value >= goal)
		default:
			r.Status = verdict(*r.Value <= goal)
		}
		return r
	}

	// The UDP limits: RoCEv2-sized datagrams in Gbit/s, then the small
	// ones in datagrams a second, each over its raw GSO→GRO.
	udpRows := func(us []UDP, names [3]string, rate bool, size int) (gso, link *UDP) {
		find := func(mode string) *UDP {
			for i := range us {
				if us[i].Mode == mode {
					return &us[i]
				}
			}
			return nil
		}
		gso, link = find("raw/gso+gro"), find("link/gso+gro")
		value := func(u *UDP) *float64 {
			if u == nil {
				return nil
			}
			if rate {
				return ptr(u.Kpps / 1e3)
			}
			return ptr(u.Gbits)
		}
		for i, mode := range []string{"raw/plain", "raw/gso+gro", "link/gso+gro"} {
			note := [3]string{"sendmmsg → recvmmsg", "UDP GSO → UDP GRO, the limit", "softnic's UDP link, no engine"}[i]
			r := Row{Name: names[i], Unit: "Gbit/s"}
			if rate {
				r.Unit = "M pkt/s"
				note = fmt.Sprintf("%s, %d-byte datagrams (a 64-byte SEND's packet)", note, size)
			}
			u := find(mode)
			if u == nil {
				r.Status, r.Note = failed(m, names[i], "udpbench has no "+mode+" line")
				t.Rows = append(t.Rows, r)
				continue
			}
			r.Value, r.CPUPerGB = value(u), u.CPUPerGB
			if u != gso {
				r.OfGSOGRO = over(r.Value, value(gso))
			}
			if rate {
				r.Note = fmt.Sprintf("%s; %.2f Gbit/s, %.2f%% lost", note, u.Gbits, u.LossPct)
				if u.CPUPerGB != nil {
					r.Note += fmt.Sprintf(", CPU %.3f µs a datagram", *u.CPUPerGB*float64(size)/1e3)
				}
			} else {
				r.Note = fmt.Sprintf("%s; %.0f kpkt/s, %.2f%% lost", note, u.Kpps, u.LossPct)
			}
			t.Rows = append(t.Rows, r)
		}
		return gso, link
	}
	gsoUDP, linkUDP := udpRows(m.UDP, [3]string{RowUDPPlain, RowUDPGSOGRO, RowUDPLink}, false, m.DatagramSize)
	var gso, linkCPU *float64
	if gsoUDP != nil {
		gso = ptr(gsoUDP.Gbits)
	}
	if linkUDP != nil {
		linkCPU = linkUDP.CPUPerGB
	}

	// cpuNote says why a softnic run has no CPU figure, if its setup
	// run failed.
	cpuNote := func(name string, r *BW) string {
		if e, ok := m.Errors[name+SetupRun]; ok && r.Setup == nil {
			return "; no CPU figure, the setup run failed: " + e
		}
		return ""
	}
	bwRow := func(name string, r *BW, note string) Row {
		row := Row{Name: name, Unit: "Gbit/s", Note: note}
		if r == nil {
			row.Status, row.Note = failed(m, name, "")
			return row
		}
		row.Value = ptr(MBpsToGbits(r.BWAvg))
		row.OfGSOGRO = over(row.Value, gso)
		row.CPUPerGB = r.CPUPerGB()
		row.Note += cpuNote(name, r)
		return row
	}
	w := bwRow(RowWriteBW, m.WriteBW, "bw_average")
	if w.Value != nil {
		w.Goal, w.Status = "≥ 20 Gbit/s", verdict(*w.Value >= GoalWriteGbit)
	}
	t.Rows = append(t.Rows, w,
		ratioRow(RowWriteRatio, w.Value, gso, true, GoalBWOfGSO, "write_bw and raw gso+gro"),
		ratioRow(RowWriteCPU, w.CPUPerGB, linkCPU, false, GoalCPUOverLink, "write_bw's CPU and link/gso+gro's"))
	rd := bwRow(RowReadBW, m.ReadBW, "bw_average")
	t.Rows = append(t.Rows, rd,
		ratioRow(RowReadRatio, rd.Value, gso, true, GoalBWOfGSO, "read_bw and raw gso+gro"),
		ratioRow(RowReadCPU, rd.CPUPerGB, linkCPU, false, GoalCPUOverLink, "read_bw's CPU and link/gso+gro's"))

	smallGSO, _ := udpRows(m.UDPSmall, [3]string{RowSmallPlain, RowSmallGSOGRO, RowSmallLink}, true, m.SmallDatagramSize)
	var smallRate *float64
	if smallGSO != nil {
		smallRate = ptr(smallGSO.Kpps / 1e3)
	}
	s := Row{Name: RowSendBW, Unit: "M msg/s", Goal: fmt.Sprintf("≥ %g M msg/s", GoalSendMmsgs), Note: "msg_rate_mpps"}
	if r := m.SendBW; r != nil {
		s.Value = ptr(r.MsgRate)
		s.Status = verdict(*s.Value >= GoalSendMmsgs)
		s.OfGSOGRO = over(s.Value, smallRate)
		s.CPUPerGB = r.CPUPerGB()
		if cpu, _, msgs, ok := r.moved(); ok {
			s.Note += fmt.Sprintf("; CPU %.3f µs a message (both processes)", cpu.Seconds()*1e6/msgs)
		}
		s.Note += cpuNote(RowSendBW, r)
	} else {
		s.Status, s.Note = failed(m, RowSendBW, "")
	}
	t.Rows = append(t.Rows, s, ratioRow(RowSendRatio, s.Value, smallRate, true, GoalSendOfGSO, "send_bw and raw gso+gro 80 B"))

	// The ping-pong floors, and each write_lat figure over its floor.
	pingRow := func(name, mode, note string) *PingPong {
		r := Row{Name: name, Unit: "usec"}
		var pp *PingPong
		for i := range m.PingPong {
			if m.PingPong[i].Mode == mode {
				pp = &m.PingPong[i]
			}
		}
		if pp == nil {
			r.Status, r.Note = failed(m, name, "udpbench has no ping-pong "+mode+" line")
		} else {
			r.Value = ptr(pp.Typical)
			r.Note = fmt.Sprintf("%s, write_lat's floor; p99 %.2f µs", note, pp.P99)
		}
		t.Rows = append(t.Rows, r)
		return pp
	}
	floorBlock := pingRow(RowPingBlock, "block", "a 40-byte UDP datagram back and forth through Go's network poller")
	floorBusy := pingRow(RowPingBusy, "busy", "the same, spinning on a non-blocking recvfrom")
	overFloor := func(v float64, floor *PingPong, p99 bool) string {
		if floor == nil {
			return ""
		}
		f := floor.Typical
		if p99 {
			f = floor.P99
		}
		if f <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.1f × the ping-pong's)", v/f)
	}
	latRows := func(typName, p99Name, mode string, goal float64, l *perftest.LatResult, floor *PingPong) (Row, Row) {
		typ := Row{Name: typName, Unit: "usec", Goal: fmt.Sprintf("≤ %g µs", goal), Note: mode + "; t_typical_usec"}
		p99 := Row{Name: p99Name, Unit: "usec", Note: mode + "; p99_usec"}
		if l == nil {
			typ.Status, typ.Note = failed(m, typName, "")
			p99.Status, p99.Note = typ.Status, typ.Note
			return typ, p99
		}
		typ.Value = ptr(l.Typical)
		typ.Status = verdict(l.Typical <= goal)
		typ.Note += overFloor(l.Typical, floor, false)
		p99.Value = ptr(l.P99)
		p99.Note += overFloor(l.P99, floor, true)
		p99.Goal = fmt.Sprintf("≤ 3 × typical (%.1f µs)", GoalP99OverTypical*l.Typical)
		p99.Status = verdict(l.P99 <= GoalP99OverTypical*l.Typical)
		return typ, p99
	}
	typ, p99 := latRows(RowLatTyp, RowLatP99, "blocking waits (no --busy-poll)", GoalLatBlockingUsec, m.WriteLat, floorBlock)
	if l := m.WriteLat; l != nil {
		t.Histogram, t.Samples = Histogram(l.Samples), len(l.Samples)
	}
	busy, busyP99 := latRows(RowLatBusy, RowLatBusyP99, "busy-poll (--busy-poll on both sides)", GoalLatBusyUsec, m.WriteLatBusy, floorBusy)
	if l := m.WriteLatBusy; l != nil {
		t.BusyHistogram, t.BusySamples = Histogram(l.Samples), len(l.Samples)
	}
	var floorBusyTyp *float64
	if floorBusy != nil {
		floorBusyTyp = ptr(floorBusy.Typical)
	}
	t.Rows = append(t.Rows, typ, p99, busy,
		ratioRow(RowLatBusyFloor, busy.Value, floorBusyTyp, false, GoalBusyOverFloor, "the busy-poll write_lat and the busy ping-pong"),
		ratioRow(RowLatBusyBlock, busy.Value, typ.Value, false, GoalBusyOverBlock, "both write_lat runs"),
		busyP99)

	if m.ManyQPs > 0 {
		many := bwRow(fmt.Sprintf(RowManyQP, m.ManyQPs), m.ManyQP, "bw_average, perftest's -q")
		t.Rows = append(t.Rows, many,
			ratioRow(fmt.Sprintf(RowManyQPRatio, m.ManyQPs), many.Value, w.Value, true, GoalManyQPOfOne, "both write_bw runs"))
	}
	if m.CLib {
		t.Rows = append(t.Rows, cRows(m, bwRow)...)
	}
	return t
}

// cRows are the rows of Debian's perftest over softnic's libibverbs, each
// against its look-alike's figure of the same run (issue 31's goals).
func cRows(m Measurements, bwRow func(string, *BW, string) Row) []Row {
	const how = "Debian's perftest over softnic's libibverbs (softnic exec)"
	against := func(r *Row, v, goVal *float64, goName string, higher bool) {
		if v == nil {
			return
		}
		if goVal == nil || *goVal == 0 {
			r.Note += "; no " + goName + " to compare with"
			return
		}
		x := *v / *goVal
		if higher {
			r.Goal = fmt.Sprintf("≥ %.0f%% of %s", 100*GoalCOfGo, goName)
			r.Status = verdict(x >= GoalCOfGo)
		} else {
			r.Goal = fmt.Sprintf("≤ %g × %s", GoalCLatOfGo, goName)
			r.Status = verdict(x <= GoalCLatOfGo)
		}
		r.Note += fmt.Sprintf("; %.2f × %s", x, goName)
	}
	var cw *BW // no CPU figure: the library's processes are not timed
	if m.CWriteBW != nil {
		cw = &BW{BWResult: *m.CWriteBW}
	}
	w := bwRow(RowCWriteBW, cw, how+"; bw_average")
	var goW *float64
	if m.WriteBW != nil {
		goW = ptr(MBpsToGbits(m.WriteBW.BWAvg))
	}
	against(&w, w.Value, goW, "write_bw", true)

	s := Row{Name: RowCSendBW, Unit: "M msg/s", Note: how + "; msg_rate_mpps"}
	if m.CSendBW != nil {
		s.Value = ptr(m.CSendBW.MsgRate)
	} else {
		s.Status, s.Note = failed(m, RowCSendBW, "")
	}
	var goS *float64
	if m.SendBW != nil {
		goS = ptr(m.SendBW.MsgRate)
	}
	against(&s, s.Value, goS, "send_bw", true)

	l := Row{Name: RowCWriteLat, Unit: "usec", Note: how + "; t_typical_usec"}
	if m.CWriteLat != nil {
		l.Value = ptr(m.CWriteLat.Typical)
	} else {
		l.Status, l.Note = failed(m, RowCWriteLat, "")
	}
	var goL *float64
	if m.WriteLat != nil {
		goL = ptr(m.WriteLat.Typical)
	}
	against(&l, l.Value, goL, "write_lat", false)
	return []Row{w, s, l}
}

// failed returns the status and note of a row whose figure is missing:
// FAILED, with the error recorded for it or else why.
func failed(m Measurements, name, why string) (string, string) {
	if e, ok := m.Errors[name]; ok {
		return Failed, e
	}
	if why == "" {
		why = "not measured"
	}
	return Failed, why
}

func verdict(ok bool) string {
	if ok {
		return Pass
	}
	return Short
}

func ptr(v float64) *float64 { return &v }

// Histogram sorts samples (microseconds) into buckets [2^k, 2^(k+1)) µs,
// from the bucket of the smallest to that of the largest, empty ones
// included; samples under 1 µs fall in [0, 1).
func Histogram(samples []float64) []Bucket {
	if len(samples) == 0 {
		return nil
	}
	idx := func(v float64) int {
		if v < 1 {
			return -1
		}
		return int(math.Floor(math.Log2(v)))
	}
	lo, hi := idx(samples[0]), idx(samples[0])
	for _, v := range samples {
		lo, hi = min(lo, idx(v)), max(hi, idx(v))
	}
	bs := make([]Bucket, hi-lo+1)
	for i := range bs {
		k := lo + i
		if k < 0 {
			bs[i] = Bucket{From: 0, To: 1}
		} else {
			bs[i] = Bucket{From: math.Ldexp(1, k), To: math.Ldexp(1, k+1)}
		}
	}
	for _, v := range samples {
		bs[idx(v)-lo].Count++
	}
	return bs
}

// JSON returns t as the indented JSON document --json prints.
func (t Table) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Format returns t as text: the machine, the table with its ratio, CPU,
// goal and status columns, the histograms and what is not built (no such
// section when nothing is).
func (t Table) Format() string {
	var b strings.Builder
	mc := t.Machine
	fmt.Fprintf(&b, "softnic bench%s: %d CPUs (%s), Linux %s\n", map[bool]string{true: " --quick", false: ""}[t.Quick], mc.CPUs, mc.CPUModel, mc.Kernel)
	fmt.Fprintf(&b, "load average %s before, %s after\n", loadText(mc.LoadBefore), loadText(mc.LoadAfter))
	procs := "Go's default GOMAXPROCS"
	if t.GOMAXPROCS > 0 {
		procs = fmt.Sprintf("GOMAXPROCS %d each", t.GOMAXPROCS)
	}
	fmt.Fprintf(&b, "UDP: %d-byte datagrams (%d-byte for the message rate), 127.0.0.1 → 127.0.0.2; softnic: two processes, 127.0.0.2 → 127.0.0.1, %s\n",
		t.DatagramSize, t.SmallDatagramSize, procs)
	fmt.Fprintf(&b, "CPU s/GB: user + system seconds per 10^9 bytes moved, udpbench's process over its run, softnic's two from start to exit less a %d-iteration run's\n\n", SetupIters)
	w := 0
	for _, r := range t.Rows {
		w = max(w, len([]rune(r.Name)))
	}
	fmt.Fprintf(&b, "%-*s %12s %-8s %9s %9s  %-26s %s\n", w, "measure", "value", "unit", "/gso+gro", "CPU s/GB", "goal", "status")
	for _, r := range t.Rows {
		val, ratio, cpu := "-", "", ""
		if r.Value != nil {
			val = fmt.Sprintf("%.2f", *r.Value)
		} else if r.Status == NotBuilt {
			val = "n/a"
		}
		if r.OfGSOGRO != nil {
			ratio = fmt.Sprintf("%.1f%%", 100**r.OfGSOGRO)
		}
		if r.CPUPerGB != nil {
			cpu = fmt.Sprintf("%.3f", *r.CPUPerGB)
		}
		line := fmt.Sprintf("%s %12s %-8s %9s %9s  %s %s", pad(r.Name, w), val, r.Unit, ratio, cpu, pad(r.Goal, 26), r.Status)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	notes := false
	for _, r := range t.Rows {
		if r.Note != "" {
			if !notes {
				b.WriteString("\nnotes:\n")
				notes = true
			}
			fmt.Fprintf(&b, "  %s: %s\n", r.Name, r.Note)
		}
	}
	histogram(&b, "write_lat 8 B latency histogram, blocking waits", t.Samples, t.Histogram)
	histogram(&b, "write_lat 8 B latency histogram, --busy-poll on both sides", t.BusySamples, t.BusyHistogram)
	if len(t.NotBuilt) > 0 {
		b.WriteString("\nnot built:\n")
		for _, n := range t.NotBuilt {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	return b.String()
}

// histogram writes a latency histogram under its title, nothing when it
// has no buckets.
func histogram(b *strings.Builder, title string, samples int, hs []Bucket) {
	if len(hs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s (%d samples, half round trips, µs):\n", title, samples)
	most := 0
	for _, h := range hs {
		most = max(most, h.Count)
	}
	for _, h := range hs {
		bar := 0
		if most > 0 {
			bar = (h.Count*50 + most - 1) / most
		}
		fmt.Fprintf(b, "  [%6g, %6g) %7d %s\n", h.From, h.To, h.Count, strings.Repeat("#", bar))
	}
}

func loadText(l [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2]) }

// pad pads s with spaces to w runes (fmt pads by bytes, and "≥" is three).
func pad(s string, w int) string {
	if n := len([]rune(s)); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}
