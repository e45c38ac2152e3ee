package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a test may read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until b holds want, for at most d.
func (s *syncBuffer) waitFor(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// The tools' RC QPs have the attributes their C originals give them:
// timeout 14 (4.096 µs × 2^14 ≈ 67 ms) and retry_cnt 7 (rc_pingpong.c,
// srq_pingpong.c; perftest's DEF_QP_TIME 14 and retry_cnt 7 in
// ctx_modify_qp_to_rts). softnic's retry_cnt 7 is seven retries, so a
// dead peer is declared (7+1) local ACK timeouts after the last progress.
const (
	toolRetryBound = 8 * (4096 << 14) * time.Nanosecond // ≈ 537 ms
	// deadPeerSlack covers what is not the transport's: the kill's
	// delivery, the process's exit, a loaded machine.
	deadPeerSlack = 1500 * time.Millisecond
	deadPeerMsg   = "peer stopped answering: transport retry counter exceeded after 7 retries"
)

// TestE2EDeadPeer kills the server (SIGKILL) in the middle of a run: the
// client must end within the retry bound of the kill (plus slack), exit
// non-zero, and say that the transport gave up on its peer - not that the
// out-of-band connection closed, nor time out after --timeout.
func TestE2EDeadPeer(t *testing.T) {
	skipE2E(t)
	if binary == "" {
		t.Fatal("the softnic binary did not build")
	}
	for _, tt := range []struct {
		tool  string
		args  []string
		ready string // what the server prints once the run is under way
		// mayIdle: the client may have nothing in flight when the server
		// dies - rc_pingpong's client, between the ACK of its SEND and
		// the server's answer, waits for a receive only, and its QP
		// allows no remote access a probe could use. Then no transport
		// can tell that the peer died, and the run ends at the stall
		// timeout (--timeout) instead, saying so.
		mayIdle bool
	}{
		{"rc_pingpong", []string{"-n", "100000000", "-s", "4096"}, "remote address", true},
		// 16 QPs: the client mostly has a SEND in flight on one of them,
		// but not always: the server's NIC acknowledges each SEND as it
		// reads it (run to completion), so when the server's process is
		// slow to answer (a loaded machine), every client QP can be
		// waiting for a receive at the kill. The client's QPs allow no
		// remote access, so nothing can be probed either.
		{"srq_pingpong", []string{"-n", "100000000", "-q", "16", "-s", "1024"}, "remote address", true},
		{"write_bw", []string{"-D", "60", "-s", "65536"}, "#bytes", false},
		// perftest keeps a timestamp per iteration (16 bytes in the bw
		// tests, 8 in the latency ones), allocated as the run starts: -n
		// stays small enough that the client is in its loop at the kill.
		{"write_bw", []string{"-n", "1000000", "-s", "65536"}, "#bytes", false},
		{"send_lat", []string{"-n", "1000000", "-s", "64"}, "#bytes", false},
		{"write_lat", []string{"-n", "1000000", "-s", "64"}, "#bytes", false},
		{"read_lat", []string{"-D", "60", "-s", "64"}, "remote address", false}, // its server prints no header
	} {
		t.Run(tt.tool+strings.Join(tt.args, ""), func(t *testing.T) {
			l := newLoopback(t, false)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			port := freePort(t)
			// --timeout is far above the bound: a client that waited for it
			// instead of detecting the dead peer fails the test.
			srv := exec.CommandContext(ctx, binary, append(append(append([]string{tt.tool, "-p", port}, l.server()...),
				"--timeout", "30s", "--accept-timeout", "60s"), tt.args...)...)
			var srvOut, srvErr syncBuffer
			srv.Stdout, srv.Stderr = &srvOut, &srvErr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Wait()
			defer srv.Process.Kill()
			stall := 30 * time.Second
			if tt.mayIdle {
				stall = 3 * time.Second
			}
			cli := exec.CommandContext(ctx, binary, append(append(append(append([]string{tt.tool, "-p", port}, l.client()...),
				"--timeout", stall.String(), "--connect-timeout", "30s"), tt.args...), l.a)...)
			var cliOut, cliErr syncBuffer
			cli.Stdout, cli.Stderr = &cliOut, &cliErr
			if err := cli.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cli.Wait() }()

			if !srvOut.waitFor(tt.ready, 30*time.Second) {
				t.Fatalf("the run did not start: server printed\n%s%s\nclient\n%s%s", srvOut.String(), srvErr.String(), cliOut.String(), cliErr.String())
			}
			// Let RDMA traffic flow (this only places the kill mid-run;
			// nothing is asserted on it).
			time.Sleep(300 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("the client ended before the kill: %v\n%s%s", err, cliOut.String(), cliErr.String())
			default:
			}
			if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("the client still runs %v after its peer was killed\n%s%s", time.Since(killed), cliOut.String(), cliErr.String())
			}
			took := time.Since(killed)
			t.Logf("client ended %v after the kill (retry bound %v): %v", took.Round(time.Millisecond), toolRetryBound, err)
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() == 0 {
				t.Errorf("client exit: %v, want a non-zero status", err)
			}
			if tt.mayIdle && strings.Contains(cliErr.String(), "timeout: no work completion for "+stall.String()) {
				// Nothing was in flight: the stall timeout, no sooner.
				t.Logf("nothing in flight at the kill: the stall timeout ended the run")
				if took < stall || took > stall+deadPeerSlack {
					t.Errorf("client ended %v after the kill, want %v (+ %v)", took, stall, deadPeerSlack)
				}
				return
			}
			if !strings.Contains(cliErr.String(), deadPeerMsg) {
				t.Errorf("client's stderr lacks %q:\n%s", deadPeerMsg, cliErr.String())
			}
			if took > toolRetryBound+deadPeerSlack {
				t.Errorf("client ended %v after the kill, want at most %v + %v\n%s", took, toolRetryBound, deadPeerSlack, cliErr.String())
			}
		})
	}
}
