//go:build linux

package main

import (
	"flag"
	"os"
	"testing"
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

// Both modes make their round trips with a second process and report
// half round trips in order (typical no more than p99).
func TestPingPong(t *testing.T) {
	pingPongBothModes(t)
	if _, err := pingPong("spin", 1); err == nil {
		t.Error("an unknown mode ran")
	}
}

// pingPongBothModes runs both ping-pong modes and checks that each
// reports half round trips in order (typical no more than p99).
func pingPongBothModes(t *testing.T) {
	t.Helper()
	for _, mode := range []string{"busy", "block"} {
		r, err := pingPong(mode, 200)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r.typical <= 0 || r.p99 < r.typical {
			t.Errorf("%s: typical %v µs, p99 %v µs", mode, r.typical, r.p99)
		}
	}
}
