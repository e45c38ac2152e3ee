package exec

import (
	"strconv"
	"strings"
	"testing"
)

// rdma-core's ping-pong examples, unmodified, pair over softnic: each
// side a process of its own at its own loopback address, -c checking the
// data each receive holds. GID index 1 is the address, 0 the link-local
// GID that names it (as GIDs 1 and 0 of rxe on an IPv4 netdev).
func TestPingpongPairs(t *testing.T) {
	needLibs(t)
	for _, tc := range []struct {
		prog string
		args string // both sides'
	}{
		{"ibv_rc_pingpong", "-g 1 -c -n 200"},
		{"ibv_rc_pingpong", "-g 0 -c -n 200"},         // the link-local GIDs
		{"ibv_rc_pingpong", "-g 1 -c -n 200 -e"},      // completion channel fds
		{"ibv_rc_pingpong", "-g 1 -c -n 200 -N"},      // ibv_wr_* (ibv_qp_ex)
		{"ibv_rc_pingpong", "-g 1 -c -n 50 -s 65536"}, // messages of many packets
		{"ibv_rc_pingpong", "-g 1 -c -n 200 -m 4096 -s 100"},
		{"ibv_uc_pingpong", "-g 1 -c -n 200"},
		{"ibv_ud_pingpong", "-g 1 -c -n 200"},
		{"ibv_ud_pingpong", "-g 1 -c -n 200 -e"},
		{"ibv_srq_pingpong", "-g 1 -c -n 100"},
		{"ibv_srq_pingpong", "-g 1 -c -n 100 -q 4 -e"},
		{"ibv_xsrq_pingpong", "-g 1 -n 20"},
	} {
		t.Run(tc.prog+" "+tc.args, func(t *testing.T) {
			needTools(t, "ibverbs-utils", tc.prog)
			port := freePort(t)
			args := append(strings.Fields(tc.args), "-p", strconv.Itoa(port))
			server := append([]string{tc.prog}, args...)
			client := append(append([]string{tc.prog}, args...), testAddr(0).String())
			sout, cout := pair(t, port, server, client, Options{Addr: testAddr(0)}, Options{Addr: testAddr(1)})
			checkPingpong(t, tc.prog, sout, cout)
		})
	}
}

// With --poll-wait each side's empty polls, once a CQ has been empty for
// a while, wait on the link's socket (link.UDPLink.PollFD) before polling
// again: the ping-pong still finishes with its data checked.
func TestPingpongPollWait(t *testing.T) {
	needLibs(t)
	needTools(t, "ibverbs-utils", "ibv_rc_pingpong")
	port := freePort(t)
	args := []string{"ibv_rc_pingpong", "-g", "1", "-c", "-n", "200", "-p", strconv.Itoa(port)}
	sout, cout := pair(t, port, args, append(args, testAddr(0).String()),
		Options{Addr: testAddr(0), PollWait: true}, Options{Addr: testAddr(1), PollWait: true})
	checkPingpong(t, "ibv_rc_pingpong", sout, cout)
}

// checkPingpong checks that both sides of a ping-pong finished: the
// examples print their rate, ibv_xsrq_pingpong "success".
func checkPingpong(t *testing.T, prog, sout, cout string) {
	t.Helper()
	want := "iters in"
	if prog == "ibv_xsrq_pingpong" {
		want = "success"
	}
	for side, out := range map[string]string{"server": sout, "client": cout} {
		if !strings.Contains(out, want) {
			t.Errorf("%s %s did not finish (%q):\n%s", prog, side, want, out)
		}
	}
}

// The C examples over softnic pair with softnic's Go look-alikes, which
// speak the same out-of-band protocol, in both roles. The Go tools have
// one GID (index 0: the address).
func TestPingpongWithGoTools(t *testing.T) {
	needLibs(t)
	tool := softnicTool(t)
	for _, tc := range []struct {
		prog, goCmd string
	}{
		{"ibv_rc_pingpong", "rc_pingpong"},
		{"ibv_uc_pingpong", "uc_pingpong"},
		{"ibv_ud_pingpong", "ud_pingpong"},
		{"ibv_srq_pingpong", "srq_pingpong"},
		{"ibv_xsrq_pingpong", "xsrq_pingpong"},
	} {
		needTools(t, "ibverbs-utils", tc.prog)
		for _, cServer := range []bool{true, false} {
			name := tc.prog + " server"
			if !cServer {
				name = tc.goCmd + " server"
			}
			t.Run(name, func(t *testing.T) {
				port := strconv.Itoa(freePort(t))
				n := []string{"-c", "-n", "200"} // check the data, 200 exchanges
				if tc.prog == "ibv_xsrq_pingpong" {
					n = []string{"-n", "20"} // 20 tests; it checks its data itself
				}
				c := append([]string{tc.prog, "-g", "1", "-p", port}, n...)
				g := append([]string{tool, tc.goCmd, "-p", port}, n...)
				var sout, cout string
				if cServer {
					g = append(g, "--addr", testAddr(1).String(), testAddr(0).String())
					sout, cout = pair(t, mustAtoi(port), c, g, Options{Addr: testAddr(0)}, Options{})
				} else {
					g = append(g, "--addr", testAddr(0).String())
					c = append(c, testAddr(0).String())
					sout, cout = pair(t, mustAtoi(port), g, c, Options{}, Options{Addr: testAddr(1)})
				}
				checkPingpong(t, tc.prog, sout, cout)
			})
		}
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
