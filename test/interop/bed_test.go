//go:build interop

package interop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bed drives the test-bed script (./bed) for one guest.
type bed struct {
	script string
	guest  string
	env    bedEnv
	mtu    int // the bridge MTU now
	netem  string
}

// bedEnv is what "bed env" prints about the running bed.
type bedEnv struct {
	NetNS, Bridge     string
	HostIP, HostIP6   netip.Addr
	GuestIP, GuestIP6 netip.Addr
	GID4, GID6        int // rxe0's GID indexes of GuestIP and GuestIP6
	Accel             string
}

// hostAddr and guestAddr return the two ends' addresses of family v6.
func (e *bedEnv) hostAddr(v6 bool) netip.Addr {
	if v6 {
		return e.HostIP6
	}
	return e.HostIP
}

func (e *bedEnv) guestAddr(v6 bool) netip.Addr {
	if v6 {
		return e.GuestIP6
	}
	return e.GuestIP
}

func (e *bedEnv) guestGID(v6 bool) int {
	if v6 {
		return e.GID6
	}
	return e.GID4
}

// command returns a command in its own process group that ctx ends with
// SIGTERM to the whole group, then SIGKILL to the leader 5 s later.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs the bed script and returns its standard output; a failure's
// error carries the standard error.
func (b *bed) run(ctx context.Context, args ...string) (string, error) {
	cmd := command(ctx, b.script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("bed %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// up brings the bed up (idempotent) and reads its settings.
func (b *bed) up(ctx context.Context) error {
	if _, err := b.run(ctx, "up", b.guest); err != nil {
		return err
	}
	out, err := b.run(ctx, "env", b.guest)
	if err != nil {
		return err
	}
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	var errs []error
	addr := func(k string) netip.Addr {
		a, err := netip.ParseAddr(kv[k])
		errs = append(errs, err)
		return a
	}
	num := func(k string) int {
		n, err := strconv.Atoi(kv[k])
		errs = append(errs, err)
		return n
	}
	b.env = bedEnv{
		NetNS: kv["NETNS"], Bridge: kv["BRIDGE"], Accel: kv["ACCEL"],
		HostIP: addr("HOST_IP"), HostIP6: addr("HOST_IP6"),
		GuestIP: addr("GUEST_IP"), GuestIP6: addr("GUEST_IP6"),
		GID4: num("GUEST_GID_INDEX"), GID6: num("GUEST_GID6_INDEX"),
	}
	b.mtu = num("MTU")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bed env: %w\n%s", err, out)
	}
	return nil
}

// share puts a copy of the host file src, executable, into the guest's 9p
// share as name: the guest sees it as /host/name.
func (b *bed) share(src, name string) error {
	state := os.Getenv("INTEROP_STATE")
	if state == "" {
		state = "/run/softnic-interop" // lib.sh's default
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(state, "guests", b.guest, "share", name)
	if err := os.WriteFile(dst+".tmp", data, 0o755); err != nil {
		return fmt.Errorf("into the guest's share: %w", err)
	}
	return os.Rename(dst+".tmp", dst)
}

func (b *bed) down(ctx context.Context) error {
	_, err := b.run(ctx, "down")
	return err
}

// setMTU sets the bridge, tap and guest MTU and checks the rxe active MTU
// that follows from it (1500: 1024, 9000: 4096).
func (b *bed) setMTU(ctx context.Context, mtu, wantActive int) error {
	if b.mtu == mtu {
		return nil
	}
	out, err := b.run(ctx, "mtu", strconv.Itoa(mtu))
	if err != nil {
		return err
	}
	b.mtu = mtu
	if !strings.Contains(out, fmt.Sprintf("active_mtu=%d", wantActive)) {
		return fmt.Errorf("bed mtu %d: rxe0 reports %q, want active_mtu=%d", mtu, strings.TrimSpace(out), wantActive)
	}
	return nil
}

// setNetem impairs RoCE traffic to and from the guest ("" or "off": none).
func (b *bed) setNetem(ctx context.Context, spec string) error {
	if spec == "" {
		spec = "off"
	}
	if spec == b.netem {
		return nil
	}
	b.netem = "" // unknown until it succeeds
	if _, err := b.run(ctx, append([]string{"netem", b.guest}, strings.Fields(spec)...)...); err != nil {
		return err
	}
	b.netem = spec
	return nil
}

// setCMFault impairs the CM MADs of one message type (bed cmfault: "REQ
// drop", "DREQ dup", ...), replacing any netem. It is set afresh for every
// case, so that each starts with its own first message to lose.
func (b *bed) setCMFault(ctx context.Context, fault string) error {
	b.netem = "" // unknown until it succeeds
	if _, err := b.run(ctx, append([]string{"cmfault", b.guest}, strings.Fields(fault)...)...); err != nil {
		return err
	}
	b.netem = "cmfault " + fault
	return nil
}

// cmFaultHits returns how many MADs the bed's cmfault dropped (gact's
// "dropped" counters) and passed through netem (duplicated: its qdiscs'
// "Sent" packets), from bed cmfault-stats.
func (b *bed) cmFaultHits(ctx context.Context) (dropped, netemSent int, err error) {
	out, err := b.run(ctx, "cmfault-stats", b.guest)
	if err != nil {
		return 0, 0, err
	}
	gact := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "filter "):
			gact = false
		case strings.Contains(l, "gact action drop"):
			gact = true
		case strings.HasPrefix(l, "qdisc netem"):
			gact = false
		case strings.HasPrefix(l, "Sent "):
			var bytes, pkts, drops int
			fmt.Sscanf(l, "Sent %d bytes %d pkt (dropped %d", &bytes, &pkts, &drops)
			if gact {
				dropped += drops
			} else {
				netemSent += pkts
			}
		}
	}
	return dropped, netemSent, nil
}

// guestExec runs cmd in the guest for at most timeout and returns its
// output and exit code (124: timed out and killed).
func (b *bed) guestExec(ctx context.Context, timeout time.Duration, cmd string) (string, int, error) {
	c := command(ctx, b.script, "exec", b.guest, "-t", secs(timeout), "--", cmd)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, nil
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), -1, err
}

// serve starts cmd in the guest and returns its job id once the guest
// listens on TCP port.
func (b *bed) serve(ctx context.Context, port int, cmd string) (string, error) {
	out, err := b.run(ctx, "serve", b.guest, "-p", strconv.Itoa(port), "-t", "30", "--", cmd)
	return strings.TrimSpace(out), err
}

// serveUntil starts cmd in the guest and waits until the guest shell
// condition cond holds (bed serve -u): the RDMA CM tools listen on no TCP
// port; $JOBOUT in cond is the job's output file.
func (b *bed) serveUntil(ctx context.Context, cond, cmd string) (string, error) {
	out, err := b.run(ctx, "serve", b.guest, "-u", cond, "-t", "30", "--", cmd)
	return strings.TrimSpace(out), err
}

// jobWait waits at most timeout for a served job and returns its output and
// exit code (124: timed out and killed).
func (b *bed) jobWait(ctx context.Context, id string, timeout time.Duration) (string, int, error) {
	c := command(ctx, b.script, "jobwait", b.guest, id, "-t", secs(timeout))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, nil
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), -1, err
}

func (b *bed) jobKill(ctx context.Context, id string) {
	b.run(ctx, "jobkill", b.guest, id)
}

func (b *bed) captureStart(ctx context.Context, file string) error {
	_, err := b.run(ctx, "capture-start", file)
	return err
}

// captureStop stops a capture and fails when tcpdump lost packets: then
// not every packet of the run could be checked.
func (b *bed) captureStop(ctx context.Context, file string) error {
	out, err := b.run(ctx, "capture-stop", file)
	if err != nil {
		return err
	}
	var captured, received, dropped int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "captured=%d received=%d dropped=%d", &captured, &received, &dropped); err != nil {
		return fmt.Errorf("capture-stop: %q: %w", out, err)
	}
	if dropped > 0 || captured < received {
		return fmt.Errorf("capture incomplete: tcpdump captured %d of %d packets (%d dropped by the kernel)", captured, received, dropped)
	}
	return nil
}

func secs(d time.Duration) string { return strconv.Itoa(int((d + time.Second - 1) / time.Second)) }

// proc is a host program run in the bed's namespace, its output going to a file.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startInNetns starts name args... inside the namespace ns with ip netns
// exec (which execs the program, so the PID is the program's).
func startInNetns(ctx context.Context, ns, outFile, name string, args ...string) (*proc, error) {
	f, err := os.Create(outFile)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "$ ip netns exec %s %s %s\n", ns, name, strings.Join(args, " "))
	cmd := command(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the program has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the program and returns its exit code (-1: killed or
// not run).
func (p *proc) wait() int {
	<-p.done
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// waitListen waits until the program listens on TCP port (read from its
// own /proc/PID/net, which shows its namespace's sockets), or has exited.
func (p *proc) waitListen(ctx context.Context, port int) error {
	want := fmt.Sprintf(":%04X ", port)
	for {
		for _, f := range []string{"tcp", "tcp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.cmd.Process.Pid, f))
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				fs := strings.Fields(sc.Text())
				// sl local_address rem_address st ...; st 0A is LISTEN
				if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
					return nil
				}
			}
		}
		if p.exited() {
			return fmt.Errorf("exited (code %d) before listening on TCP %d", p.wait(), port)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening on TCP %d: %w", port, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitRoCE waits until the program has bound UDP port 4791 (its NIC is up;
// read from its own /proc/PID/net), or has exited, then settle longer: an
// RDMA CM server listens on no TCP port, and binds its CM listener right
// after its NIC comes up.
func (p *proc) waitRoCE(ctx context.Context, settle time.Duration) error {
	want := fmt.Sprintf(":%04X ", 4791)
	for {
		for _, f := range []string{"udp", "udp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.cmd.Process.Pid, f))
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if fs := strings.Fields(sc.Text()); len(fs) > 1 && strings.HasSuffix(fs[1]+" ", want) {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(settle):
					}
					if p.exited() {
						return fmt.Errorf("exited (code %d) after binding UDP 4791", p.wait())
					}
					return nil
				}
			}
		}
		if p.exited() {
			return fmt.Errorf("exited (code %d) before binding UDP 4791", p.wait())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no UDP 4791 socket: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// inNetns runs f on an OS thread switched into the namespace ns: sockets f
// creates belong to ns and keep working after the thread switches back.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := setns(target); err != nil {
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := f()
	if err := setns(self); err != nil {
		// the thread is in the wrong namespace: let it die with the goroutine
		panic(fmt.Sprintf("cannot return to the test's network namespace: %v", err))
	}
	return ferr
}

// setnsSyscall is setns(2)'s number; package syscall does not name it.
var setnsSyscall = map[string]uintptr{"amd64": 308, "arm64": 268, "386": 346, "riscv64": 268}

func setns(f *os.File) error {
	nr, ok := setnsSyscall[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("setns: unknown on %s", runtime.GOARCH)
	}
	if _, _, e := syscall.Syscall(nr, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		return e
	}
	return nil
}
