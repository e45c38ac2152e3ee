package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/wire"
)

// Config says what to run and how long.
type Config struct {
	// Softnic and UDPBench are the paths of the softnic and udpbench
	// binaries (scripts/bench builds them).
	Softnic, UDPBench string
	// Quick runs every measurement briefly: a smoke run.
	Quick bool
	// TCPPort is the first out-of-band port of the tool pairs; each pair
	// takes the next one.
	TCPPort int
	// ManyQPs is the number of QPs of the many-QP write_bw (perftest's
	// -q); 0 skips it.
	ManyQPs int
	// CPUProfile, when set, is where the blocking write_lat client (the
	// run without --busy-poll) writes its CPU profile (softnic's
	// --cpuprofile).
	CPUProfile string
	// GOMAXPROCS, when above 0, is the GOMAXPROCS of each softnic
	// process (its environment variable): how many CPUs the Go runtime
	// of each of the two runs goroutines on at once. 0 leaves Go's
	// default, every CPU the process may use. toolnic.CPUShare gives
	// each process its share of the machine.
	GOMAXPROCS int
	// CLib, when set, is the directory of softnic's libibverbs
	// (scripts/clib): Debian's perftest (ib_write_bw, ib_send_bw,
	// ib_write_lat) then runs over it through softnic exec, beside the
	// look-alikes, with the same arguments.
	CLib string
	// Log receives progress lines.
	Log io.Writer
}

// SmallDatagram is the UDP payload of a 64-byte SEND_ONLY's packet (BTH,
// the 64 bytes, ICRC): udpbench's datagrams for the message-rate limit,
// send_bw -s 64's.
const SmallDatagram = wire.BTHLen + 64 + wire.ICRCLen

// SetupIters is the iterations (a QP) of a bandwidth run's setup run,
// perftest's least: the setup run's CPU time is what the processes spend
// on everything but moving the data (start, device, QPs, memory
// registration, the connection, exit), which the CPU per GB leaves out.
const SetupIters = perftest.MinIter

// SetupRun ends the name of the row whose setup run failed, in
// Measurements.Errors.
const SetupRun = " (setup run)"

// setupArgs returns args with -n's value SetupIters, and whether args run
// more iterations than that.
func setupArgs(args []string) ([]string, bool) {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-n" {
			n, err := strconv.Atoi(out[i+1])
			if err != nil || n <= SetupIters {
				return nil, false
			}
			out[i+1] = strconv.Itoa(SetupIters)
			return out, true
		}
	}
	return nil, false
}

// Plan is the arguments of each measurement.
type Plan struct {
	// UDPBench is udpbench's run of RoCEv2-sized datagrams and the
	// ping-pong; UDPSmall its run of SmallDatagram-byte ones.
	UDPBench, UDPSmall                    []string
	WriteBW, ReadBW, SendBW, WriteLat, QP []string
	// WriteLatBusy is WriteLat with --busy-poll (its default time, 50 µs)
	// on both sides.
	WriteLatBusy []string
	// CWriteLat is Debian's ib_write_lat's: WriteLat without -H, whose
	// every sample perftest would print.
	CWriteLat []string
}

// PlanFor returns the arguments each tool runs with: udpbench's modes and
// run length, the perftest look-alikes' sizes and iterations (both sides
// take the same). send_bw runs with -N: the table has the average, and
// perftest's peak is a search over pairs of iterations (quadratic: 10 s
// of CPU after a million messages).
func PlanFor(c Config) Plan {
	p := Plan{
		UDPBench: []string{"-modes", "raw/plain,raw/gso+gro,link/gso+gro", "-d", "2s", "-runs", "3", "-pingpong", "20000"},
		UDPSmall: []string{"-size", strconv.Itoa(SmallDatagram), "-modes", "raw/plain,raw/gso+gro,link/gso+gro", "-d", "2s", "-runs", "3"},
		WriteBW:  []string{"-s", "65536", "-n", "20000"},
		ReadBW:   []string{"-s", "65536", "-n", "20000"},
		SendBW:   []string{"-s", "64", "-n", "1000000", "-N"},
		WriteLat: []string{"-s", "8", "-n", "20000", "-H"},
		QP:       []string{"-s", "65536", "-q", strconv.Itoa(c.ManyQPs), "-n", "10"},
	}
	if c.Quick {
		p.UDPBench = []string{"-modes", "raw/plain,raw/gso+gro,link/gso+gro", "-d", "500ms", "-runs", "1", "-pingpong", "2000"}
		p.UDPSmall = []string{"-size", strconv.Itoa(SmallDatagram), "-modes", "raw/plain,raw/gso+gro,link/gso+gro", "-d", "500ms", "-runs", "1"}
		p.WriteBW = []string{"-s", "65536", "-n", "2000"}
		p.ReadBW = []string{"-s", "65536", "-n", "2000"}
		p.SendBW = []string{"-s", "64", "-n", "100000", "-N"}
		p.WriteLat = []string{"-s", "8", "-n", "5000", "-H"}
		p.QP = []string{"-s", "65536", "-q", strconv.Itoa(c.ManyQPs), "-n", "5"}
	}
	p.WriteLatBusy = append(append([]string(nil), p.WriteLat...), "--busy-poll")
	p.CWriteLat = p.WriteLat[:len(p.WriteLat)-1]
	return p
}

// Run measures everything, in turn, and returns what it measured; a
// measurement that fails is recorded in Errors and the run goes on.
func Run(ctx context.Context, c Config) Measurements {
	logf := func(format string, a ...any) {
		if c.Log != nil {
			fmt.Fprintf(c.Log, "bench: "+format+"\n", a...)
		}
	}
	p := PlanFor(c)
	m := Measurements{Quick: c.Quick, ManyQPs: c.ManyQPs, DatagramSize: 4112, GOMAXPROCS: c.GOMAXPROCS, Errors: map[string]string{}}
	m.Machine = ReadMachine()
	port := c.TCPPort

	logf("udpbench %s", strings.Join(p.UDPBench, " "))
	out, _, err := command(ctx, nil, c.UDPBench, p.UDPBench...)
	if err == nil {
		m.UDP, m.DatagramSize, err = ParseUDPBench(out)
	}
	if err == nil {
		m.PingPong, err = ParsePingPong(out)
	}
	if err != nil {
		for _, r := range []string{RowUDPPlain, RowUDPGSOGRO, RowUDPLink, RowPingBlock, RowPingBusy} {
			m.Errors[r] = "udpbench: " + err.Error()
		}
	}
	logf("udpbench %s", strings.Join(p.UDPSmall, " "))
	out, _, err = command(ctx, nil, c.UDPBench, p.UDPSmall...)
	if err == nil {
		m.UDPSmall, m.SmallDatagramSize, err = ParseUDPBench(out)
	}
	if err != nil {
		for _, r := range []string{RowSmallPlain, RowSmallGSOGRO, RowSmallLink} {
			m.Errors[r] = "udpbench: " + err.Error()
		}
	}

	run := func(tool string, args []string) (*BW, error) {
		logf("%s %s", tool, strings.Join(args, " "))
		r, cpu, err := c.pair(ctx, tool, port, args, nil)
		port++
		if err == nil && len(r.BW) != 1 {
			err = fmt.Errorf("%d result lines, want 1", len(r.BW))
		}
		if err != nil {
			logf("%s: %v", tool, err)
			return nil, err
		}
		return &BW{BWResult: r.BW[0], CPU: cpu}, nil
	}
	// bw runs a bandwidth or message-rate pair, then the same pair with
	// SetupIters iterations (a QP), whose CPU time is everything but
	// moving the data.
	bw := func(row, tool string, args []string) *BW {
		b, err := run(tool, args)
		if err != nil {
			m.Errors[row] = err.Error()
			return nil
		}
		if short, ok := setupArgs(args); ok {
			if b.Setup, err = run(tool, short); err != nil {
				m.Errors[row+SetupRun] = err.Error()
			}
		}
		return b
	}
	m.WriteBW = bw(RowWriteBW, "write_bw", p.WriteBW)
	m.ReadBW = bw(RowReadBW, "read_bw", p.ReadBW)
	m.SendBW = bw(RowSendBW, "send_bw", p.SendBW)

	lat := func(row string, args, extra []string) *perftest.LatResult {
		logf("write_lat %s", strings.Join(args, " "))
		r, _, err := c.pair(ctx, "write_lat", port, args, extra)
		port++
		if err == nil && len(r.Lat) != 1 {
			err = fmt.Errorf("%d result lines, want 1", len(r.Lat))
		}
		if err != nil {
			m.Errors[row] = err.Error()
			logf("write_lat: %v", err)
			return nil
		}
		return &r.Lat[0]
	}
	var prof []string
	if c.CPUProfile != "" {
		prof = []string{"--cpuprofile", c.CPUProfile}
	}
	m.WriteLat = lat(RowLatTyp, p.WriteLat, prof)
	m.WriteLatBusy = lat(RowLatBusy, p.WriteLatBusy, nil)

	if c.ManyQPs > 0 {
		m.ManyQP = bw(fmt.Sprintf(RowManyQP, c.ManyQPs), "write_bw", p.QP)
	}

	if c.CLib != "" {
		m.CLib = true
		perftestC := func(row, program string, args []string) (perftest.Result, bool) {
			logf("%s %s over softnic's libibverbs", program, strings.Join(args, " "))
			r, err := c.pairC(ctx, program, port, args)
			port++
			if err != nil {
				m.Errors[row] = err.Error()
				logf("%s: %v", program, err)
				return r, false
			}
			return r, true
		}
		one := func(row string, n int) bool {
			if n != 1 {
				m.Errors[row] = fmt.Sprintf("%d result lines, want 1", n)
				return false
			}
			return true
		}
		if r, ok := perftestC(RowCWriteBW, "ib_write_bw", p.WriteBW); ok && one(RowCWriteBW, len(r.BW)) {
			m.CWriteBW = &r.BW[0]
		}
		if r, ok := perftestC(RowCSendBW, "ib_send_bw", p.SendBW); ok && one(RowCSendBW, len(r.BW)) {
			m.CSendBW = &r.BW[0]
		}
		if r, ok := perftestC(RowCWriteLat, "ib_write_lat", p.CWriteLat); ok && one(RowCWriteLat, len(r.Lat)) {
			m.CWriteLat = &r.Lat[0]
		}
	}
	m.Machine.LoadAfter = ReadLoad()
	return m
}

// pairC runs Debian's perftest program over softnic's libibverbs (softnic
// exec, device softnic0, GID index 1: its address) as a server on
// 127.0.0.1 and, once that listens, as a client on 127.0.0.2, both with
// args, and returns the client's result from its text.
func (c Config) pairC(ctx context.Context, program string, port int, args []string) (perftest.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	side := func(addr string) []string {
		return append([]string{"exec", "--addr", addr, "--lib", c.CLib, "--", program,
			"-d", "softnic0", "-x", "1", "-F", "-p", strconv.Itoa(port)}, args...)
	}
	env := toolnic.GOMAXPROCSEnv(c.GOMAXPROCS)
	srvDone := make(chan struct{})
	var srvErr error
	go func() {
		defer close(srvDone)
		_, _, srvErr = command(ctx, env, c.Softnic, side("127.0.0.1")...)
	}()
	// perftest's client tries to connect once
	if !waitListen(ctx, port, srvDone, 30*time.Second) {
		cancel()
		<-srvDone
		return perftest.Result{}, fmt.Errorf("server: not listening on TCP %d: %v", port, srvErr)
	}
	out, _, err := command(ctx, env, c.Softnic, append(side("127.0.0.2"), "127.0.0.1")...)
	if err != nil {
		cancel()
	}
	<-srvDone
	if err != nil {
		return perftest.Result{}, fmt.Errorf("client: %w", err)
	}
	if srvErr != nil {
		return perftest.Result{}, fmt.Errorf("server: %w", srvErr)
	}
	return perftest.ParseText(out)
}

// waitListen reports whether a socket of this network namespace listens
// on TCP port (/proc/net/tcp{,6}: state 0A) before limit passes, ctx ends
// or done closes.
func waitListen(ctx context.Context, port int, done <-chan struct{}, limit time.Duration) bool {
	hex := fmt.Sprintf(":%04X", port)
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				// local_address is the second field (ADDR:PORT), st the fourth
				if fs := strings.Fields(l); len(fs) > 3 && strings.HasSuffix(fs[1], hex) && fs[3] == "0A" {
					return true
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}

// pair runs softnic <tool> as a server on 127.0.0.1 and as a client on
// 127.0.0.2, both with args and --json, the client with extra too, and
// returns the client's Result, read strictly, and the CPU time both
// processes used, user and system (their rusage when they ended).
func (c Config) pair(ctx context.Context, tool string, port int, args, extra []string) (perftest.Result, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	common := append([]string{tool, "--json", "-p", strconv.Itoa(port), "--timeout", "60s"}, args...)
	srvArgs := append(append([]string(nil), common...), "--addr", "127.0.0.1", "--accept-timeout", "60s")
	cliArgs := append(append(append([]string(nil), common...), extra...), "--addr", "127.0.0.2", "--connect-timeout", "30s", "127.0.0.1")
	env := toolnic.GOMAXPROCSEnv(c.GOMAXPROCS)
	var wg sync.WaitGroup
	var srvErr error
	var srvCPU time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, srvCPU, srvErr = command(ctx, env, c.Softnic, srvArgs...)
	}()
	out, cpu, err := command(ctx, env, c.Softnic, cliArgs...)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err != nil {
		return perftest.Result{}, 0, fmt.Errorf("client: %w", err)
	}
	if srvErr != nil {
		return perftest.Result{}, 0, fmt.Errorf("server: %w", srvErr)
	}
	r, err := ParseResult(out)
	return r, cpu + srvCPU, err
}

// ParseResult reads a perftest look-alike's --json document strictly.
func ParseResult(b []byte) (perftest.Result, error) {
	var r perftest.Result
	if err := tooljson.Decode(b, &r); err != nil {
		return r, fmt.Errorf("reading the --json result: %w", err)
	}
	if r.CheckErr != "" {
		return r, fmt.Errorf("check: %s", r.CheckErr)
	}
	return r, nil
}

// command runs name with args in the environment env (nil: this
// process's) and returns its standard output and the CPU time it used,
// user and system (its rusage, from wait4); a failure carries the last
// line of its standard error.
func command(ctx context.Context, env []string, name string, args ...string) ([]byte, time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		return nil, 0, fmt.Errorf("%w: %s", err, lines[len(lines)-1])
	}
	return out.Bytes(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// ParseUDPBench reads cmd/udpbench's output: the header line with the
// datagram size, then the "mode Gbit/s kpkt/s loss% cpu_s/GB" table (or,
// from a udpbench before the CPU column, "mode Gbit/s kpkt/s loss%"), up
// to an empty line (before the ping-pong table, ParsePingPong's) or the
// end. A "-" in the CPU column (udpbench -peer) is no figure.
func ParseUDPBench(b []byte) ([]UDP, int, error) {
	s, _, _ := strings.Cut(strings.TrimRight(string(b), "\n"), "\n\n")
	lines := strings.Split(s, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "udpbench: ") {
		return nil, 0, fmt.Errorf("no udpbench header in %q", firstLine(b))
	}
	size, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(lines[0])[1], "-byte"))
	if err != nil || !strings.HasSuffix(strings.Fields(lines[0])[1], "-byte") {
		return nil, 0, fmt.Errorf("no datagram size in %q", lines[0])
	}
	titles := strings.Fields(lines[1])
	if !slices.Equal(titles, []string{"mode", "Gbit/s", "kpkt/s", "loss%", "cpu_s/GB"}) &&
		!slices.Equal(titles, []string{"mode", "Gbit/s", "kpkt/s", "loss%"}) {
		return nil, 0, fmt.Errorf("unexpected column titles %q", lines[1])
	}
	var us []UDP
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != len(titles) {
			return nil, 0, fmt.Errorf("unexpected line %q", l)
		}
		u := UDP{Mode: f[0]}
		for i, dst := range []*float64{&u.Gbits, &u.Kpps, &u.LossPct} {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return nil, 0, fmt.Errorf("line %q: %v", l, err)
			}
			*dst = v
		}
		if len(f) == 5 && f[4] != "-" {
			v, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				return nil, 0, fmt.Errorf("line %q: %v", l, err)
			}
			u.CPUPerGB = &v
		}
		us = append(us, u)
	}
	if len(us) == 0 {
		return nil, 0, fmt.Errorf("udpbench printed no results")
	}
	return us, size, nil
}

// ParsePingPong reads the ping-pong table of cmd/udpbench's output
// (-pingpong): after an empty line, a "ping-pong: ..." line, the
// "mode typical p99" titles and a line per mode. Lines starting
// "udpbench: " in the table are udpbench's notes on its standard error
// (round trips lost and made again), which the guests' output has
// among the table's lines; they are skipped. Output without the table
// has none (nil, no error).
func ParsePingPong(b []byte) ([]PingPong, error) {
	_, rest, ok := strings.Cut(strings.TrimRight(string(b), "\n"), "\n\n")
	if !ok {
		return nil, nil
	}
	lines := strings.Split(rest, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "ping-pong: ") {
		return nil, fmt.Errorf("no ping-pong table in %q", rest)
	}
	if f := strings.Fields(lines[1]); len(f) != 3 || f[0] != "mode" || f[1] != "typical" || f[2] != "p99" {
		return nil, fmt.Errorf("unexpected ping-pong column titles %q", lines[1])
	}
	var ps []PingPong
	for _, l := range lines[2:] {
		if strings.HasPrefix(l, "udpbench: ") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("unexpected ping-pong line %q", l)
		}
		p := PingPong{Mode: f[0]}
		for i, dst := range []*float64{&p.Typical, &p.P99} {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("ping-pong line %q: %v", l, err)
			}
			*dst = v
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// ReadMachine describes this machine from /proc.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), LoadBefore: ReadLoad()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = CPUModel(b)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// CPUModel returns the first "model name" of /proc/cpuinfo's text, or
// "unknown".
func CPUModel(cpuinfo []byte) string {
	for _, l := range strings.Split(string(cpuinfo), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// ReadLoad returns the load averages of /proc/loadavg (zeros if it
// cannot be read).
func ReadLoad() [3]float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	l, _ := ParseLoad(b)
	return l
}

// ParseLoad reads the three load averages at the start of /proc/loadavg.
func ParseLoad(b []byte) ([3]float64, error) {
	var l [3]float64
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, fmt.Errorf("loadavg %q: want three load averages", b)
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return [3]float64{}, fmt.Errorf("loadavg %q: %v", b, err)
		}
		l[i] = v
	}
	return l, nil
}
