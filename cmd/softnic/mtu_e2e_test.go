package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/test/netnstest"
)

// TestE2EMTU1500 is issue 9's setup: two softnic processes in two network
// namespaces joined by a veth pair of MTU 1500. The port's active MTU is
// 1024 there, as rxe's would be (softnic info shows it), and the tools
// with their default options run at it, or refuse with ud_pingpong's
// message when -s exceeds it. Root only.
func TestE2EMTU1500(t *testing.T) {
	skipE2E(t)
	netnstest.Require(t)
	if binary == "" {
		t.Fatal("the softnic binary did not build")
	}
	a := netnstest.New(t, fmt.Sprintf("mtu-%d-ea", os.Getpid()))
	b := netnstest.New(t, fmt.Sprintf("mtu-%d-eb", os.Getpid()))
	netnstest.Veth(t, a, "mtu0", "10.89.0.1/24", b, "mtu1", "10.89.0.2/24", 1500)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inNS := func(ns *netnstest.NS, args ...string) procResult {
		return runCmd(ns.Command(ctx, binary, args...))
	}
	pair := func(tool string, args ...string) (srv, cli procResult) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			srv = inNS(a, append([]string{tool, "--addr", "10.89.0.1", "--accept-timeout", "60s"}, args...)...)
		}()
		go func() {
			defer wg.Done()
			cli = inNS(b, append(append([]string{tool, "--addr", "10.89.0.2", "--connect-timeout", "30s"}, args...), "10.89.0.1")...)
		}()
		wg.Wait()
		return srv, cli
	}

	info := inNS(a, "info", "--addr", "10.89.0.1")
	if info.status != 0 || !strings.Contains(info.out, "\t\t\tactive_mtu:\t\t1024 (3)\n") || !strings.Contains(info.out, "\t\t\tmax_mtu:\t\t4096 (5)\n") {
		t.Errorf("softnic info on a 1500-byte veth: exit %d, want active_mtu 1024 and max_mtu 4096:\n%s%s", info.status, info.out, info.errOut)
	}

	for _, tt := range []struct {
		tool string
		args []string
	}{
		{"write_bw", nil}, // what the reporter ran
		{"read_bw", []string{"-n", "200"}},
		{"send_bw", []string{"-n", "200"}},
		{"send_bw", []string{"-n", "200", "-c", "UD"}},
	} {
		srv, cli := pair(tt.tool, tt.args...)
		for who, r := range map[string]procResult{"server": srv, "client": cli} {
			if r.status != 0 || !strings.Contains(r.out, " Mtu             : 1024[B]\n") {
				t.Errorf("%s %v %s: exit %d, want 0 at MTU 1024:\n%s%s", tt.tool, tt.args, who, r.status, r.out, r.errOut)
			}
		}
		if !bwLine.MatchString(cli.out) {
			t.Errorf("%s %v: no result line:\n%s", tt.tool, tt.args, cli.out)
		}
	}

	srv, cli := pair("ud_pingpong", "-s", "4096")
	for who, r := range map[string]procResult{"server": srv, "client": cli} {
		if r.status != exitFail || !strings.Contains(r.errOut, "Requested size larger than port MTU (1024)") {
			t.Errorf("ud_pingpong -s 4096 %s: exit %d, want %d and ud_pingpong's MTU message:\n%s%s", who, r.status, exitFail, r.out, r.errOut)
		}
	}
}
