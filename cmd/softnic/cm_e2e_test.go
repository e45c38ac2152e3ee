package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/test/netnstest"
)

var cmRejected = regexp.MustCompile(`REJECTED|UNREACHABLE|Unexpected CM event|rdma_connect: `)

// TestE2ECMTools runs each connection-manager tool as two softnic
// processes, server on 127.0.0.1 and client on 127.0.0.2, over real UDP
// port 4791 in a private network namespace (root only): the CM's MADs on
// QP1 and the tools' traffic cross the kernel's loopback as they would
// between two hosts.
func TestE2ECMTools(t *testing.T) {
	skipE2E(t)
	netnstest.Require(t)
	if binary == "" {
		t.Fatal("the softnic binary did not build")
	}
	ns := netnstest.New(t, fmt.Sprintf("cm-%d-e2e", os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	inNS := func(args ...string) procResult {
		return runCmd(ns.Command(ctx, binary, args...))
	}
	// pair runs the server, and the client until it is not rejected
	// (the server may not listen yet: a REQ nobody listens for is
	// rejected at once, a SIDR_REQ answered "unsupported").
	pair := func(sargs, cargs []string) (srv, cli procResult) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); srv = inNS(sargs...) }()
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				cli = inNS(cargs...)
				// REJ reason 8 (nobody listens), a SIDR_REP of status 1
				// (UNREACHABLE: no UD service there yet), perftest's words
				// for them, rdma_client's perror
				rejected := cmRejected.MatchString(cli.out + cli.errOut)
				if cli.status == 0 || !rejected || i == 100 {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		wg.Wait()
		return srv, cli
	}
	srvAddr, cliAddr := []string{"--addr", "127.0.0.1"}, []string{"--addr", "127.0.0.2"}
	with := func(a []string, b ...string) []string { return append(append([]string(nil), a...), b...) }

	for _, tt := range []struct {
		name       string
		sargs      []string
		cargs      []string
		srvOut     *regexp.Regexp
		cliOut     *regexp.Regexp
		srvErrWant string
	}{
		{"rping", with([]string{"rping", "-s", "-a", "127.0.0.1", "-v"}), with([]string{"rping", "-c", "-a", "127.0.0.1", "-C", "10", "-v", "-V"}, cliAddr...),
			regexp.MustCompile(`^(server ping data: rdma-ping-\d: [A-z\[\\\]^_` + "`" + `]+\n){10}$`),
			regexp.MustCompile(`^(ping data: rdma-ping-\d: [A-z\[\\\]^_` + "`" + `]+\n){10}$`),
			"server DISCONNECT EVENT...\n"},
		{"ucmatose", with([]string{"ucmatose", "-c", "2"}, srvAddr...), with([]string{"ucmatose", "-s", "127.0.0.1", "-c", "2"}, cliAddr...),
			regexp.MustCompile(`disconnected\ntest complete\nreturn status 0\n$`),
			regexp.MustCompile(`sending replies\ndata transfers complete\ntest complete\nreturn status 0\n$`), ""},
		{"rdma_server", with([]string{"rdma_server"}, srvAddr...), with([]string{"rdma_client", "-s", "127.0.0.1"}, cliAddr...),
			regexp.MustCompile(`^rdma_server: start\nrdma_server: end 0\n$`),
			regexp.MustCompile(`^rdma_client: start\nrdma_client: end 0\n$`), ""},
		{"udaddy", with([]string{"udaddy"}, srvAddr...), with([]string{"udaddy", "-s", "127.0.0.1"}, cliAddr...),
			regexp.MustCompile(`sending replies\ndata transfers complete\ntest complete\nreturn status 0\n$`),
			regexp.MustCompile(`receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`), ""},
		{"mckey", with([]string{"mckey", "-m", "239.7.7.7"}, srvAddr...), with([]string{"mckey", "-m", "239.7.7.7", "-s"}, cliAddr...),
			regexp.MustCompile(`receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`),
			regexp.MustCompile(`initiating data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`), ""},
		{"write_bw -R", with([]string{"write_bw", "-R", "-n", "100", "--check", "--accept-timeout", "60s"}, srvAddr...),
			with([]string{"write_bw", "-R", "-n", "100", "--check", "--connect-timeout", "30s", "127.0.0.1"}, cliAddr...),
			regexp.MustCompile(` rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n`), bwLine, ""},
		{"read_lat -R", with([]string{"read_lat", "-R", "-n", "100", "--accept-timeout", "60s"}, srvAddr...),
			with([]string{"read_lat", "-R", "-n", "100", "--connect-timeout", "30s", "127.0.0.1"}, cliAddr...),
			regexp.MustCompile(` rdma_cm QPs\t : ON\n`), latLine, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, cli := pair(tt.sargs, tt.cargs)
			if srv.status != 0 || !tt.srvOut.MatchString(srv.out) {
				t.Errorf("server %v: exit %d\nstdout:\n%s\nstderr:\n%s", tt.sargs, srv.status, srv.out, srv.errOut)
			}
			if cli.status != 0 || !tt.cliOut.MatchString(cli.out) {
				t.Errorf("client %v: exit %d\nstdout:\n%s\nstderr:\n%s", tt.cargs, cli.status, cli.out, cli.errOut)
			}
			if tt.srvErrWant != "" && !strings.Contains(srv.errOut, tt.srvErrWant) {
				t.Errorf("server stderr %q lacks %q", srv.errOut, tt.srvErrWant)
			}
		})
	}
}
