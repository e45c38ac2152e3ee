//go:build interop

package interop

import (
	"strings"
	"testing"
)

// TestCheckTM checks the tm_pingpong cases' check on the outputs of a
// passing run (rendezvous, 200 messages) and on damaged copies of them;
// it needs no bed.
func TestCheckTM(t *testing.T) {
	c := &tcase{tool: "tm_pingpong", kind: tmPingpong, size: 16384, rndv: 2048, iters: 200}
	sn := "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2e88c4, GID ::ffff:10.77.0.1\n" +
		"200 messages each way, up to 16384 bytes, 16 tags in flight, rendezvous from 2048 bytes\n" +
		"sent: 0 eager, 200 rendezvous\n" +
		"received: 130 matched, 70 unexpected (13 posted late), 0 eager, 200 rendezvous, 13 syncs\n" +
		"3072000 bytes in 1.74 seconds = 229.38 messages/sec, 1.76 MB/sec\n"
	rxe := "sent: 0 eager, 200 rendezvous\n" +
		"received: 0 eager, 200 rendezvous (matched in software), every byte checked\n" +
		"200 messages each way in 1.74 seconds = 230.00 messages/sec\n"
	if err := checkTM(c, sn, rxe); err != nil {
		t.Fatalf("a passing run's outputs: %v", err)
	}
	for _, tc := range []struct {
		name, sn, rxe, want string
	}{
		{"matched+unexpected short", strings.Replace(sn, "130 matched", "129 matched", 1), rxe, "want 200 messages"},
		{"late above unexpected", strings.Replace(sn, "(13 posted late)", "(71 posted late)", 1), rxe, "71 late"},
		{"softnic's split", strings.Replace(sn, "0 eager, 200 rendezvous, 13", "1 eager, 199 rendezvous, 13", 1), rxe, "1 eager, 199 rendezvous"},
		{"softnic sent eager", strings.Replace(sn, "sent: 0 eager, 200", "sent: 200 eager, 0", 1), rxe, "softnic sent 200 eager"},
		{"no softnic received line", strings.Replace(sn, "received:", "got:", 1), rxe, "softnic tm_pingpong printed no \"received:\""},
		{"tm_send unchecked", sn, strings.Replace(rxe, ", every byte checked", "", 1), "every byte checked"},
		{"tm_send's split", sn, strings.Replace(rxe, "received: 0 eager, 200", "received: 0 eager, 199", 1), "tm_send received 0 eager, 199"},
		{"tm_send ended early", sn, strings.Replace(rxe, "200 messages each way", "100 messages each way", 1), "200 messages each way"},
		{"tm_send printed nothing", sn, "", "tm_send printed no \"received:\""},
	} {
		err := checkTM(c, tc.sn, tc.rxe)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if e, r := c.tmSplit(); e != 0 || r != 200 {
		t.Errorf("16 KiB from 2048 up: split %d eager %d rendezvous, want 0 and 200", e, r)
	}
	mixed := &tcase{size: 4096, rndv: 2048, iters: 10} // 4096 2048 1024 512 4096 ...
	if e, r := mixed.tmSplit(); e != 4 || r != 6 {
		t.Errorf("4 KiB from 2048 up, 10 messages: split %d eager %d rendezvous, want 4 and 6", e, r)
	}
}
