//go:build twohost

package twohost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The connection-manager cases: librdmacm's examples (rping, ucmatose,
// rdma_server/rdma_client, udaddy, mckey) and perftests connecting with -R,
// as cmd/softnic/cm_e2e_test.go runs them on loopback, here across the veth.
// Every tool takes IPv4 and IPv6 addresses, so each runs in every pass.
func cmCases(mtu int, v6 bool, add func(tcase)) {
	a := func(s ...string) []string { return s }
	// the multicast group mckey joins: an IPv4 one, or an IPv6 one of
	// site scope (the kernel's "multicast ff00::/8" route on the veth
	// end carries it; nothing more is needed in bed up)
	group := "239.7.7.7"
	if v6 {
		group = "ff05::7:7"
	}
	// -S at most the active MTU for the datagram tools
	ud := strconv.Itoa(activeMTUFor(mtu))
	for _, c := range []tcase{
		{tool: "rping", label: "100",
			cm: func(a, b, port string) ([]string, []string) {
				return []string{"rping", "-s", "-a", a, "-p", port, "-v"},
					[]string{"rping", "-c", "-a", a, "-I", b, "-p", port, "-C", strconv.Itoa(rpingCount), "-v", "-V"}
			},
			srvWant: rpingServerLines, cliWant: rpingClientLines},
		{tool: "ucmatose", label: "c4",
			cm: func(a, b, port string) ([]string, []string) {
				return []string{"ucmatose", "-b", a, "-p", port, "-c", "4", "--addr", a},
					[]string{"ucmatose", "-s", a, "-p", port, "-c", "4", "--addr", b}
			},
			srvWant: regexp.MustCompile(`disconnected\ntest complete\nreturn status 0\n$`),
			cliWant: regexp.MustCompile(`sending replies\ndata transfers complete\ntest complete\nreturn status 0\n$`)},
		{tool: "rdma_server",
			cm: func(a, b, port string) ([]string, []string) {
				return []string{"rdma_server", "-p", port, "--addr", a},
					[]string{"rdma_client", "-s", a, "-p", port, "--addr", b}
			},
			srvWant: regexp.MustCompile(`^rdma_server: start\nrdma_server: end 0\n$`),
			cliWant: regexp.MustCompile(`^rdma_client: start\nrdma_client: end 0\n$`)},
		// udaddy and mckey have no port option (-p is the port space):
		// the cases run one at a time
		{tool: "udaddy", label: ud + "B",
			cm: func(a, b, _ string) ([]string, []string) {
				return []string{"udaddy", "-b", a, "-S", ud, "--addr", a},
					[]string{"udaddy", "-s", a, "-S", ud, "--addr", b}
			},
			srvWant: regexp.MustCompile(`sending replies\ndata transfers complete\ntest complete\nreturn status 0\n$`),
			cliWant: regexp.MustCompile(`receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`)},
		// the receiver in A, the sender in B: the datagrams to the group
		// reach A only across the veth
		{tool: "mckey", label: "c2", mcastGroup: group,
			cm: func(a, b, _ string) ([]string, []string) {
				return []string{"mckey", "-m", group, "-b", a, "-c", "2", "-S", ud, "--addr", a},
					[]string{"mckey", "-m", group, "-s", "-b", b, "-c", "2", "-S", ud, "--addr", b}
			},
			srvWant: regexp.MustCompile(`receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`),
			cliWant: regexp.MustCompile(`initiating data transfers\ndata transfers complete\ntest complete\nreturn status 0\n$`)},
	} {
		c.kind, c.cmRetry = cmtool, true
		add(c)
	}
	// Debian's programs on both hosts over softnic exec (softnic's
	// librdmacm and libibverbs): rping's data checked, ucmatose, and XRC
	// through the CM (rdma_xserver -c x: the client's SEND into the
	// server's XRC SRQ)
	for _, c := range []tcase{
		{tool: "rping", label: "100",
			cm: func(a, b, port string) ([]string, []string) {
				return []string{"rping", "-s", "-a", a, "-p", port, "-v"},
					[]string{"rping", "-c", "-a", a, "-I", b, "-p", port, "-C", strconv.Itoa(rpingCount), "-v", "-V"}
			},
			srvWant: rpingServerLines, cliWant: rpingClientLines},
		{tool: "ucmatose", label: "c4",
			cm: func(a, b, port string) ([]string, []string) {
				return []string{"ucmatose", "-b", a, "-p", port, "-c", "4"}, []string{"ucmatose", "-s", a, "-p", port, "-c", "4"}
			},
			srvWant: regexp.MustCompile(`disconnected\ntest complete\nreturn status 0\n$`),
			cliWant: regexp.MustCompile(`data transfers complete\ntest complete\nreturn status 0\n$`)},
		{tool: "rdma_xserver", label: "xrc",
			cm: func(a, _, port string) ([]string, []string) {
				return []string{"rdma_xserver", "-c", "x", "-p", port}, []string{"rdma_xclient", "-c", "x", "-s", a, "-p", port}
			},
			srvWant: regexp.MustCompile(`^rdma_xserver: start\nrdma_xserver: end 0\n$`),
			cliWant: regexp.MustCompile(`^rdma_xclient: start\nrdma_xclient: end 0\n$`)},
	} {
		c.kind, c.cmRetry, c.exec = cmtool, true, true
		add(c)
	}
	// perftests through the CM (-R): a result row, every byte checked
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		add(tcase{kind: perftest, tool: tool, label: "R-64KiB", cmRetry: true, check: true,
			args: a("-R", "-s", "65536", "-n", "200", "--check")})
	}
}

// rpingCount is rping's -C in the bed: each line of ping data is checked.
const rpingCount = 100

var (
	rpingServerLines = regexp.MustCompile(`^(server ping data: rdma-ping-\d+: [A-z\[\\\]^_` + "`" + `]+\n){` + strconv.Itoa(rpingCount) + `}$`)
	rpingClientLines = regexp.MustCompile(`^(ping data: rdma-ping-\d+: [A-z\[\\\]^_` + "`" + `]+\n){` + strconv.Itoa(rpingCount) + `}$`)
	// a CM client whose server does not listen yet (cm_e2e_test.go): REJ
	// reason 8, a SIDR_REP of status 1, perftest's words for them,
	// rdma_client's perror
	cmRejected = regexp.MustCompile(`REJECTED|UNREACHABLE|Unexpected CM event|rdma_connect: `)
)

// rdmaCMOn is the line a perftest connecting through the CM prints.
func rdmaCMOn(out string) bool { return strings.Contains(out, "rdma_cm QPs\t : ON") }

// startCMClient starts a CM client once the server's NIC has its UDP
// socket on 4791 (before that a REQ would be lost and retried only at the
// CM's timeout), and starts it again, at once, for as long as it is
// rejected because the server does not listen yet (REJ reason 8, a
// SIDR_REP of status 1: there is no TCP port to wait for). It returns the
// last run.
func (s *suite) startCMClient(ctx context.Context, srv *proc, args []string, out string) (*proc, error) {
	waitUDPBound(ctx, srv, 4791, 5*time.Second)
	for i := 1; ; i++ {
		cli, err := start(ctx, s.bed.NSB, s.softnic, args, out)
		if err != nil {
			return nil, err
		}
		cli.attempts = i
		select {
		case <-cli.done:
		case <-srv.done:
			return cli, nil
		case <-ctx.Done():
			return cli, nil
		}
		if cli.code() == 0 || srv.exited() || i == 200 ||
			!cmRejected.MatchString(cli.stdout.String()+cli.stderr.String()) {
			return cli, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUDPBound waits until a socket of the program's network namespace
// has this UDP port (IPv4 or IPv6), as /proc/PID/net/udp{,6} show it, the
// program exits, or the limit passes.
func waitUDPBound(ctx context.Context, p *proc, port int, limit time.Duration) {
	hex := fmt.Sprintf(":%04X ", port)
	end := time.Now().Add(limit)
	for time.Now().Before(end) && ctx.Err() == nil && !p.exited() {
		for _, f := range []string{"udp", "udp6"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", p.cmd.Process.Pid, f))
			for _, l := range strings.Split(string(b), "\n") {
				// local_address is the second field: ADDR:PORT
				if fs := strings.Fields(l); len(fs) > 1 && strings.HasSuffix(fs[1]+" ", hex) {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mckeyMessages is mckey's default -C: the datagrams the sender SENDs.
const mckeyMessages = 10

// checkMulticast checks that the receiver's pcap holds at least n packets
// from src to the group: IPv4's and IPv6's headers carry the source
// address right before the destination, so the two addresses side by
// side are those packets (the receiver is in another namespace than the
// sender: they came across the veth).
func checkMulticast(pcap, src, group string, n int) error {
	b, err := os.ReadFile(pcap)
	if err != nil {
		return fmt.Errorf("multicast: %v", err)
	}
	s, err1 := netip.ParseAddr(src)
	g, err2 := netip.ParseAddr(group)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	pair := append(s.AsSlice(), g.AsSlice()...)
	if got := bytes.Count(b, pair); got < n {
		return fmt.Errorf("multicast: the receiver's pcap has %d packets from %s to %s, want at least %d", got, src, group, n)
	}
	return nil
}
