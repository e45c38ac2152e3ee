package exec

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// rsockets through softnic's librdmacm: Debian's rstream and riostream, unmodified,
// in pairs of softnic exec processes; a plain TCP echo turned into
// rsockets by Debian's librspreload.so; and rsockets misused, each call
// failing with a socket call's errno.

// rstreamDone matches the line rstream prints for a test it completed
// (rstream.c and riostream.c show_perf: name, size, transfers, iterations, total, time).
var rstreamDone = regexp.MustCompile(`(?m)^custom +\S+ +\S+ +\S+ +\S+ +\S+s `)

// TestRstream runs rstream's server and client over softnic in its
// blocking, non-blocking and asynchronous (rpoll) modes with -T v, which
// checks every byte and makes rstream fail on a difference, at sizes
// from one byte to several times the receive ring, and with small
// buffers and no inline data (the credits' descriptors then go from the
// send buffer); and riostream, whose data go by riowrite into a buffer
// the peer announced with riomap.
func TestRstream(t *testing.T) {
	needLibs(t)
	t.Parallel()
	tests := []struct {
		name, prog, args string
	}{
		{"blocking 1B", "rstream", "-T b -T v -S 1 -C 200"},
		{"blocking 1000B", "rstream", "-T b -T v -S 1000 -C 500"},
		{"blocking 64KiB", "rstream", "-T b -T v -S 65536 -C 50"},
		{"blocking 1MiB", "rstream", "-T b -T v -S 1048576 -C 8"},
		{"nonblocking 100B", "rstream", "-T n -T v -S 100 -C 500"},
		{"nonblocking 100000B", "rstream", "-T n -T v -S 100000 -C 40"},
		{"async 3000B", "rstream", "-T a -T v -S 3000 -C 300"},
		{"async 1MiB", "rstream", "-T a -T v -S 1048576 -C 8"},
		{"async blocking 64KiB", "rstream", "-T a -T b -T v -S 65536 -C 40"},
		{"small buffers no inline", "rstream", "-T b -T v -B 4096 -i 0 -S 20000 -C 40"},
		{"iterations", "rstream", "-T n -T v -S 4096 -C 10 -I 20"},
		{"rdma_getaddrinfo", "rstream", "-T r -T b -T v -S 1000 -C 100"},
		{"keepalive", "rstream", "-T b -T v -k 1 -S 4096 -C 100"},
		{"riostream blocking", "riostream", "-T b -T v -S 100000 -C 20"},
		{"riostream nonblocking", "riostream", "-T n -T v -S 4096 -C 100"},
		{"riostream async", "riostream", "-T a -T v -S 1000000 -C 10"},
		{"riostream small", "riostream", "-T a -T b -T v -S 10 -C 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			needTools(t, "rdmacm-utils", tc.prog)
			t.Parallel()
			sa, ca := cmPairAddrs()
			args := strings.Fields(tc.args)
			// The server prints its header once it listens: line-buffered,
			// it says when the client may come.
			p := cmPair{
				server: append([]string{"stdbuf", "-oL", tc.prog, "-b", sa.String()}, args...),
				client: append([]string{tc.prog, "-s", sa.String()}, args...),
				sopts:  Options{Addr: sa}, copts: Options{Addr: ca}, saddr: sa, ready: "usec/xfer",
			}
			sout, cout := p.run(t)
			for side, out := range map[string]string{"server": sout, "client": cout} {
				if !rstreamDone.MatchString(out) {
					t.Errorf("the %s did not complete the test:\n%s", side, out)
				}
			}
		})
	}
}

// TestRsocketPreload runs a TCP echo written over plain sockets, its
// server and client each under LD_PRELOAD=librspreload.so, which makes
// their sockets rsockets: 3 MB echoed and checked in chunks of growing
// size, then a shutdown read as the end of the stream by both.
func TestRsocketPreload(t *testing.T) {
	prog := cprog(t, "tcpecho")
	preload := rspreload(t)
	t.Parallel()
	sa, ca := cmPairAddrs()
	pre := []string{"env", "LD_PRELOAD=" + preload, prog}
	p := cmPair{
		server: append(pre, "server", sa.String(), "7490"),
		client: append(pre[:3:3], "client", sa.String(), "7490", "3000000"),
		sopts:  Options{Addr: sa}, copts: Options{Addr: ca}, saddr: sa, ready: "tcpecho: listening",
	}
	sout, cout := p.run(t)
	if !strings.Contains(sout, "tcpecho: echoed 3000000 bytes") || !strings.Contains(cout, "tcpecho: 3000000 bytes echoed") {
		t.Errorf("server:\n%s\nclient:\n%s", sout, cout)
	}
}

// rspreload returns the path of Debian's librspreload.so, skipping t
// when it is not installed.
func rspreload(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu/rsocket", "/usr/lib/aarch64-linux-gnu/rsocket", "/usr/lib/rsocket"} {
		if _, err := os.Stat(dir + "/librspreload.so.1"); err == nil {
			return dir + "/librspreload.so.1"
		}
	}
	t.Skip("librspreload.so is not installed (apt-get install librdmacm1)")
	return ""
}

// TestRsocketPeerDies kills the client of the TCP echo over rsockets
// (librspreload.so) in the middle of its transfer: the server ends once
// the CM says the connection is gone — waiting in poll or recv, it reads
// the end of the stream and exits 0, or, in send (the echo of what it
// just read) or recv, fails with ECONNRESET, as over TCP from a peer
// killed with data unread (a CI run met send's).
func TestRsocketPeerDies(t *testing.T) {
	prog := cprog(t, "tcpecho")
	preload := rspreload(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sa, ca := cmPairAddrs()
	s := cmStart(t, ctx, Options{Addr: sa}, "env", "LD_PRELOAD="+preload, prog, "server", sa.String(), "7491")
	waitOutput(t, ctx, s, "tcpecho: listening")
	c := cmStart(t, ctx, Options{Addr: ca}, "env", "LD_PRELOAD="+preload, prog, "client", sa.String(), "7491", "1000000000000")
	waitOutput(t, ctx, c, "tcpecho: connected")
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.done
	t0 := time.Now()
	select {
	case err := <-s.done:
		t.Logf("the server ended %v after the kill: %v", time.Since(t0).Round(time.Millisecond), err)
		out := s.out.String()
		eof := err == nil && strings.Contains(out, "tcpecho: echoed")
		reset := err != nil && (strings.Contains(out, "send: Connection reset by peer") ||
			strings.Contains(out, "recv: Connection reset by peer"))
		if !eof && !reset {
			t.Errorf("the server: %v, want exit 0 at the end of the stream, or ECONNRESET\n%s", err, out)
		}
	case <-ctx.Done():
		t.Fatalf("the server never ended:\n%s", s.out.String())
	}
}

// TestRsocketMisuse runs testdata/rsock.c: calls on descriptors that are
// not rsockets (EBADF), on an rsocket not connected (ENOTCONN) or in the
// wrong state (EINVAL, EISCONN), unsupported types (ENOTSUP), a connect
// nobody listens to (ECONNREFUSED); rpoll waiting 300 ms on a listener
// and on a connection without data, using little CPU; and one connection
// to itself: keepalives every second leaving it as it was, data,
// MSG_PEEK, MSG_DONTWAIT, rwritev, rselect and rreadv, riomap's errors,
// and the peer's close read as
// the end of the stream, POLLHUP, and ECONNRESET on a send.
func TestRsocketMisuse(t *testing.T) {
	prog := cprog(t, "rsock")
	a, _ := cmPairAddrs()
	out := runC(t, Options{Addr: a}, prog, a.String())
	if !strings.Contains(out, "rsock: ok") {
		t.Error(out)
	}
	t.Log(strings.TrimSpace(fmt.Sprint(out)))
}
