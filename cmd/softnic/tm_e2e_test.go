package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/softnic/softnic/tools/tmpingpong"
	"github.com/softnic/softnic/tools/tooljson"
)

var tmReceived = regexp.MustCompile(`(?m)^received: (\d+) matched, (\d+) unexpected \((\d+) posted late\), (\d+) eager, (\d+) rendezvous, \d+ syncs$`)

// Two softnic tm_pingpong processes on loopback, -c: eager only,
// rendezvous only and both, with tags posted late; the server prints
// text, the client JSON, and the counts add up on both.
func TestE2ETMPingpong(t *testing.T) {
	skipE2E(t)
	for _, tt := range []struct {
		name        string
		args        []string
		eager, rndv int
		late        int // tags posted late by each side
	}{
		// 40 messages in windows of 8, one late per window.
		{"eager", []string{"-n", "40", "-t", "8", "-u", "1", "-s", "3000", "-r", "3001", "-m", "1024"}, 40, 0, 5},
		// Message i carries 8192>>(i%4) bytes, all of them at least 1000.
		{"rendezvous", []string{"-n", "40", "-t", "8", "-u", "2", "-s", "8192", "-r", "1000"}, 0, 40, 10},
		// 4096, 2048 rendezvous; 1024, 512 eager; windows of 16, 0 late.
		{"mixed", []string{"-n", "100", "-t", "16", "-u", "0", "-s", "4096", "-r", "2048"}, 50, 50, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-c"}, tt.args...)
			srv, cli := runProcPair(t, "tm_pingpong", newLoopback(t, false), args, append([]string{"--json"}, args...))
			if srv.status != 0 || cli.status != 0 {
				t.Fatalf("server: exit %d\n%s%s\nclient: exit %d\n%s%s", srv.status, srv.out, srv.errOut, cli.status, cli.out, cli.errOut)
			}
			m := tmReceived.FindStringSubmatch(srv.out)
			if m == nil {
				t.Fatalf("server: no received line:\n%s", srv.out)
			}
			var got [5]int
			for i := range got {
				got[i], _ = strconv.Atoi(m[i+1])
			}
			var r tmpingpong.Result
			if err := tooljson.Decode([]byte(cli.out), &r); err != nil {
				t.Fatalf("client: %v\n%s", err, cli.out)
			}
			n := tt.eager + tt.rndv
			for _, s := range []struct {
				who                                     string
				matched, unexp, late, eager, rndv, sent int
			}{
				{"server", got[0], got[1], got[2], got[3], got[4], n},
				{"client", r.Matched, r.Unexpected, r.Late, r.Eager, r.Rendezvous, r.SentEager + r.SentRndv},
			} {
				if s.matched+s.unexp != n || s.eager != tt.eager || s.rndv != tt.rndv || s.sent != n {
					t.Errorf("%s: matched %d + unexpected %d, eager %d, rendezvous %d, sent %d; want %d = %d eager + %d rendezvous",
						s.who, s.matched, s.unexp, s.eager, s.rndv, s.sent, n, tt.eager, tt.rndv)
				}
				if s.late != tt.late || s.unexp < tt.late || (tt.late == 0 && s.unexp != 0) {
					t.Errorf("%s: %d unexpected, %d posted late; want %d late", s.who, s.unexp, s.late, tt.late)
				}
			}
			if !r.Checked || r.Role != "client" || r.Iters != n {
				t.Errorf("client JSON: %+v", r)
			}
		})
	}
}
