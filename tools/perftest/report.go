package perftest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/softnic/softnic/tools/pingpong"
)

// The lines perftest prints (perftest_parameters.h, perftest_communication.h).
const (
	resultLine     = "---------------------------------------------------------------------------------------\n"
	resultFmt      = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG     = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLat   = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	resultFmtLatDu = " #bytes        #iterations       t_avg[usec]    tps average"
	waitingBanner  = "\n************************************\n* Waiting for client to connect... *\n************************************\n"
)

// Header returns the result table's header: the line and the column
// titles, as each test prints them before it runs.
func Header(c *Config) string {
	if c.Test == BW {
		if c.ReportGbit {
			return resultLine + resultFmtG + "\n"
		}
		return resultLine + resultFmt + "\n"
	}
	if c.Duration > 0 {
		return resultLine + resultFmtLatDu + "\n"
	}
	return resultLine + resultFmtLat + "\n"
}

// TestInfo is what ctx_print_test_info prints about a run.
type TestInfo struct {
	Device   string
	MTU      int // bytes
	GIDIndex int
	OutReads int
	Inline   int
}

// FormatTestInfo returns ctx_print_test_info's block for c.
func FormatTestInfo(c *Config, ti TestInfo) string {
	var b strings.Builder
	b.WriteString(resultLine)
	b.WriteString("                    ")
	b.WriteString(c.Verb.String() + " ")
	if c.Verb == Atomic {
		b.WriteString(c.Atomic.String() + " ")
	}
	if c.Test == BW {
		b.WriteString("BW ")
	} else {
		b.WriteString("Latency ")
	}
	b.WriteString("Test\n")
	if c.Events {
		fmt.Fprintf(&b, " Test with events. Using %s_comp%d\n", ti.Device, 0)
	}
	fmt.Fprintf(&b, " Dual-port       : %s\t\tDevice         : %s\n", "OFF", ti.Device)
	fmt.Fprintf(&b, " Number of qps   : %d\t\tTransport type : %s\n", c.NumQP, "IB")
	fmt.Fprintf(&b, " Connection type : %s\t\tUsing SRQ      : %s\n", c.Conn, "OFF")
	pcir := "ON"
	if c.Verb == Write && c.Test == Lat {
		pcir = "OFF" // write_lat polls memory: it disables relaxed ordering
	}
	fmt.Fprintf(&b, " PCIe relax order: %s\n", pcir)
	b.WriteString(" ibv_wr* API     : OFF\n")
	if !c.Server() {
		fmt.Fprintf(&b, " TX depth        : %d\n", c.TxDepth)
	}
	if c.Verb == Send && c.Server() {
		fmt.Fprintf(&b, " RX depth        : %d\n", c.RxDepth)
	}
	if c.Test == BW {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", c.CQMod)
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", ti.MTU)
	b.WriteString(" Link type       : Ethernet\n")
	if ti.GIDIndex != -1 {
		fmt.Fprintf(&b, " GID index       : %d\n", ti.GIDIndex)
	}
	if c.Verb != Read && c.Verb != Atomic {
		fmt.Fprintf(&b, " Max inline data : %d[B]\n", ti.Inline)
	} else {
		fmt.Fprintf(&b, " Outstand reads  : %d\n", ti.OutReads)
	}
	b.WriteString(" rdma_cm QPs\t : " + map[bool]string{false: "OFF", true: "ON"}[c.RDMACM] + "\n")
	b.WriteString(" Data ex. method : " + map[bool]string{false: "Ethernet", true: "rdma_cm"}[c.CommRDMACM])
	if c.RDMACM && c.Server() {
		b.WriteString("\n" + resultLine + " Waiting for client rdma_cm QP to connect\n" +
			" Please run the same command with the IB/RoCE interface IP")
	}
	b.WriteString("\n" + resultLine)
	return b.String()
}

// altHex formats v as C's printf("%#0<width>x") does: zero-padded to
// width including the "0x", which a zero value does not get.
func altHex(v uint64, width int) string {
	if v == 0 {
		return strings.Repeat("0", width)
	}
	h := strconv.FormatUint(v, 16)
	if len(h) < width-2 {
		h = strings.Repeat("0", width-2-len(h)) + h
	}
	return "0x" + h
}

// FormatDest returns ctx_print_pingpong_data's lines for one QP: the
// address (with OUT for READ, RKey and VAddr for READ and WRITE) and the
// GID, its bytes in decimal (PERF_GID_FMT).
func FormatDest(local bool, d Dest, v Verb) string {
	side := "local"
	if !local {
		side = "remote"
	}
	var b strings.Builder
	fmt.Fprintf(&b, " %s address: LID %s QPN %s PSN %s", side, altHex(uint64(d.LID), 4), altHex(uint64(d.QPN), 6), altHex(uint64(d.PSN), 6))
	if v == Read {
		fmt.Fprintf(&b, " OUT %s", altHex(uint64(d.OutReads), 4))
	}
	if v == Read || v == Write {
		fmt.Fprintf(&b, " RKey %s VAddr %s", altHex(uint64(d.RKey), 8), altHex(d.VAddr, 16))
	}
	b.WriteString("\n GID: ")
	for i, x := range d.GID {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02d", x)
	}
	b.WriteByte('\n')
	return b.String()
}

// BWResult is one line of a bandwidth table, and of Result's "bw".
type BWResult struct {
	// Size is the message size in bytes (#bytes).
	Size uint64 `json:"size"`
	// Iters is the number of messages over all QPs (#iterations).
	Iters uint64 `json:"iterations"`
	// BWPeak is the peak bandwidth: MB/sec (2^20 bytes per second, as
	// perftest counts a MB), or Gb/sec with Gbits. In Result always
	// MB/sec. 0 with -N, in duration runs and on a send_bw server.
	BWPeak float64 `json:"bw_peak"`
	// BWAvg is the average bandwidth from the first post to the last
	// completion, in the unit of BWPeak.
	BWAvg float64 `json:"bw_average"`
	// MsgRate is the message rate in millions of messages per second.
	MsgRate float64 `json:"msg_rate_mpps"`
	// Gbits says the bandwidths are in Gb/sec (10^9 bits per second;
	// --report_gbits). Not in JSON: Result converts to MB/sec.
	Gbits bool `json:"-"`
}

// BWUnit names the bandwidth unit of a result.
func (r BWResult) BWUnit() string {
	if r.Gbits {
		return "Gb/sec"
	}
	return "MB/sec"
}

// Report returns the result as the peer exchanges it.
func (r BWResult) Report() Report {
	return Report{Size: r.Size, Iters: r.Iters, BWPeak: r.BWPeak, BWAvg: r.BWAvg, MsgRate: r.MsgRate}
}

// BWTimes are a bandwidth run's timestamps in nanoseconds: when each WR
// was posted and when each completed (tposted, tcompleted), or, with
// NoPeak, only the first post and the last completion.
type BWTimes struct {
	Posted, Completed []int64
}

// ComputeBW is print_report_bw's arithmetic: the peak bandwidth from the
// best run of consecutive moderated completions, the average from the
// first post to the last completion. iters is the total over the QPs.
func ComputeBW(c *Config, t BWTimes, size uint64, iters uint64) BWResult {
	const cyclesPerSec = 1e9 // nanoseconds: "cycles_to_units"
	var formatFactor uint64 = 0x100000
	if c.ReportGbit {
		formatFactor = 125000000
	}
	res := BWResult{Size: size, Iters: iters, Gbits: c.ReportGbit}
	if iters == 0 || len(t.Completed) == 0 {
		return res
	}
	loc := 0
	if !c.NoPeak {
		loc = int(iters) - 1
	}
	// cycles_t is unsigned: an unset (zero) completion time makes a huge
	// difference, which the minimum then ignores.
	optDelta := uint64(t.Completed[0] - t.Posted[0])
	if t.Completed[0] == 0 {
		optDelta = math.MaxUint64
	}
	if !c.NoPeak {
		n := int(iters)
		cq := c.CQMod
		for i := 0; i < n; i++ {
			for j := roundUp(i+1, cq) - 1; j < n; j += cq {
				if d := uint64(t.Completed[j]-t.Posted[i]) / uint64(j-i+1); d < optDelta {
					optDelta = d
				}
			}
			if n%cq != 0 {
				j := n - 1
				if d := uint64(t.Completed[j]-t.Posted[i]) / uint64(j-i+1); d < optDelta {
					optDelta = d
				}
			}
		}
	}
	sum := float64(t.Completed[loc] - t.Posted[0])
	res.BWAvg = float64(size) * float64(iters) * cyclesPerSec / (sum * float64(formatFactor))
	res.MsgRate = float64(iters) * cyclesPerSec / (sum * 1000000)
	if !c.NoPeak {
		peakUp := size * uint64(cyclesPerSec)
		peakDown := optDelta * formatFactor
		res.BWPeak = float64(peakUp) / float64(peakDown)
	}
	return res
}

func roundUp(v, a int) int {
	if v%a == 0 {
		return v
	}
	return a * (v/a + 1)
}

// FormatBW returns print_full_bw_report's line for r, with the remote
// side's results added when rem is not nil (bidirectional runs).
func FormatBW(c *Config, r BWResult) string {
	switch c.Output {
	case OutputBW:
		return fmt.Sprintf("%f\n", r.BWAvg)
	case OutputMsgRate:
		return fmt.Sprintf("%f\n", r.MsgRate)
	}
	if r.BWAvg < 0.1 && c.ReportGbit { // REPORT_FMT_EXT
		return fmt.Sprintf(" %-7d    %d           %-7s            %-7s            %-7s\n", r.Size, r.Iters,
			pingpong.CFloat(r.BWPeak, 6), pingpong.CFloat(r.BWAvg, 6), pingpong.CFloat(r.MsgRate, 6))
	}
	return fmt.Sprintf(" %-7d    %-10d       %-7s            %-7s\t\t   %-7s\n", r.Size, r.Iters,
		pingpong.CFloat(r.BWPeak, 2), pingpong.CFloat(r.BWAvg, 2), pingpong.CFloat(r.MsgRate, 6))
}

// LatResult is a latency table line, and one of Result's "latency". Its
// times are in microseconds, or in nanoseconds (softnic's "cycles") with
// -C; in Result always microseconds. They are one-way times: half a round
// trip for WRITE and SEND, a whole one for READ and atomics, as perftest
// reports them. A duration run (-D) has only Avg and TPS.
type LatResult struct {
	// Size is the message size in bytes (#bytes).
	Size uint64 `json:"size"`
	// Iters is the number of iterations measured (#iterations).
	Iters uint64 `json:"iterations"`
	// Min is the shortest latency (t_min).
	Min float64 `json:"t_min_usec"`
	// Max is the second-longest latency (t_max: perftest leaves the
	// longest out).
	Max float64 `json:"t_max_usec"`
	// Typical is the median latency (t_typical).
	Typical float64 `json:"t_typical_usec"`
	// Avg is the mean latency (t_avg).
	Avg float64 `json:"t_avg_usec"`
	// Stdev is the standard deviation, computed as perftest does, with
	// each difference from the mean truncated to an integer (t_stdev).
	Stdev float64 `json:"t_stdev_usec"`
	// P99 is the 99th percentile.
	P99 float64 `json:"p99_usec"`
	// P999 is the 99.9th percentile.
	P999 float64 `json:"p99_9_usec"`
	// TPS is the number of iterations per second; duration runs only.
	TPS float64 `json:"tps_average,omitempty"`
	// Duration marks a duration run's result (-D).
	Duration bool `json:"-"`
	// Samples are the latencies -H prints, one per kept iteration, sorted
	// (the two longest left out, as in the other figures); only with -H.
	Samples []float64 `json:"samples_usec,omitempty"`
	// Histogram holds the -H / -U lines printed before the result.
	Histogram string `json:"-"`
}

// ComputeLat is print_report_lat's arithmetic over the post times of
// iters iterations (nanoseconds): the differences between consecutive
// posts, sorted, the two largest dropped, halved for round trips
// (WRITE and SEND), with perftest's integer-truncated standard deviation.
func ComputeLat(c *Config, posted []int64, size uint64) LatResult {
	rtt := 2.0
	if c.Verb == Read || c.Verb == Atomic {
		rtt = 1
	}
	unitsPerUsec, units := 1000.0, "usec" // ns per usec
	if c.Cycles {
		unitsPerUsec, units = 1, "cycles"
	}
	q := unitsPerUsec * rtt
	n := len(posted) - 1
	res := LatResult{Size: size, Iters: uint64(len(posted))}
	if n < 3 {
		return res
	}
	delta := make([]int64, n)
	for i := range delta {
		delta[i] = posted[i+1] - posted[i]
	}
	var hist strings.Builder
	if c.Unsorted {
		fmt.Fprintf(&hist, "#, %s\n", units)
		for i, d := range delta {
			fmt.Fprintf(&hist, "%d, %s\n", i+1, cg(float64(d)/q))
		}
	}
	slices.Sort(delta)
	m := n - 2 // LAT_MEASURE_TAIL
	var median int64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	sum := 0.0
	for i := 0; i < m; i++ {
		sum += float64(delta[i]) / q
	}
	avg := sum / float64(m)
	stdevSum := 0.0
	for i := 0; i < m; i++ {
		tv := int(avg - float64(delta[i])/q) // int temp_var
		stdevSum += float64(int(math.Pow(float64(tv), 2)))
	}
	if c.Histogram {
		fmt.Fprintf(&hist, "#, %s\n", units)
		res.Samples = make([]float64, m)
		for i := 0; i < m; i++ {
			res.Samples[i] = float64(delta[i]) / q
			fmt.Fprintf(&hist, "%d, %s\n", i+1, cg(res.Samples[i]))
		}
	}
	res.Histogram = hist.String()
	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	res.Min = float64(delta[0]) / q
	res.Max = float64(delta[m]) / q
	res.Typical = float64(median) / q
	res.Avg = avg
	res.Stdev = math.Sqrt(stdevSum / float64(m))
	res.P99 = float64(delta[i99]) / q
	res.P999 = float64(delta[i999]) / q
	return res
}

// ComputeLatDuration is print_report_lat_duration's arithmetic: iters
// iterations sampled in sample nanoseconds.
func ComputeLatDuration(c *Config, iters uint64, sample int64, size uint64) LatResult {
	rtt := 2.0
	if c.Verb == Read || c.Verb == Atomic {
		rtt = 1
	}
	res := LatResult{Size: size, Iters: iters, Duration: true}
	usec := float64(sample) / 1000
	res.Avg = usec / rtt / float64(iters)
	res.TPS = float64(iters) / (usec / 1000000)
	return res
}

// cg formats like C's "%g".
func cg(v float64) string {
	s := strconv.FormatFloat(v, 'g', 6, 64)
	if strings.Contains(s, "e") {
		// C writes at least two exponent digits: 1e+06, 1.5e-07.
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		digits := strings.TrimLeft(exp[1:], "0")
		for len(digits) < 2 {
			digits = "0" + digits
		}
		s = mant + "e" + string(sign) + digits
	}
	return s
}

// FormatLat returns print_report_lat's (or the duration variant's) line.
func FormatLat(c *Config, r LatResult) string {
	if c.Output == OutputLat {
		return fmt.Sprintf("%f\n", r.Avg)
	}
	var b strings.Builder
	if r.Histogram != "" {
		b.WriteString(r.Histogram)
		b.WriteString(Header(c))
	}
	if r.Duration {
		fmt.Fprintf(&b, " %-7d       %d            %-7s        %-7s\n", r.Size, r.Iters, pingpong.CFloat(r.Avg, 2), pingpong.CFloat(r.TPS, 2))
		return b.String()
	}
	fmt.Fprintf(&b, " %-7d %d          %-7s        %-7s      %-7s  \t       %-7s     \t%-7s\t\t%-7s \t\t%-7s\n",
		r.Size, r.Iters, pingpong.CFloat(r.Min, 2), pingpong.CFloat(r.Max, 2), pingpong.CFloat(r.Typical, 2), pingpong.CFloat(r.Avg, 2),
		pingpong.CFloat(r.Stdev, 2), pingpong.CFloat(r.P99, 2), pingpong.CFloat(r.P999, 2))
	return b.String()
}
