//go:build twohost

package twohost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// checkedOut is softnic's --check verdict (tools/perftest/check.go).
const checkedOut = "every byte checked out"

// Settings, all from the environment (test/twohost/run sets the first three):
//
//	TWOHOST_SOFTNIC   softnic binary to test (default: built from ./cmd/softnic into the results)
//	TWOHOST_RESULTS   results directory (default: results/YYYYMMDD-HHMMSS here)
//	TWOHOST_MANAGED=1 the bed is brought up and down by the caller (test/twohost/run)
//	TWOHOST_CLIB      softnic's libibverbs for the clib cases (default: built by scripts/clib into the results)
//	TWOHOST_PREFIX    the bed's names' prefix (default th; see ./bed)
//	CI=true           a bed that is not up fails the run instead of skipping it
var theSuite = &suite{}

func TestMain(m *testing.M) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "twohost: %v: stopping\n", s)
		theSuite.abort()
		os.Exit(130)
	}()
	code := m.Run()
	theSuite.finish()
	os.Exit(code)
}

// TestTwoHost runs the matrix: each case a subtest with its own time bound,
// the server side in namespace A, the client side in namespace B.
func TestTwoHost(t *testing.T) {
	s := theSuite
	s.once.Do(s.setup)
	if s.setupErr != nil {
		if os.Getenv("CI") == "true" || s.managed {
			t.Fatalf("THE TWO-HOST TEST BED IS NOT USABLE: %v", s.setupErr)
		}
		t.Skipf("two-host test bed unavailable (outside CI this skips; CI=true fails): %v", s.setupErr)
	}
	t.Logf("bed: %s <-> %s, softnic %s, results %s", s.bed.A4, s.bed.B4, s.softnic, s.results)
	for _, c := range matrix() {
		t.Run(c.name(), func(t *testing.T) { s.runCase(t, c) })
	}
}

// The kinds of case.
const (
	pingpong = iota // an rdma-core look-alike: result lines on both sides
	perftest        // a perftest look-alike: a result row on the client
	demo            // softnic demo, the server half on A, the client half on B
	info            // softnic info on A: the port's active MTU follows the interface
	tmpp            // softnic tm_pingpong: the received counts add up on both sides
	xsrq            // softnic xsrq_pingpong: "success" on both sides, the SRQ numbers agree
	cmtool          // a librdmacm example: its success lines on both sides (cm: the command lines)
	clibpair        // a Debian program over softnic's libibverbs on one side or both (clib_test.go)
)

// tcase is one row of the matrix.
type tcase struct {
	kind  int
	tool  string   // softnic's subcommand
	v6    bool     // the NICs (and the tools' TCP exchange) on the IPv6 addresses
	mtu   int      // both interfaces' MTU
	args  []string // options of both sides
	label string   // what tells this case from its neighbours: size, atomic type
	check bool     // softnic's --check: one side must say every byte checked out
	// tm_pingpong: the messages each side must receive eager and rendezvous
	tmEager, tmRndv int
	// connection-manager cases (cmtool, and perftests with -R): the
	// client is started again while the server does not listen yet
	cmRetry bool
	// cmtool: both command lines, given the server's and the client's
	// address and the case's port; what each side's stdout must match
	cm               func(a, b, port string) (srv, cli []string)
	srvWant, cliWant *regexp.Regexp
	// mckey: the group; the receiver (A) writes a pcap in which B's
	// datagrams to the group must be
	mcastGroup string
	// clibpair: what runs on each side; tool is the Debian program
	srv, cli clibSide
	// impair is "LOSS DUP" (per mille) for every RoCE packet both ways
	// ("bed impair"); "" none
	impair string
	// exec runs Debian's programs (cm's command lines) over softnic exec,
	// on softnic's libibverbs and librdmacm, instead of softnic's tools
	exec bool
}

func (c *tcase) name() string {
	fam := "v4"
	if c.v6 {
		fam = "v6"
	}
	n := fmt.Sprintf("%s-%s-mtu%d", c.tool, fam, c.mtu)
	if c.label != "" {
		n += "-" + c.label
	}
	if c.kind == clibpair {
		n += "-" + c.srv.String() + "_" + c.cli.String()
	}
	if c.impair != "" {
		n += "-lossy"
	}
	if c.exec {
		n += "-exec"
	}
	return n
}

// activeMTUFor is the IB MTU a port on an interface of this MTU has, as
// rxe chooses it (rxe_param.h: eth_mtu_int_to_enum: the largest IB MTU
// not above the netdev's MTU less RXE_MAX_HDR_LENGTH, 80 bytes of RoCE
// headers): 1024 at 1500, 4096 at 9000.
func activeMTUFor(ifMTU int) int {
	for _, m := range []int{4096, 2048, 1024, 512, 256} {
		if m+80 <= ifMTU {
			return m
		}
	}
	return 256
}

// matrix returns every case: for each interface MTU (1500, then 9000) and
// each family, every tool pair with default options as a user runs them.
func matrix() []*tcase {
	var cs []*tcase
	a := func(s ...string) []string { return s }
	for _, mtu := range []int{1500, 9000} {
		for _, v6 := range []bool{false, true} {
			add := func(c tcase) { c.mtu, c.v6 = mtu, v6; cs = append(cs, &c) }
			// pingpongs with -c (rdma-core: validate the received buffer);
			// fewer iterations for the big messages
			for _, tool := range []string{"rc_pingpong", "uc_pingpong", "srq_pingpong"} {
				for _, sz := range []struct {
					size, iters int
					label       string
				}{{1, 500, "1B"}, {4096, 500, "4KiB"}, {65536, 100, "64KiB"}, {1 << 20, 10, "1MiB"}} {
					add(tcase{kind: pingpong, tool: tool, label: sz.label,
						args: a("-s", strconv.Itoa(sz.size), "-n", strconv.Itoa(sz.iters), "-c")})
				}
			}
			act := activeMTUFor(mtu)
			add(tcase{kind: pingpong, tool: "ud_pingpong", label: "1B", args: a("-s", "1", "-n", "500", "-c")})
			add(tcase{kind: pingpong, tool: "ud_pingpong", label: fmt.Sprintf("%dB", act),
				args: a("-s", strconv.Itoa(act), "-n", "500", "-c")})
			// perftests with --check where the tool has it
			add(tcase{kind: perftest, tool: "write_bw", label: "64KiB", args: a("-s", "65536", "-n", "1000", "--check"), check: true})
			add(tcase{kind: perftest, tool: "read_bw", label: "64KiB", args: a("-s", "65536", "-n", "500", "--check"), check: true})
			add(tcase{kind: perftest, tool: "send_bw", label: "64KiB", args: a("-s", "65536", "-n", "1000", "--check"), check: true})
			add(tcase{kind: perftest, tool: "atomic_bw", label: "FETCH_AND_ADD", args: a("-A", "FETCH_AND_ADD", "-n", "1000", "--check"), check: true})
			add(tcase{kind: perftest, tool: "atomic_bw", label: "CMP_AND_SWAP", args: a("-A", "CMP_AND_SWAP", "-n", "1000", "--check"), check: true})
			add(tcase{kind: perftest, tool: "write_lat", label: "8B", args: a("-s", "8", "-n", "1000")})
			// --busy-poll on both sides: the polls read the link and the
			// receive goroutine steps off it (the poll lease)
			add(tcase{kind: perftest, tool: "write_lat", label: "8B-busy", args: a("-s", "8", "-n", "1000", "--busy-poll")})
			add(tcase{kind: perftest, tool: "write_bw", label: "64KiB-busy", args: a("-s", "65536", "-n", "1000", "--check", "--busy-poll"), check: true})
			add(tcase{kind: perftest, tool: "read_lat", label: "8B", args: a("-s", "8", "-n", "1000", "--check"), check: true})
			add(tcase{kind: perftest, tool: "send_lat", label: "8B", args: a("-s", "8", "-n", "1000")})
			add(tcase{kind: perftest, tool: "atomic_lat", label: "FETCH_AND_ADD", args: a("-n", "1000", "--check"), check: true})
			// tag matching with -c: eager only (every message below -r),
			// rendezvous only (message i carries -s>>(i%4) bytes, all at
			// least -r); -u tags of each window posted after their message
			// arrived, so some arrive unexpected
			add(tcase{kind: tmpp, tool: "tm_pingpong", label: "eager",
				args: a("-s", "4096", "-r", "4097", "-n", "400", "-t", "16", "-u", "2", "-c"), tmEager: 400})
			add(tcase{kind: tmpp, tool: "tm_pingpong", label: "rndv",
				args: a("-s", "65536", "-r", "8192", "-n", "200", "-t", "16", "-u", "2", "-c"), tmRndv: 200})
			// XRC: SENDs into the peer's XRC SRQ (one packet, then 64)
			add(tcase{kind: xsrq, tool: "xsrq_pingpong", label: "4KiB", args: a("-s", "4096", "-n", "200")})
			add(tcase{kind: xsrq, tool: "xsrq_pingpong", label: "64KiB", args: a("-s", "65536", "-n", "50")})
			cmCases(mtu, v6, add)
			add(tcase{kind: demo, tool: "demo"})
			add(tcase{kind: info, tool: "info"})
		}
	}
	clibCases(func(c tcase) { c.mtu = 1500; cs = append(cs, &c) })
	// Lossy everywhere (issue 35): every RoCE packet both ways, ACKs
	// too, 3% lost and 1% duplicated over a real link between the
	// namespaces (no reordering: the host kernel has no netem; the
	// interop bed's guest reorders): every RC operation with its data
	// checked.
	for _, c := range []tcase{
		{kind: pingpong, tool: "rc_pingpong", label: "1B", args: a("-s", "1", "-n", "300", "-c")},
		{kind: pingpong, tool: "rc_pingpong", label: "1MiB", args: a("-s", "1048576", "-n", "5", "-c")},
		{kind: perftest, tool: "write_bw", label: "64KiB", args: a("-s", "65536", "-n", "200", "--check"), check: true},
		{kind: perftest, tool: "read_bw", label: "64KiB", args: a("-s", "65536", "-n", "200", "--check"), check: true},
		{kind: perftest, tool: "send_bw", label: "64KiB", args: a("-s", "65536", "-n", "200", "--check"), check: true},
		{kind: perftest, tool: "atomic_bw", label: "FETCH_AND_ADD", args: a("-A", "FETCH_AND_ADD", "-n", "300", "--check"), check: true},
		{kind: perftest, tool: "atomic_bw", label: "CMP_AND_SWAP", args: a("-A", "CMP_AND_SWAP", "-n", "300", "--check"), check: true},
	} {
		c.mtu, c.impair = 1500, lossyImpair
		cs = append(cs, &c)
	}
	return cs
}

// lossyImpair is the lossy-everywhere cases' impairment (bed impair:
// 3% lost, 1% duplicated).
const lossyImpair = "30 10"

// bedEnv is what "bed env" prints.
type bedEnv struct {
	NSA, NSB, A4, B4, A6, B6 string
}

func (e *bedEnv) addrs(v6 bool) (a, b string) {
	if v6 {
		return e.A6, e.B6
	}
	return e.A4, e.B4
}

// suite is the state of one run of the matrix.
type suite struct {
	once     sync.Once
	setupErr error

	ctx     context.Context
	cancel  context.CancelFunc
	bed     bedEnv
	script  string // ./bed
	softnic string
	results string
	managed bool
	start   time.Time
	mtu     int    // the interfaces' MTU now
	impair  string // the bed's impairment now ("" none)
	port    int    // the tools' TCP port, one per case
	clibDir string // softnic's libibverbs (and librdmacm) for the clib and exec cases
	clibErr error  // or why it could not be built

	mu      sync.Mutex
	rows    []row
	figures []string
}

// row is one line of the summary.
type row struct {
	name, result string
	dur          time.Duration
	note         string
}

func (s *suite) setup() {
	s.start = time.Now()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.managed = os.Getenv("TWOHOST_MANAGED") == "1"
	s.port = 19500
	s.results = os.Getenv("TWOHOST_RESULTS")
	if s.results == "" {
		s.results = filepath.Join("results", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(s.results, 0o755); err != nil {
		s.setupErr = err
		return
	}
	s.results, _ = filepath.Abs(s.results)
	if os.Geteuid() != 0 {
		s.setupErr = errors.New("not root (the tools run in the bed's network namespaces)")
		return
	}
	if _, err := exec.LookPath("ip"); err != nil {
		s.setupErr = errors.New("no ip (iproute2)")
		return
	}
	s.script, _ = filepath.Abs("bed")
	out, err := exec.CommandContext(s.ctx, s.script, "env").Output()
	if err != nil {
		s.setupErr = fmt.Errorf("bed env: %v", err)
		return
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	s.bed = bedEnv{NSA: env["TWOHOST_NS_A"], NSB: env["TWOHOST_NS_B"], A4: env["TWOHOST_A4"], B4: env["TWOHOST_B4"],
		A6: env["TWOHOST_A6"], B6: env["TWOHOST_B6"]}
	if env["TWOHOST_MTU_NOW"] == "" {
		s.setupErr = fmt.Errorf("the bed is not up (namespace %s missing): run test/twohost/run, or test/twohost/bed up", s.bed.NSA)
		return
	}
	s.softnic = os.Getenv("TWOHOST_SOFTNIC")
	if s.softnic == "" {
		s.softnic = filepath.Join(s.results, "softnic")
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", s.softnic, "github.com/softnic/softnic/cmd/softnic").CombinedOutput(); err != nil {
			s.setupErr = fmt.Errorf("building softnic: %v\n%s", err, out)
			return
		}
	}
	s.clibDir, s.clibErr = buildCLib(s.ctx, s.results)
}

func (s *suite) setMTU(mtu int) error {
	if s.mtu == mtu {
		return nil
	}
	out, err := exec.CommandContext(s.ctx, s.script, "mtu", strconv.Itoa(mtu)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bed mtu %d: %v: %s", mtu, err, out)
	}
	s.mtu = mtu
	return nil
}

// setImpair impairs the bed's RoCE traffic with spec ("" none).
func (s *suite) setImpair(spec string) error {
	if s.impair == spec {
		return nil
	}
	args := []string{"impair", "off"}
	if spec != "" {
		args = append([]string{"impair"}, strings.Fields(spec)...)
	}
	out, err := exec.CommandContext(s.ctx, s.script, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bed %s: %v: %s", strings.Join(args, " "), err, out)
	}
	s.impair = spec
	return nil
}

func (s *suite) runCase(t *testing.T, c *tcase) {
	r := row{name: c.name(), result: "FAIL"}
	start := time.Now()
	defer func() {
		r.dur = time.Since(start)
		s.mu.Lock()
		s.rows = append(s.rows, r)
		s.mu.Unlock()
	}()
	dir := filepath.Join(s.results, c.name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.kind == clibpair {
		if s.clibErr != nil {
			r.note = "softnic's libibverbs: " + s.clibErr.Error()
			t.Fatal(s.clibErr)
		}
		if why := clibMissing(c); why != "" {
			r.result, r.note = "MISSING", why
			t.Skip(why)
		}
	}
	if err := s.setMTU(c.mtu); err != nil {
		r.note = err.Error()
		t.Fatal(err)
	}
	if err := s.setImpair(c.impair); err != nil {
		r.note = err.Error()
		t.Fatal(err)
	}
	var err error
	if c.kind == info {
		err = s.runInfo(c, dir)
	} else {
		err = s.runPair(c, dir)
	}
	if err != nil {
		r.note = err.Error()
		t.Fatalf("%v\n(outputs in %s)", err, dir)
	}
	r.result = "PASS"
}

// caseTimeout bounds one case; the tools' own timeouts end a silent run
// well before it.
const caseTimeout = 90 * time.Second

// runPair runs a server in namespace A and its client in namespace B and
// checks what they printed.
func (s *suite) runPair(c *tcase, dir string) error {
	ctx, cancel := context.WithTimeout(s.ctx, caseTimeout)
	defer cancel()
	s.port++
	a, b := s.bed.addrs(c.v6)
	var srvArgs, cliArgs []string
	switch c.kind {
	case demo:
		// the same command line on both hosts but --role
		common := []string{"demo", "--addr-a", a, "--addr-b", b, "--port", strconv.Itoa(s.port)}
		srvArgs = append(append([]string(nil), common...), "--role", "server")
		cliArgs = append(append([]string(nil), common...), "--role", "client")
	case clibpair:
		srvArgs, cliArgs = s.clibArgs(c, a, b)
	case cmtool:
		srvArgs, cliArgs = c.cm(a, b, strconv.Itoa(s.port))
		if c.exec {
			if s.clibErr != nil {
				return fmt.Errorf("softnic's C libraries: %w", s.clibErr)
			}
			srvArgs = append([]string{"exec", "--addr", a, "--lib", s.clibDir, "--"}, srvArgs...)
			cliArgs = append([]string{"exec", "--addr", b, "--lib", s.clibDir, "--"}, cliArgs...)
			break
		}
		srvArgs = append(srvArgs, "--timeout", "10s")
		cliArgs = append(cliArgs, "--timeout", "10s")
		if c.mcastGroup != "" {
			srvArgs = append(srvArgs, "--pcap", filepath.Join(dir, "receiver.pcap"))
		}
	default:
		port := []string{"-p", strconv.Itoa(s.port), "--timeout", "10s"}
		if c.v6 && c.kind == perftest && !c.cmRetry { // with -R the CM carries the exchange
			port = append(port, "--ipv6") // perftest's out-of-band socket over IPv6
		}
		srvArgs = append(append(append([]string{c.tool}, c.args...), port...), "--addr", a, "--accept-timeout", "30s")
		cliArgs = append(append(append([]string{c.tool}, c.args...), port...), "--addr", b, "--connect-timeout", "20s", a)
	}
	srv, err := start(ctx, s.bed.NSA, s.softnic, srvArgs, filepath.Join(dir, "server.out"))
	if err != nil {
		return err
	}
	defer srv.stop()
	if c.kind == clibpair {
		waitTCPListen(ctx, srv, s.port, 30*time.Second)
	}
	var cli *proc
	if c.cmRetry {
		cli, err = s.startCMClient(ctx, srv, cliArgs, filepath.Join(dir, "client.out"))
	} else {
		cli, err = start(ctx, s.bed.NSB, s.softnic, cliArgs, filepath.Join(dir, "client.out"))
	}
	if err != nil {
		return err
	}
	defer cli.stop()
	// whichever fails first, the other gets a few seconds to notice
	var sc, cc int
	select {
	case <-srv.done:
		sc = srv.code()
		cc = cli.waitFor(ctx, sc != 0)
	case <-cli.done:
		cc = cli.code()
		sc = srv.waitFor(ctx, cc != 0)
	case <-ctx.Done():
	}
	srv.stop()
	cli.stop()
	srv.save()
	cli.save()
	if ctx.Err() != nil {
		return fmt.Errorf("timed out after %v: server: %s; client: %s", caseTimeout, srv.lastError(), cli.lastError())
	}
	why := func(p *proc) string {
		// a demo half names its failed steps on stdout: the first one says most
		if m := demoFailed.FindString(p.stdout.String()); c.kind == demo && m != "" {
			return strings.Join(strings.Fields(m), " ")
		}
		return p.lastError()
	}
	var errs []string
	if cc != 0 {
		errs = append(errs, fmt.Sprintf("client (%s) exited %d: %s", b, cc, why(cli)))
	}
	if sc != 0 {
		errs = append(errs, fmt.Sprintf("server (%s) exited %d: %s", a, sc, why(srv)))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	so, co := srv.stdout.String(), cli.stdout.String()
	kind := c.kind
	if c.kind == clibpair {
		kind = perftest
		if strings.HasPrefix(c.tool, "ibv_") {
			kind = pingpong
		}
	}
	switch kind {
	case pingpong:
		for _, p := range []struct {
			side, out string
		}{{"server", so}, {"client", co}} {
			if !ppBytes.MatchString(p.out) || !ppIters.MatchString(p.out) {
				return fmt.Errorf("the %s printed no result lines (N bytes in ..., N iters in ...)", p.side)
			}
		}
	case tmpp:
		for _, p := range []struct {
			side, out string
		}{{"server", so}, {"client", co}} {
			r, ok := tmReceivedCounts(p.out)
			switch {
			case !ok:
				return fmt.Errorf("the %s printed no received line", p.side)
			case r.matched+r.unexpected != c.tmEager+c.tmRndv || r.eager != c.tmEager || r.rndv != c.tmRndv:
				return fmt.Errorf("the %s received %d matched + %d unexpected, %d eager, %d rendezvous; want %d eager, %d rendezvous",
					p.side, r.matched, r.unexpected, r.eager, r.rndv, c.tmEager, c.tmRndv)
			case r.late == 0 || r.unexpected < r.late:
				return fmt.Errorf("the %s posted %d tags late and saw %d unexpected messages", p.side, r.late, r.unexpected)
			}
		}
	case xsrq:
		sl, sr, sok := xsrqDests(so)
		cl, cr, cok := xsrqDests(co)
		switch {
		case !sok || !cok:
			return errors.New("a side printed no local and remote address lines or no success line")
		case sl != cr || cl != sr:
			return fmt.Errorf("the sides disagree: server local %+v remote %+v, client local %+v remote %+v", sl, sr, cl, cr)
		}
	case cmtool:
		if !c.srvWant.MatchString(so) {
			return fmt.Errorf("the server's output does not match %q", c.srvWant)
		}
		if !c.cliWant.MatchString(co) {
			return fmt.Errorf("the client's output does not match %q", c.cliWant)
		}
		if c.mcastGroup != "" {
			if err := checkMulticast(filepath.Join(dir, "receiver.pcap"), b, c.mcastGroup, mckeyMessages); err != nil {
				return err
			}
		}
	case perftest:
		if !perftestRow.MatchString(co) {
			return errors.New("the client printed no result row")
		}
		if c.cmRetry && (!rdmaCMOn(so) || !rdmaCMOn(co)) {
			return errors.New("-R: a side did not say rdma_cm QPs : ON")
		}
		if c.check && !strings.Contains(srv.stderr.String()+cli.stderr.String(), checkedOut) {
			return fmt.Errorf("--check: neither side said %q", checkedOut)
		}
		if !c.cmRetry && c.kind == perftest { // the figures are those of the Go tools' TCP-exchange runs
			s.figure(c, co)
		}
	case demo:
		for _, p := range []struct {
			side, out string
		}{{"server", so}, {"client", co}} {
			if !demoPassed.MatchString(p.out) {
				return fmt.Errorf("the demo's %s half did not say that every run passed", p.side)
			}
		}
	}
	return nil
}

var (
	demoPassed = regexp.MustCompile(`(?m)^All \d+ runs passed`)
	demoFailed = regexp.MustCompile(`(?m)^ +\S+ +FAILED: .*$`)
)

// figure records the figures the README and the report quote: write_bw's
// 64 KiB bandwidth and write_lat's 8 B typical latency, each MTU and family.
func (s *suite) figure(c *tcase, out string) {
	var line string
	switch c.tool {
	case "write_bw":
		if v, ok := bwAverage(out); ok {
			line = fmt.Sprintf("%s: write_bw 64 KiB, 1 QP: %.2f MB/s average", c.name(), v)
		}
	case "write_lat":
		if v, ok := latTypical(out); ok {
			line = fmt.Sprintf("%s: write_lat 8 B: %.2f µs typical", c.name(), v)
		}
	}
	if line != "" {
		s.mu.Lock()
		s.figures = append(s.figures, line)
		s.mu.Unlock()
	}
}

// runInfo checks that "softnic info --addr A" shows the active MTU that an
// RoCE port on an interface of this MTU has (rxe: 1024 at 1500, 4096 at 9000).
func (s *suite) runInfo(c *tcase, dir string) error {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	a, _ := s.bed.addrs(c.v6)
	p, err := start(ctx, s.bed.NSA, s.softnic, []string{"info", "--addr", a}, filepath.Join(dir, "info.out"))
	if err != nil {
		return err
	}
	code := p.waitFor(ctx, false)
	p.save()
	if code != 0 {
		return fmt.Errorf("softnic info exited %d: %s", code, p.lastError())
	}
	m := activeMTU.FindStringSubmatch(p.stdout.String())
	if m == nil {
		return errors.New("softnic info printed no active_mtu line")
	}
	if want := strconv.Itoa(activeMTUFor(c.mtu)); m[1] != want {
		return fmt.Errorf("active_mtu: %s on an interface of MTU %d, want %s", m[1], c.mtu, want)
	}
	return nil
}

// proc is a program running in a namespace.
type proc struct {
	cmd            *exec.Cmd
	argv           []string
	out            string // where save writes its command line and output
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
	stopped        bool // the bed ended it (its peer had failed, or time ran out)
	attempts       int  // a CM client: the runs it took (the earlier ones rejected)
}

func start(ctx context.Context, ns, exe string, args []string, out string) (*proc, error) {
	argv := append([]string{"ip", "netns", "exec", ns, exe}, args...)
	p := &proc{argv: argv, out: out, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// code is the exit status once the program has exited; -1 when a signal
// ended it.
func (p *proc) code() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// stop ends the program if it still runs (its process group: TERM, then KILL).
func (p *proc) stop() {
	if p.exited() {
		return
	}
	p.stopped = true
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitFor waits for the exit status; when the peer already failed it
// waits 5 s at most before ending the program.
func (p *proc) waitFor(ctx context.Context, peerFailed bool) int {
	var limit <-chan time.Time
	if peerFailed {
		limit = time.After(5 * time.Second)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop()
	case <-limit:
		p.stop()
	}
	return p.code()
}

// save writes the command line, the exit status and both outputs.
func (p *proc) save() {
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s\n", strings.Join(p.argv, " "))
	b.Write(p.stdout.Bytes())
	if p.stderr.Len() > 0 {
		b.WriteString("---- stderr:\n")
		b.Write(p.stderr.Bytes())
	}
	if p.exited() {
		fmt.Fprintf(&b, "---- exit status %d\n", p.cmd.ProcessState.ExitCode())
	}
	if p.attempts > 1 {
		fmt.Fprintf(&b, "---- run %d times: the earlier runs were rejected (the server did not listen yet)\n", p.attempts)
	}
	os.WriteFile(p.out, []byte(b.String()), 0o644)
}

// lastError is the line of the program's output that says why it failed.
func (p *proc) lastError() string {
	l := lastError(p.stderr.String())
	if l == "" {
		l = lastError(p.stdout.String())
	}
	if p.stopped {
		return "stopped by the bed (peer failed or time ran out): " + l
	}
	return l
}

// abort ends the run on a signal.
func (s *suite) abort() {
	if s.cancel != nil {
		s.cancel()
	}
	s.finish()
}

// finish prints the summary and the figures and writes them to the results.
func (s *suite) finish() {
	s.mu.Lock()
	rows := append([]row(nil), s.rows...)
	figures := append([]string(nil), s.figures...)
	s.mu.Unlock()
	if s.results == "" || (len(rows) == 0 && s.setupErr == nil) {
		return
	}
	var b strings.Builder
	n := map[string]int{}
	fmt.Fprintf(&b, "%-40s %-6s %7s  %s\n", "CASE", "RESULT", "TIME", "NOTE")
	for _, r := range rows {
		n[r.result]++
		note := r.note
		if len(note) > 300 {
			note = note[:300] + "..."
		}
		fmt.Fprintf(&b, "%-40s %-6s %6.1fs  %s\n", r.name, r.result, r.dur.Seconds(), note)
	}
	if s.setupErr != nil {
		fmt.Fprintf(&b, "the bed was not usable: %v\n", s.setupErr)
	}
	if len(figures) > 0 {
		writeFile(filepath.Join(s.results, "figures.txt"), strings.Join(figures, "\n")+"\n")
		b.WriteString("figures (figures.txt):\n")
		for _, f := range figures {
			b.WriteString("  " + f + "\n")
		}
	}
	fmt.Fprintf(&b, "results: %s\n", s.results)
	fmt.Fprintf(&b, "twohost: %d cases in %.0fs: %d passed, %d failed\n", len(rows), time.Since(s.start).Seconds(), n["PASS"], n["FAIL"])
	writeFile(filepath.Join(s.results, "summary.txt"), b.String())
	if !s.managed { // test/twohost/run prints it last, after bed down
		fmt.Print("\n", b.String())
	}
}

func writeFile(path, s string) { os.WriteFile(path, []byte(s), 0o644) }
