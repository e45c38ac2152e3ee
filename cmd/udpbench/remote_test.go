//go:build linux

package main

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// startServer runs a -serve on 127.0.0.2 (a TCP port the kernel picks)
// for the test and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.2:0")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveOn(ln)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// setFlag sets a flag's variable for the test.
func setFlag[T any](t *testing.T, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// The raw modes against a server: what it received comes back, no more
// than was sent, from the address the peer sends from.
func TestRawModesAgainstAServer(t *testing.T) {
	addr := startServer(t)
	setFlag(t, peer, addr)
	setFlag(t, local, "127.0.0.1")
	setFlag(t, duration, 100*time.Millisecond)
	setFlag(t, size, 1040)
	for _, m := range []string{"raw/plain", "raw/gso+gro"} {
		r, err := run(m)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if r.pkts <= 0 || r.pkts > r.sent || r.bytes != r.pkts*1040 || r.elapsed < 100*time.Millisecond {
			t.Errorf("%s: received %d datagrams (%d bytes) of %d sent in %v", m, r.pkts, r.bytes, r.sent, r.elapsed)
		}
	}
	if _, err := run("link/plain"); err == nil || !strings.Contains(err.Error(), "one process") {
		t.Errorf("link/plain with -peer: %v", err)
	}
}

// The ping-pong against a server's echo, every mode.
func TestPingPongAgainstAServer(t *testing.T) {
	setFlag(t, peer, startServer(t))
	setFlag(t, local, "127.0.0.1")
	pingPongBothModes(t)
}

// A request the server does not know, or a mode it has not, is answered
// with an error, which the peer reports; so is a server that is not
// there.
func TestServerRefusesWhatItDoesNotKnow(t *testing.T) {
	addr := startServer(t)
	for _, req := range []string{"frob", "recv 2 1040", "recv 0", "recv 1 0", "recv 1 65536", "echo spin", ""} {
		if _, _, err := dialCtl(addr, req); err == nil || !strings.Contains(err.Error(), "server: ") {
			t.Errorf("%q: %v", req, err)
		}
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.2:0")))
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	if _, _, err := dialCtl(gone, "recv 0 1040"); err == nil {
		t.Errorf("dialled a server that is gone")
	}
}

// A request line from the network: parseRequest never panics, and what it
// accepts is one of the two requests with its fields in range, and reads
// back as the same request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"recv 0 1040\n", "recv 1 4112", "echo busy\n", "echo block", "echo turn", "recv 2 1", "echo", "", "recv 1 -5", "recv 1 99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		q, err := parseRequest(line)
		if err != nil {
			return
		}
		var again string
		switch {
		case q.kind == "recv" && q.size >= 1 && q.size <= 0xFFFF-28 && q.mode == "":
			again = fmt.Sprintf("recv %d %d", map[bool]int{false: 0, true: 1}[q.gro], q.size)
		case q.kind == "echo" && (q.mode == "busy" || q.mode == "block" || q.mode == "turn") && !q.gro && q.size == 0:
			again = "echo " + q.mode
		default:
			t.Fatalf("%q parsed as %+v", line, q)
		}
		if r, err := parseRequest(again); err != nil || r != q {
			t.Fatalf("%q parsed as %+v; %q as %+v, %v", line, q, again, r, err)
		}
	})
}
