//go:build linux

package main

import (
	"encoding/binary"
	"flag"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary be the ping-pong's answering side, as
// udpbench is its own (pingPong starts os.Executable with
// -pingpong-echo).
func TestMain(m *testing.M) {
	flag.Parse()
	if *echo != "" {
		if err := pingPongEcho(*echo); err != nil {
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// Every mode makes its round trips with a second process and reports
// half round trips in order (typical no more than p99).
func TestPingPong(t *testing.T) {
	pingPongBothModes(t)
	if _, err := pingPong("spin", 1); err == nil {
		t.Error("an unknown mode ran")
	}
}

// pingPongBothModes runs every ping-pong mode and checks that each
// reports half round trips in order (typical no more than p99).
func pingPongBothModes(t *testing.T) {
	t.Helper()
	for _, mode := range pingPongModes {
		r, err := pingPong(mode, 200)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r.typical <= 0 || r.p99 < r.typical {
			t.Errorf("%s: typical %v µs, p99 %v µs", mode, r.typical, r.p99)
		}
	}
}

// lossyEcho answers every datagram on 127.0.0.2, until the test ends,
// but the first copy of round drop, which it drops, and the first copy of
// round stale, which it answers with round stale-1's number only (as a
// late answer of the round before would come); never: it answers
// nothing. It returns its address.
func lossyEcho(t *testing.T, drop, stale uint32, never bool) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.2:0")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		dropped, staled := false, false
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			i := binary.BigEndian.Uint32(buf)
			switch {
			case never:
				continue
			case i == drop && !dropped:
				dropped = true
				continue
			case i == stale && !staled:
				staled = true
				binary.BigEndian.PutUint32(buf, i-1)
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// A lost datagram costs a round trip made again, not the run; an answer
// with another round's number is not taken for the round's (that round
// is lost too, and made again); a peer that stops answering ends
// the run with an error after pingPongMaxLost rounds resent. (A round's
// timeout is long enough for a loaded machine under -race, where the
// silent peer's need not be: at 50 ms a busy round was once lost to load.)
func TestPingPongLoss(t *testing.T) {
	defer func(d time.Duration) { pingPongRoundTimeout = d }(pingPongRoundTimeout)
	modes := map[string]func(int, netip.AddrPort) ([]time.Duration, int, error){"busy": pingPongBusy, "block": pingPongBlock}
	for name, run := range modes {
		pingPongRoundTimeout = 300 * time.Millisecond
		d, lost, err := run(100, lossyEcho(t, 500, 1050, false))
		if err != nil || len(d) != 100 || lost != 2 {
			t.Errorf("%s, one datagram lost and one answered late: %d samples, %d lost, %v; want 100, 2, nil", name, len(d), lost, err)
		}
		pingPongRoundTimeout = 20 * time.Millisecond
		_, lost, err = run(100, lossyEcho(t, 0, 0, true))
		if err == nil || lost != pingPongMaxLost+1 {
			t.Errorf("%s, a silent peer: %d lost, %v; want %d and an error", name, lost, err, pingPongMaxLost+1)
		}
	}
}
