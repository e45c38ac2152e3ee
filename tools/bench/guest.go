package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/softnic/softnic/tools/perftest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// The guest mode (scripts/bench --guests): the same perftest runs on two
// identical 1-vCPU qemu guests of the interop bed (test/interop), rxe ↔
// rxe with perftest's ib_* tools and, with rxe removed from both,
// softnic ↔ softnic with the look-alikes, so that softnic is compared
// with the kernel's Soft-RoCE on the same (emulated) CPUs and network.
// The two run each test back to back (rxe is removed before softnic's
// run and added again before rxe's next, half a second each): the
// guests' speed drifts by up to 2× over minutes, and a whole pass of one
// stack before the other's would credit the drift to one of them.
// softnic's write_lat runs a second time with --busy-poll on both sides,
// a mode rxe does not have: that row compares it with rxe's one write_lat.

// GuestNames are the two guests the mode boots: the server runs on the
// first, the client on the second.
var GuestNames = [2]string{"bench-a", "bench-b"}

// GuestConfig says how to run the guest mode.
type GuestConfig struct {
	// Bed is the interop bed's script, test/interop/bed.
	Bed string
	// Softnic is a statically linked softnic (CGO_ENABLED=0): the guests
	// have no Go toolchain and only the libraries rdma-core needs.
	Softnic string
	// UDPBench is a statically linked cmd/udpbench for the floors
	// between the guests; empty: no floors.
	UDPBench string
	// State is the bed's INTEROP_STATE, under which each guest's 9p
	// share is (guests/NAME/share, /host in the guest).
	State string
	// Results, when set, is a directory that receives every tool's
	// output, as the tools printed it.
	Results string
	// Quick runs fewer iterations: a smoke run.
	Quick bool
	// Rounds is how many times the tests run, each time rxe's and
	// softnic's back to back (0: once). The table shows each figure's
	// median over the rounds and the median of the rounds' ratios.
	Rounds int
	// Log receives progress lines.
	Log io.Writer
}

// GuestTest is one measurement of the guest mode: the tool (softnic's
// name; rxe's is "ib_" + Tool) and the arguments both pairs run it with,
// or only softnic's when SoftnicOnly (a softnic option rxe's perftest
// does not have).
type GuestTest struct {
	Tool        string   `json:"tool"`
	Args        []string `json:"args"`
	SoftnicOnly bool     `json:"softnic_only,omitempty"`
}

// GuestPlanFor returns the guest mode's tests, by row name. A qemu TCG
// guest moves a few thousand RoCE packets a second (test/interop/README.md),
// so the guest mode runs far fewer iterations than the native one, the
// same for both pairs, so that a round takes minutes (docs/performance.md,
// "bench.GuestPlanFor: the guests' iteration counts").
func GuestPlanFor(quick bool) map[string]GuestTest {
	bw, msgs, lat := "5000", "50000", "2000"
	if quick {
		bw, msgs, lat = "50", "1000", "100"
	}
	return map[string]GuestTest{
		GuestRowWriteBW: {Tool: "write_bw", Args: []string{"-s", "65536", "-n", bw}},
		GuestRowReadBW:  {Tool: "read_bw", Args: []string{"-s", "65536", "-n", bw}},
		GuestRowSendBW:  {Tool: "send_bw", Args: []string{"-s", "64", "-n", msgs}},
		GuestRowLatTyp:  {Tool: "write_lat", Args: []string{"-s", "8", "-n", lat}},
		GuestRowLatBusy: {Tool: "write_lat", Args: []string{"-s", "8", "-n", lat, "--busy-poll"}, SoftnicOnly: true},
	}
}

// guestOrder is the order the tests run in.
var guestOrder = []string{GuestRowWriteBW, GuestRowReadBW, GuestRowSendBW, GuestRowLatTyp, GuestRowLatBusy}

// Guest is what the mode checked about one guest.
type Guest struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	// CPUs is the number of processors the guest's kernel sees.
	CPUs int `json:"nproc"`
	// MemKiB is the guest's MemTotal (/proc/meminfo), KiB.
	MemKiB int `json:"mem_total_kib"`
	// Kernel is the guest's uname -r.
	Kernel string `json:"kernel"`
	// Accel is qemu's accelerator ("tcg,thread=multi" or "kvm").
	Accel string `json:"accel"`
}

// Pair is what one pair of guests measured.
type Pair struct {
	// Results are the clients' results by row name (GuestRow*), the
	// first round's; a test that failed in every round has none and an
	// entry in Errors.
	Results map[string]perftest.Result
	// Rounds are every round's runs by row name, in the order the rounds
	// ran, failed ones included; nil when there was one round (Results).
	Rounds map[string][]Round
	Errors map[string]string
	// Seconds is the wall time of the pair's tests.
	Seconds float64
}

// Round is one round's run of a test: its result, or why it has none.
type Round struct {
	N      int // the round, from 1
	Result *perftest.Result
	Err    string
}

// GuestMeasurements are what one guest-mode run measured.
type GuestMeasurements struct {
	Machine Machine
	Guests  [2]Guest
	Plan    map[string]GuestTest
	// RXE is rxe ↔ rxe, Softnic softnic ↔ softnic.
	RXE, Softnic Pair
	// Floor is what udpbench measured between the guests, between the
	// two pairs; nil when it did not run (no GuestConfig.UDPBench).
	Floor *GuestFloor
	// Err is why the run stopped before it measured everything (the bed
	// did not come up, the guests differ, rxe could not be removed).
	Err string
	// Quick marks a --quick run.
	Quick bool
	// Rounds is how many rounds ran (GuestConfig.Rounds; 1 at least).
	Rounds int
	// BedUpSeconds is the time to boot both guests; TotalSeconds the whole
	// run's, bed down included.
	BedUpSeconds, TotalSeconds float64
}

// guestRun is one run of the guest mode.
type guestRun struct {
	c     GuestConfig
	envs  [2]map[string]string
	port  int
	round int // the round running, from 1
}

// RunGuests brings the interop bed up with two guests, measures the UDP
// floor between them, then each test with rxe ↔ rxe and, rxe removed,
// softnic ↔ softnic, and takes the bed down again, whatever happened. It
// refuses to touch a bed that is up already: that bed is someone else's.
func RunGuests(ctx context.Context, c GuestConfig) (m GuestMeasurements) {
	t0 := time.Now()
	g := &guestRun{c: c, port: 18515}
	m = GuestMeasurements{Machine: ReadMachine(), Plan: GuestPlanFor(c.Quick), Quick: c.Quick, Rounds: max(c.Rounds, 1)}
	if c.Results != "" {
		if err := os.MkdirAll(c.Results, 0o755); err != nil {
			m.Err = err.Error()
			return m
		}
	}
	out, err := g.bed(ctx, "status")
	if err != nil {
		m.Err = err.Error()
		return m
	}
	if strings.Contains(out, ": present") {
		m.Err = "the interop bed is up already (another run is using it); not touching it:\n" + strings.TrimSpace(out)
		return m
	}
	defer func() {
		// a fresh context: the run's may be cancelled, the bed must go
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		g.logf("bed down")
		if _, err := g.bed(dctx, "down"); err != nil {
			g.logf("bed down: %v (run %s down)", err, c.Bed)
		}
		m.Machine.LoadAfter = ReadLoad()
		m.TotalSeconds = time.Since(t0).Seconds()
	}()
	if err := g.up(ctx, &m); err != nil {
		m.Err = err.Error()
		return m
	}

	for i := range GuestNames {
		if err := g.share(i, c.Softnic, "softnic"); err != nil {
			m.Err = err.Error()
			return m
		}
	}
	if c.UDPBench != "" {
		g.logf("UDP floor: udpbench between the guests")
		pmtu := 0 // floorSize's default
		if mtu, err := strconv.Atoi(g.envs[0]["MTU"]); err == nil {
			pmtu = verbs.ActiveMTU(mtu).Bytes() // what rxe and softnic pick on eth0
		}
		m.Floor = g.floor(ctx, pmtu)
	}
	m.RXE = Pair{Results: map[string]perftest.Result{}, Errors: map[string]string{}}
	m.Softnic = Pair{Results: map[string]perftest.Result{}, Errors: map[string]string{}}
	if m.Rounds > 1 {
		m.RXE.Rounds, m.Softnic.Rounds = map[string][]Round{}, map[string][]Round{}
	}
	rxe := true // rxe0 is in both guests (the bed adds it at boot)
	for round := 1; round <= m.Rounds; round++ {
		if m.Rounds > 1 {
			g.logf("round %d of %d", round, m.Rounds)
		}
		g.round = round
		for _, row := range guestOrder {
			test, ok := m.Plan[row]
			if !ok {
				continue
			}
			if !test.SoftnicOnly {
				if !rxe {
					if err := g.addRXE(ctx); err != nil {
						m.Err = err.Error()
						return m
					}
					rxe = true
				}
				g.run(ctx, &m.RXE, row, test, g.rxeCommand)
			}
			if rxe {
				if err := g.removeRXE(ctx); err != nil {
					m.Err = err.Error()
					return m
				}
				rxe = false
			}
			g.run(ctx, &m.Softnic, row, test, g.softnicCommand)
		}
	}
	return m
}

// GuestFloor is the guests' floor: what plain UDP between them does,
// measured by cmd/udpbench (-serve in the first guest, -peer in the
// second): the raw modes with datagrams of a full packet at the pairs'
// path MTU, and the ping-pong.
type GuestFloor struct {
	// Size is the datagrams' UDP payload, bytes: a RoCEv2 packet with a
	// path-MTU payload (BTH, payload, ICRC).
	Size     int        `json:"datagram_bytes"`
	UDP      []UDP      `json:"udp"`
	PingPong []PingPong `json:"pingpong"`
	// Args are the client's arguments.
	Args []string `json:"args"`
	// Error is why it measured nothing; empty when it did.
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

// floorSize is the floor's datagram at path MTU mtu (0: 1024, what rxe
// picks on a guest's eth0 of MTU 1500): a packet with a full payload.
func floorSize(mtu int) int {
	if mtu == 0 {
		mtu = 1024
	}
	return mtu + wire.BTHLen + wire.ICRCLen
}

// floorArgs are the udpbench client's arguments between the guests,
// after -peer and -local: size-byte datagrams, raw/plain and raw/gso+gro
// (one run each), and as many ping-pong round trips as write_lat's
// iterations.
func floorArgs(size int, quick bool) []string {
	d, rounds := "3s", "2000"
	if quick {
		d, rounds = "1s", "100"
	}
	return []string{"-size", strconv.Itoa(size), "-runs", "1", "-d", d,
		"-modes", "raw/plain,raw/gso+gro", "-pingpong", rounds}
}

// floor runs udpbench between the guests: -serve in the first, the
// client in the second.
func (g *guestRun) floor(ctx context.Context, mtu int) *GuestFloor {
	t := time.Now()
	f := &GuestFloor{Size: floorSize(mtu)}
	f.Args = floorArgs(f.Size, g.c.Quick)
	defer func() { f.Seconds = time.Since(t).Seconds() }()
	for i := range GuestNames {
		if err := g.share(i, g.c.UDPBench, "udpbench"); err != nil {
			f.Error = err.Error()
			return f
		}
	}
	port := g.port
	g.port++
	srv := fmt.Sprintf("%s:%d", g.envs[0]["GUEST_IP"], port)
	id, err := g.bed(ctx, "serve", GuestNames[0], "-p", strconv.Itoa(port), "-t", "60", "--", "/host/udpbench -serve "+srv)
	if err != nil {
		f.Error = "server: " + err.Error()
		return f
	}
	id = strings.TrimSpace(id)
	cmd := strings.Join(append([]string{"/host/udpbench", "-peer", srv, "-local", g.envs[1]["GUEST_IP"]}, f.Args...), " ")
	g.logf("  %s", cmd)
	out, err := g.bed(ctx, "exec", GuestNames[1], "-t", "300", "--", cmd)
	g.bed(ctx, "jobkill", GuestNames[0], id)
	srvOut, _ := g.bed(ctx, "joblog", GuestNames[0], id)
	g.save(fmt.Sprintf("%d-udpbench-server.txt", port), srvOut)
	g.save(fmt.Sprintf("%d-udpbench-client.txt", port), out)
	if err != nil {
		f.Error = "client: " + err.Error() + lastLine(out)
		return f
	}
	if f.UDP, _, err = ParseUDPBench([]byte(out)); err == nil {
		f.PingPong, err = ParsePingPong([]byte(out))
	}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

func (g *guestRun) logf(format string, a ...any) {
	if g.c.Log != nil {
		fmt.Fprintf(g.c.Log, "bench: "+format+"\n", a...)
	}
}

// up boots both guests and checks that they are alike: one CPU each, the
// same memory and kernel.
func (g *guestRun) up(ctx context.Context, m *GuestMeasurements) error {
	t := time.Now()
	for i, name := range GuestNames {
		verb := "start"
		if i == 0 {
			verb = "up" // namespace and bridge too
		}
		g.logf("bed %s %s", verb, name)
		if _, err := g.bed(ctx, verb, name); err != nil {
			return err
		}
	}
	m.BedUpSeconds = time.Since(t).Seconds()
	for i, name := range GuestNames {
		out, err := g.bed(ctx, "env", name)
		if err != nil {
			return err
		}
		g.envs[i] = ParseEnv(out)
		facts, err := g.bed(ctx, "exec", name, "-t", "60", "--",
			"grep -c ^processor /proc/cpuinfo; sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/\\1/p' /proc/meminfo; uname -r")
		if err != nil {
			return err
		}
		gu, err := ParseGuestFacts(facts)
		if err != nil {
			return fmt.Errorf("guest %s: %w", name, err)
		}
		gu.Name, gu.IP, gu.Accel = name, g.envs[i]["GUEST_IP"], g.envs[i]["ACCEL"]
		m.Guests[i] = gu
	}
	return CheckGuests(m.Guests)
}

// ParseEnv reads "bed env"'s KEY=VALUE lines.
func ParseEnv(out string) map[string]string {
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// ParseGuestFacts reads the guest's processor count, MemTotal (KiB) and
// kernel release, one a line.
func ParseGuestFacts(out string) (Guest, error) {
	f := strings.Fields(out)
	if len(f) != 3 {
		return Guest{}, fmt.Errorf("facts %q: want processors, MemTotal and kernel", out)
	}
	cpus, err1 := strconv.Atoi(f[0])
	mem, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return Guest{}, fmt.Errorf("facts %q: %v", out, err)
	}
	return Guest{CPUs: cpus, MemKiB: mem, Kernel: f[2]}, nil
}

// CheckGuests fails unless the guests are identical where it matters: one
// vCPU each (the comparison is of one emulated CPU's worth of work), the
// same memory, kernel and accelerator.
func CheckGuests(gs [2]Guest) error {
	for _, g := range gs {
		if g.CPUs != 1 {
			return fmt.Errorf("guest %s has %d CPUs, want 1", g.Name, g.CPUs)
		}
	}
	a, b := gs[0], gs[1]
	if a.MemKiB != b.MemKiB || a.Kernel != b.Kernel || a.Accel != b.Accel {
		return fmt.Errorf("the guests differ: %s has %d KiB, Linux %s, %s; %s has %d KiB, Linux %s, %s",
			a.Name, a.MemKiB, a.Kernel, a.Accel, b.Name, b.MemKiB, b.Kernel, b.Accel)
	}
	return nil
}

// addRXE loads rdma_rxe and adds rxe0 on eth0 again in both guests, as
// the guest's init does at boot, and waits (in the guest, up to 10 s)
// until the port is ACTIVE and its IPv4 GID is back at the index the bed
// reported (GUEST_GID_INDEX), which rxeCommand passes to perftest.
func (g *guestRun) addRXE(ctx context.Context) error {
	for i, name := range GuestNames {
		g.logf("%s: modprobe rdma_rxe; rdma link add rxe0", name)
		ip, err := netip.ParseAddr(g.envs[i]["GUEST_IP"])
		if err != nil || !ip.Is4() {
			return fmt.Errorf("guest %s: IPv4 address %q", name, g.envs[i]["GUEST_IP"])
		}
		a := ip.As4()
		gid := fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a[0], a[1], a[2], a[3])
		port := "/sys/class/infiniband/rxe0/ports/1"
		out, err := g.bed(ctx, "exec", name, "-t", "60", "--",
			"modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0 && i=0; "+
				"while [ $i -lt 100 ]; do g=; s=; read -r g <"+port+"/gids/"+g.envs[i]["GUEST_GID_INDEX"]+" 2>/dev/null; "+
				"read -r s <"+port+"/state 2>/dev/null; [ \"$g\" = "+gid+" ] && [ \"$s\" = '4: ACTIVE' ] && exit 0; "+
				"sleep 0.1; i=$((i+1)); done; echo \"GID $g, port $s\"; exit 1")
		if err != nil {
			return fmt.Errorf("adding rxe to %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// removeRXE deletes rxe0 and unloads rdma_rxe in both guests, and checks
// that UDP port 4791 is free: the module's tunnel socket holds the port
// for as long as it is loaded (Debian 12's 6.1 opens it at module load,
// not per device), and softnic binds it.
func (g *guestRun) removeRXE(ctx context.Context) error {
	for _, name := range GuestNames {
		g.logf("%s: rdma link delete rxe0; rmmod rdma_rxe", name)
		out, err := g.bed(ctx, "exec", name, "-t", "60", "--",
			"rdma link delete rxe0 && rmmod rdma_rxe && ! netstat -lun | grep -q ':4791 '")
		if err != nil {
			return fmt.Errorf("removing rxe from %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// share puts a copy of src, executable, into guest i's 9p share as name.
func (g *guestRun) share(i int, src, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(g.c.State, "guests", GuestNames[i], "share", name)
	if err := os.WriteFile(dst+".tmp", data, 0o755); err != nil {
		return fmt.Errorf("into guest %s's share: %w", GuestNames[i], err)
	}
	return os.Rename(dst+".tmp", dst)
}

// side is one side's command line in its guest and where its result is.
type side struct {
	cmd string
	// json is the file in the guest's share that the command writes its
	// --json result to; empty when the result is the text table of the
	// command's output.
	json string
}

// rxeCommand returns perftest's command lines for the test on rxe: the
// guest's IPv4 GID, -F against the CPU-frequency warning.
func (g *guestRun) rxeCommand(t GuestTest, port int) [2]side {
	var s [2]side
	for i := range s {
		args := append([]string{"ib_" + t.Tool, "-d", "rxe0", "-x", g.envs[i]["GUEST_GID_INDEX"], "-F", "-p", strconv.Itoa(port)}, t.Args...)
		if i == 1 {
			args = append(args, g.envs[0]["GUEST_IP"])
		}
		s[i].cmd = strings.Join(args, " ")
	}
	return s
}

// softnicCommand returns the look-alike's command lines for the test:
// softnic's NIC on the guest's address, --json into the share.
func (g *guestRun) softnicCommand(t GuestTest, port int) [2]side {
	var s [2]side
	for i := range s {
		s[i].json = fmt.Sprintf("%s-%d.json", t.Tool, port)
		args := append([]string{"/host/softnic", t.Tool, "--json", "--addr", g.envs[i]["GUEST_IP"], "-F", "-p", strconv.Itoa(port), "--timeout", "60s"}, t.Args...)
		if i == 0 {
			args = append(args, "--accept-timeout", "120s")
		} else {
			args = append(args, "--connect-timeout", "60s", g.envs[0]["GUEST_IP"])
		}
		s[i].cmd = strings.Join(args, " ") + " >/host/" + s[i].json
	}
	return s
}

// run runs one test between the two guests, the server in the first,
// the client in the second, and adds its result (or error) and time to p.
func (g *guestRun) run(ctx context.Context, p *Pair, row string, test GuestTest, cmds func(GuestTest, int) [2]side) {
	t := time.Now()
	defer func() { p.Seconds += time.Since(t).Seconds() }()
	if ctx.Err() != nil {
		p.Errors[row] = ctx.Err().Error()
		return
	}
	port := g.port
	g.port++
	s := cmds(test, port)
	g.logf("  %s", s[1].cmd)
	r, err := g.test(ctx, test, port, s)
	if p.Rounds != nil {
		rd := Round{N: g.round}
		if err != nil {
			rd.Err = err.Error()
		} else {
			rd.Result = &r
		}
		p.Rounds[row] = append(p.Rounds[row], rd)
	}
	if err != nil {
		g.logf("  %s: %v", row, err)
		if _, ok := p.Results[row]; !ok {
			p.Errors[row] = err.Error()
		}
		return
	}
	if _, ok := p.Results[row]; !ok {
		p.Results[row] = r
		delete(p.Errors, row)
	}
}

// test runs one test: the server as a background job in the first guest,
// once it listens on the TCP port, the client in the second; it returns
// the client's result.
func (g *guestRun) test(ctx context.Context, t GuestTest, port int, s [2]side) (perftest.Result, error) {
	a, b := GuestNames[0], GuestNames[1]
	id, err := g.bed(ctx, "serve", a, "-p", strconv.Itoa(port), "-t", "120", "--", s[0].cmd)
	if err != nil {
		return perftest.Result{}, fmt.Errorf("server: %w", err)
	}
	id = strings.TrimSpace(id)
	cliOut, cliErr := g.bed(ctx, "exec", b, "-t", "600", "--", s[1].cmd)
	if cliErr != nil {
		g.bed(ctx, "jobkill", a, id)
	}
	srvOut, srvErr := g.bed(ctx, "jobwait", a, id, "-t", "120")
	stem := fmt.Sprintf("%d-%s", port, t.Tool)
	if s[1].json == "" {
		g.save(stem+"-rxe-server.txt", srvOut)
		g.save(stem+"-rxe-client.txt", cliOut)
	} else {
		g.save(stem+"-softnic-server.log", srvOut)
		g.save(stem+"-softnic-client.log", cliOut)
	}
	if cliErr != nil {
		return perftest.Result{}, fmt.Errorf("client: %w%s", cliErr, lastLine(cliOut))
	}
	if srvErr != nil {
		return perftest.Result{}, fmt.Errorf("server: %w%s", srvErr, lastLine(srvOut))
	}
	if s[1].json == "" {
		return perftest.ParseText([]byte(cliOut))
	}
	js, err := os.ReadFile(filepath.Join(g.c.State, "guests", b, "share", s[1].json))
	if err != nil {
		return perftest.Result{}, err
	}
	g.save(stem+"-softnic-client.json", string(js))
	if srv, err := os.ReadFile(filepath.Join(g.c.State, "guests", a, "share", s[0].json)); err == nil {
		g.save(stem+"-softnic-server.json", string(srv))
	}
	return ParseResult(js)
}

func lastLine(out string) string {
	out = strings.TrimSpace(out)
	if out == "" {
		return ""
	}
	return ": " + out[strings.LastIndex(out, "\n")+1:]
}

// save keeps a tool's output in the results directory, when there is one.
func (g *guestRun) save(name, out string) {
	if g.c.Results == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(g.c.Results, name), []byte(out), 0o644); err != nil {
		g.logf("%v", err)
	}
}

// bed runs the bed script and returns its standard output; a failure
// carries the last line of its standard error (the bed's own log lines
// go there). The script runs in a process group of its own that a
// cancelled ctx ends, so that none of its waits outlives the run.
func (g *guestRun) bed(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, g.c.Bed, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if g.c.State != "" {
		cmd.Env = append(os.Environ(), "INTEROP_STATE="+g.c.State)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("bed %s: %w%s", args[0], err, lastLine(errOut.String()))
	}
	return out.String(), nil
}
