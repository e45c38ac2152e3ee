//go:build interop

package interop

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestRpingLine: rping -v's data, as rxe's rping printed it in the bed.
func TestRpingLine(t *testing.T) {
	for _, c := range []struct {
		i, size int
		want    string
	}{
		{0, 64, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"},
		{1, 64, "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs"},
		{9, 64, "rdma-ping-9: JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"},
	} {
		if got := rpingLine(c.i, c.size); got != c.want {
			t.Errorf("rpingLine(%d, %d) = %q, want %q", c.i, c.size, got, c.want)
		}
	}
	// the start wraps after 'z' (58 characters from 'A')
	if got := rpingLine(58, 20); got != "rdma-ping-58: ABCDE" {
		t.Errorf("rpingLine(58, 20) = %q", got)
	}
}

// TestCMCases: the CM rows have unique names, both roles, a bound, and
// command lines of the tools' own options.
func TestCMCases(t *testing.T) {
	seen := map[string]bool{}
	n := 0
	for _, c := range matrix(false) {
		if seen[c.name()] {
			t.Errorf("duplicate case %s", c.name())
		}
		seen[c.name()] = true
		if !c.usesCM() {
			continue
		}
		n++
		if c.timeout <= 0 || c.iters <= 0 {
			t.Errorf("%s: timeout %v iters %d", c.name(), c.timeout, c.iters)
		}
		srv, cli := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.3")
		if c.kind == rdmaCM {
			t.Logf("%s:\n  %s %s\n  %s %s", c.name(), c.cmTool(true), strings.Join(c.cmArgs(true, srv, cli, 19000), " "),
				c.cmTool(false), strings.Join(c.cmArgs(false, cli, srv, 19000), " "))
		}
	}
	if n < 30 {
		t.Errorf("%d CM cases", n)
	}
	for _, name := range []string{"rping-v4-mtu1024-64B-sn_server", "mckey-v4-mtu1024-100B-sn_sender",
		"rdma_server-v6-mtu1024-16B-sn_client", "write_bw-v4-mtu1024-4096B-sn_server-rdma_cm",
		"rping-v4-mtu1024-64B-sn_client-req_lost", "ucmatose-v4-mtu1024-100B-sn_server-2conn-dreq_lost",
		"rping-v4-mtu1024-64B-sn_server-exec", "ucmatose-v4-mtu1024-100B-sn_client-2conn-exec",
		"write_bw-v4-mtu1024-4096B-sn_server-rdma_cm-exec"} {
		if !seen[name] {
			t.Errorf("no case %s", name)
		}
	}
	c := &tcase{tool: "rping", kind: rdmaCM, size: 64, iters: 1000}
	want := "-c -a 10.77.0.1 -I 10.77.0.2 -p 19001 -C 1000 -v"
	if got := strings.Join(c.cmArgs(false, netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1"), 19001), " "); got != want {
		t.Errorf("rping client: %q, want %q", got, want)
	}
}

// TestCMMissing: without the tools, the CM cases are expected-missing with
// the tool named; perftest without -R too.
func TestCMMissing(t *testing.T) {
	s := &suite{tools: map[string]map[string]bool{
		"write_bw": {"addr": true}, "rdma_server": {}, "decode": {},
	}}
	for _, c := range []struct {
		c    tcase
		want string
	}{
		{tcase{tool: "rping", kind: rdmaCM}, "softnic has no rping command"},
		{tcase{tool: "rdma_server", kind: rdmaCM, role: softnicClient}, "softnic has no rdma_client command"},
		{tcase{tool: "rdma_server", kind: rdmaCM, role: softnicServer}, ""},
		{tcase{tool: "write_bw", kind: perftest, args: []string{"-R"}, needs: []string{"-R"}}, "softnic write_bw has no -R"},
		{tcase{tool: "write_bw", kind: perftest, needs: []string{"odp"}}, "softnic write_bw has no --odp"},
	} {
		if got := s.missingReason(&c.c); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
	// The exec cases need softnic exec and the C libraries, not the look-alikes.
	ex := tcase{tool: "rping", kind: rdmaCM, exec: true}
	if got, want := s.missingReason(&ex), "softnic has no exec command"; got != want {
		t.Errorf("exec without softnic exec: %q, want %q", got, want)
	}
	s.tools["exec"] = map[string]bool{}
	s.clibErr = errors.New("scripts/clib: no gcc")
	if got, want := s.missingReason(&ex), "softnic's C libraries: scripts/clib: no gcc"; got != want {
		t.Errorf("exec without the libraries: %q, want %q", got, want)
	}
}
