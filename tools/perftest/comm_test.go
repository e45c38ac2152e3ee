package perftest

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A read that waits past the stall goes on while the NIC receives
// (alive moves), so a passive server's end-of-run barrier outlasts a
// long run; with nothing received it fails as a stall, and a cancelled
// context ends it whatever the NIC does.
func TestCommReadWaitsWhileTheNICReceives(t *testing.T) {
	const stall = 20 * time.Millisecond
	pipe := func(t *testing.T) (net.Conn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}

	// The NIC receives all along: every look finds a new count. The peer
	// writes only after the reader saw several stalls go by.
	a, b := pipe(t)
	var looks atomic.Int64
	m := newComm(context.Background(), a, false, stall, func() uint64 { return uint64(looks.Add(1)) })
	go func() {
		for looks.Load() < 4 {
			time.Sleep(stall / 4)
		}
		b.Write([]byte("0123"))
		b.Write([]byte("4567"))
	}()
	got, err := m.read("keys", 8)
	if err != nil || string(got) != "01234567" {
		t.Fatalf("with the NIC receiving: %q, %v", got, err)
	}
	if n := looks.Load(); n < 4 {
		t.Errorf("the read looked at the NIC %d times; the peer wrote after the 4th", n)
	}

	// The NIC receives nothing: a stall, as before.
	a, _ = pipe(t)
	m = newComm(context.Background(), a, false, stall, func() uint64 { return 7 })
	start := time.Now()
	if _, err := m.read("keys", 8); err == nil || !strings.Contains(err.Error(), "the peer sent nothing for 20ms") {
		t.Errorf("with a silent NIC: %v", err)
	}
	if d := time.Since(start); d > 100*stall {
		t.Errorf("a silent peer was waited for %v", d)
	}

	// No device (alive nil): the stall alone decides.
	a, _ = pipe(t)
	m = newComm(context.Background(), a, false, stall, nil)
	if _, err := m.read("keys", 8); err == nil || !strings.Contains(err.Error(), "sent nothing") {
		t.Errorf("without a device: %v", err)
	}

	// A cancelled context ends the wait though the NIC receives.
	a, _ = pipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	m = newComm(ctx, a, false, stall, func() uint64 {
		if n.Add(1) == 3 {
			cancel()
		}
		return uint64(n.Load())
	})
	done := make(chan error, 1)
	go func() { _, err := m.read("keys", 8); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled read returned a message")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled read went on waiting")
	}
	cancel()

	// The peer closing in the middle of a message is an error, not a
	// short message.
	a, b = pipe(t)
	m = newComm(context.Background(), a, false, time.Second, func() uint64 { return 1 })
	go func() { b.Write([]byte("0123")); b.Close() }()
	if _, err := m.read("keys", 8); err == nil || !strings.Contains(err.Error(), "closed the connection") {
		t.Errorf("the peer closed mid-message: %v", err)
	}
}
