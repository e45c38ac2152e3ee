package exec

import (
	"bytes"
	"context"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// proc is a program started in the background.
type proc struct {
	cmd  *osexec.Cmd
	out  syncBuffer
	done chan error
}

// syncBuffer is a bytes.Buffer a program's output goroutines write while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start starts argv over softnic; wait collects it.
func start(t *testing.T, ctx context.Context, opts Options, argv ...string) *proc {
	t.Helper()
	p := &proc{cmd: command(ctx, opts, argv...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// wait waits for p and returns its output, failing t when it failed.
func (p *proc) wait(t *testing.T) string {
	t.Helper()
	if err := <-p.done; err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(p.cmd.Args, " "), err, p.out.String())
	}
	return p.out.String()
}

// freePort returns a TCP port free now, for a pair's out-of-band
// connection.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listening reports whether a TCP socket listens on port (the kernel's
// table of sockets: a test connection would be the server's one client).
func listening(port int) bool {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			if i := strings.LastIndexByte(fs[1], ':'); i >= 0 {
				if p, err := strconv.ParseUint(fs[1][i+1:], 16, 16); err == nil && int(p) == port {
					return true
				}
			}
		}
	}
	return false
}

// waitListening waits until the program s listens on TCP port.
func waitListening(t *testing.T, ctx context.Context, s *proc, port int) {
	t.Helper()
	for !listening(port) {
		select {
		case err := <-s.done:
			t.Fatalf("%s ended before it listened: %v\n%s", strings.Join(s.cmd.Args, " "), err, s.out.String())
		case <-ctx.Done():
			t.Fatalf("%s never listened on port %d", strings.Join(s.cmd.Args, " "), port)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pair runs a server and, once it listens on TCP port, a client against
// it, each over softnic at its own address, and returns their outputs.
func pair(t *testing.T, port int, server, client []string, sopts, copts Options) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := start(t, ctx, sopts, server...)
	waitListening(t, ctx, s, port)
	c := start(t, ctx, copts, client...)
	cout := c.wait(t)
	sout := s.wait(t)
	return sout, cout
}

var (
	softnicOnce sync.Once
	softnicBin  string
	softnicErr  error
)

// softnicTool returns softnic's command, built once, to run its Go tools
// (rc_pingpong, write_bw, ...) against the C programs.
func softnicTool(t *testing.T) string {
	t.Helper()
	softnicOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			softnicErr = err
			return
		}
		dir, err := os.MkdirTemp("", "softnic-bin-")
		if err != nil {
			softnicErr = err
			return
		}
		cleanup = append(cleanup, dir)
		softnicBin = filepath.Join(dir, "softnic")
		cmd := osexec.Command("go", "build", "-o", softnicBin, "./cmd/softnic")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			softnicErr = err
			softnicBin = string(out)
		}
	})
	if softnicErr != nil {
		t.Fatalf("go build ./cmd/softnic: %v\n%s", softnicErr, softnicBin)
	}
	return softnicBin
}
