package demo

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSummaries(t *testing.T) {
	cli := []byte("  local address:  LID 0x0000, QPN 0x000011, PSN 0x60756d, GID ::ffff:127.0.0.2\n" +
		"  remote address: LID 0x0000, QPN 0x000011, PSN 0x136a0b, GID ::ffff:127.0.0.1\n" +
		"1638400 bytes in 0.04 seconds = 319.31 Mbit/sec\n200 iters in 0.04 seconds = 205.24 usec/iter\n")
	s, err := pingpongSummary(cli, nil)
	if err != nil || !strings.Contains(s, "200 SEND ping-pongs") || !strings.Contains(s, "319.31 Mbit/s") {
		t.Errorf("pingpong: got %q, %v", s, err)
	}
	if _, err := pingpongSummary(cli, []byte("invalid data in page 0\n")); err == nil {
		t.Error("invalid data: got no error")
	}
	if _, err := pingpongSummary([]byte("garbage"), nil); err == nil {
		t.Error("garbage: got no error")
	}
	bw := bwSummary("RDMA WRITEs")
	c := []byte(`{"tool":"write_bw","side":"client","bw":[{"size":65536,"iterations":2000,"bw_peak":879.43,"bw_average":255.81,"msg_rate_mpps":0.0041}],"checked":false}`)
	srv := []byte(`{"tool":"write_bw","side":"server","checked":true}`)
	s, err = bw(c, srv)
	if err != nil || !strings.Contains(s, "2000 RDMA WRITEs: 255.81 MB/s average, 879.43 MB/s peak") {
		t.Errorf("bw: got %q, %v", s, err)
	}
	if _, err := bw(c, []byte(`{"checked":false}`)); err == nil {
		t.Error("nothing checked: got no error")
	}
	if _, err := bw([]byte("x"), srv); err == nil {
		t.Error("bad JSON: got no error")
	}
	if _, err := bw(append([]byte("Warning: on stdout\n"), c...), srv); err == nil {
		t.Error("a warning before the JSON: got no error")
	}
	if _, err := bw(c, append(srv, " Failed to exchange data between server and clients\n"...)); err == nil {
		t.Error("text after the JSON: got no error")
	}
}

func TestRunReportsFailures(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), Config{Exe: "/nonexistent/softnic", A: netip.MustParseAddr("127.0.0.1"),
		B: netip.MustParseAddr("127.0.0.2")}, &out)
	if !errors.Is(err, ErrFailed) || !strings.Contains(out.String(), "4 of 4 runs failed.") {
		t.Errorf("got %v\n%s", err, out.String())
	}
}

// With GOMAXPROCS set, both processes of every step run with it; one
// half of a demo across two hosts, whose machine runs only that half,
// keeps the environment's.
func TestGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	dir := t.TempDir()
	log := filepath.Join(dir, "env")
	exe := filepath.Join(dir, "softnic")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho \"GOMAXPROCS=$GOMAXPROCS\" >> "+log+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(role Role) []string {
		os.Remove(log)
		var out strings.Builder
		err := Run(context.Background(), Config{Exe: exe, A: netip.MustParseAddr("127.0.0.1"), B: netip.MustParseAddr("127.0.0.2"),
			Role: role, Port: 30100, Timeout: 10 * time.Second, GOMAXPROCS: 1}, &out)
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("the stand-in fails every run: got %v\n%s", err, out.String())
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	// Every client, and the servers that started before their client
	// failed and the step killed them.
	both := run(RoleBoth)
	if len(both) < len(Steps) {
		t.Errorf("both halves: %d processes, want at least %d", len(both), len(Steps))
	}
	for _, l := range both {
		if l != "GOMAXPROCS=1" {
			t.Errorf("both halves: a process with %q", l)
		}
	}
	if half := run(RoleClient); len(half) != len(Steps) || half[0] != "GOMAXPROCS=" {
		t.Errorf("the clients' half: got %q, want %d processes with the environment's (none)", half, len(Steps))
	}
}

// TestHalfSummaries checks what each half of a demo across two hosts says
// with only its own side's output.
func TestHalfSummaries(t *testing.T) {
	pp := []byte("1638400 bytes in 0.04 seconds = 319.31 Mbit/sec\n200 iters in 0.04 seconds = 205.24 usec/iter\n")
	if s, err := pingpongSummary(nil, pp); err != nil || !strings.Contains(s, "200 SEND ping-pongs") {
		t.Errorf("pingpong, servers' half: got %q, %v", s, err)
	}
	if _, err := pingpongSummary(nil, []byte("invalid data in page 0\n")); err == nil {
		t.Error("pingpong, servers' half, no result lines: got no error")
	}
	bw := bwSummary("RDMA WRITEs")
	cli := []byte(`{"tool":"write_bw","side":"client","bw":[{"size":65536,"iterations":2000,"bw_peak":879.43,"bw_average":255.81,"msg_rate_mpps":0.0041}],"checked":false}`)
	for _, tt := range []struct {
		name     string
		cli, srv []byte
		want     string // "" wants an error
	}{
		{"client half, server checks", cli, nil, "2000 RDMA WRITEs: 255.81 MB/s average, 879.43 MB/s peak, 0.0041 million/s; the servers' half checks the data"},
		{"client half, checked here", []byte(`{"bw":[{"iterations":5,"bw_average":1}],"checked":true}`), nil, "every byte checked here"},
		{"client half, no result", []byte(`{"checked":true}`), nil, ""},
		{"client half, bad JSON", []byte(`x`), nil, ""},
		{"server half, checked here", nil, []byte(`{"checked":true}`), "served the RDMA WRITEs; every byte that arrived here checked out"},
		{"server half, client checks", nil, []byte(`{"checked":false}`), "the clients' half checks the data"},
		{"server half, bad JSON", nil, []byte(`{`), ""},
	} {
		s, err := bw(tt.cli, tt.srv)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: got %q, want an error", tt.name, s)
		case tt.want != "" && (err != nil || !strings.Contains(s, tt.want)):
			t.Errorf("%s: got %q, %v, want %q", tt.name, s, err, tt.want)
		}
	}
}

func TestParseRole(t *testing.T) {
	for in, want := range map[string]Role{"": RoleBoth, "both": RoleBoth, "server": RoleServer, "client": RoleClient} {
		if got, err := ParseRole(in); err != nil || got != want {
			t.Errorf("ParseRole(%q) = %v, %v, want %v", in, got, err, want)
		}
	}
	if _, err := ParseRole("servers"); err == nil {
		t.Error(`ParseRole("servers"): got no error`)
	}
}

func TestHalfReportsFailures(t *testing.T) {
	for _, r := range []Role{RoleServer, RoleClient} {
		var out strings.Builder
		err := Run(context.Background(), Config{Exe: "/nonexistent/softnic", A: netip.MustParseAddr("10.0.0.1"),
			B: netip.MustParseAddr("10.0.0.2"), Role: r}, &out)
		if !errors.Is(err, ErrFailed) || !strings.Contains(out.String(), "4 of 4 runs failed.") ||
			!strings.Contains(out.String(), "half") {
			t.Errorf("role %v: got %v\n%s", r, err, out.String())
		}
	}
}

func TestLastLine(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"softnic write_bw: the peer closed the connection\n", "softnic write_bw: the peer closed the connection"},
		{"a\nb\n", "b"},
		{"panic: runtime error: index out of range [-1]\n\ngoroutine 8 [running]:\nnic.New()\n\t/x/engine.go:184 +0x505\n",
			"panic: runtime error: index out of range [-1]"},
		{"", ""},
	} {
		if got := lastLine(tt.in); got != tt.want {
			t.Errorf("lastLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
