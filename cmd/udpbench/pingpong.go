//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

// The ping-pong modes measure the machine's floor for softnic's
// write_lat: one small datagram back and forth between two processes,
// on 127.0.0.1 and 127.0.0.2 as softnic's two are, each answering what it
// receives at once, timed on the side that starts each round trip; half
// of each round trip is one sample, as perftest's write_lat reports. The
// answering side is udpbench itself, started again with -pingpong-echo
// (two goroutines of one process would hide the wake-ups: Go's idle
// threads spin on the network poller for each other). Modes:
//
//	busy    each side spinning on a non-blocking recvfrom on an OS
//	        thread of its own (the socket is not in Go's network poller),
//	        as softnic's --busy-poll spins on recvmmsg
//	block   Go's net.UDPConn: a read with nothing queued parks the
//	        goroutine in the network poller until the datagram wakes it,
//	        as softnic's receive goroutine waits
//	turn    two datagrams each way a turn, write_lat's ACK and WRITE,
//	        through softnic's UDP link (see turn.go)
//
// pingPongModes are the modes, in the order the table shows them.
var pingPongModes = []string{"busy", "block", "turn"}

func pingPongMode(m string) bool { return slices.Contains(pingPongModes, m) }

// pingPongSize is a RoCEv2 RDMA WRITE_ONLY of 8 bytes (BTH, RETH,
// payload, ICRC): write_lat 8 B's request.
const pingPongSize = wire.BTHLen + wire.RETHLen + 8 + wire.ICRCLen

// pingPongWarmup round trips are made before the samples are taken.
const pingPongWarmup = 1000

// A lost datagram would stop a ping-pong for good, so each round trip
// carries its number (the first 4 bytes; the answering side sends back
// what it got) and is sent again, as the same round, when no answer with
// that number came within pingPongRoundTimeout; an answer with another
// number (a late one) is skipped. The rounds resent are not samples. A
// run gives up after pingPongMaxLost of them, or when it takes longer
// than pingPongTimeout. Between two emulated guests a round trip takes
// a few ms.
// Variables for the tests.
var (
	pingPongRoundTimeout = time.Second
	pingPongMaxLost      = 20
)

// pingPongTimeout bounds a whole run of rounds: 10 s, and 20 ms a round
// trip.
func pingPongTimeout(rounds int) time.Duration {
	return 10*time.Second + time.Duration(pingPongWarmup+rounds)*20*time.Millisecond
}

// pingPongRounds makes the warm-up and rounds round trips with one of the
// timing sides' exchange functions and returns the rounds' times and the
// round trips lost. exchange sends round i's datagram, waits at most
// until deadline for its answer, and returns when it sent it and false
// when no answer came (the round is sent again). A round's time runs
// from its last send to its answer.
func pingPongRounds(rounds int, exchange func(i uint32, deadline time.Time) (time.Time, bool, error)) ([]time.Duration, int, error) {
	end := time.Now().Add(pingPongTimeout(rounds))
	d := make([]time.Duration, 0, rounds)
	lost := 0
	for i := 0; i < pingPongWarmup+rounds; {
		deadline := time.Now().Add(pingPongRoundTimeout)
		if deadline.After(end) {
			deadline = end
		}
		sent, ok, err := exchange(uint32(i), deadline)
		if err != nil {
			return nil, lost, err
		}
		if !ok {
			if lost++; lost > pingPongMaxLost || !time.Now().Before(end) {
				return nil, lost, fmt.Errorf("ping-pong: %d round trips without an answer within %v; %d done", lost, pingPongRoundTimeout, i)
			}
			continue
		}
		if i >= pingPongWarmup {
			d = append(d, time.Since(sent))
		}
		i++
	}
	return d, lost, nil
}

// pingPongResult is one ping-pong mode's half round trips, µs.
type pingPongResult struct {
	typical, p99 float64
}

func pingPong(mode string, rounds int) (pingPongResult, error) {
	if !pingPongMode(mode) {
		return pingPongResult{}, fmt.Errorf("unknown ping-pong mode %q", mode)
	}
	var to netip.AddrPort
	if *peer != "" {
		k, port, err := dialCtl(*peer, "echo "+mode)
		if err != nil {
			return pingPongResult{}, err
		}
		defer k.c.Close() // ends the server's echo
		to = netip.AddrPortFrom(netip.MustParseAddrPort(*peer).Addr(), uint16(port))
	} else {
		port, stop, err := startEchoProcess(mode)
		if err != nil {
			return pingPongResult{}, err
		}
		defer stop()
		to = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(port))
	}
	var d []time.Duration
	var lost int
	var err error
	switch mode {
	case "busy":
		d, lost, err = pingPongBusy(rounds, to)
	case "block":
		d, lost, err = pingPongBlock(rounds, to)
	default:
		d, lost, err = pingPongTurn(rounds, to)
	}
	if err != nil {
		return pingPongResult{}, err
	}
	if lost > 0 {
		fmt.Fprintf(os.Stderr, "udpbench: ping-pong %s: %d round trips lost and made again\n", mode, lost)
	}
	slices.Sort(d)
	us := func(q float64) float64 {
		return float64(d[min(int(q*float64(len(d))), len(d)-1)].Nanoseconds()) / 2 / 1e3
	}
	return pingPongResult{typical: us(0.5), p99: us(0.99)}, nil
}

// startEchoProcess starts udpbench again as the answering side
// (-pingpong-echo) and returns its port and how to end it.
func startEchoProcess(mode string) (int, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, nil, err
	}
	echo := exec.Command(exe, "-pingpong-echo", mode)
	echo.Stderr = os.Stderr
	echo.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // a spinning echo must not outlive us
	out, err := echo.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := echo.Start(); err != nil {
		return 0, nil, err
	}
	stop := func() {
		_ = echo.Process.Kill()
		_ = echo.Wait()
	}
	var port int
	if _, err := fmt.Fscanf(bufio.NewReader(out), "port %d\n", &port); err != nil {
		stop()
		return 0, nil, fmt.Errorf("the echo side: %w", err)
	}
	return port, stop, nil
}

// pingPongEcho is the answering side (-pingpong-echo): it binds
// 127.0.0.2, prints "port N", and sends every datagram back until it is
// killed.
func pingPongEcho(mode string) error {
	e, err := startEcho(mode, netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		return err
	}
	fmt.Printf("port %d\n", e.port)
	<-e.done
	return e.err
}

// echoSide is a running answering side.
type echoSide struct {
	port   int
	quit   atomic.Bool
	stopFn func()
	done   chan struct{}
	err    error
}

// startEcho binds a UDP socket on addr (a port the kernel picks) and
// sends every datagram back at once from a goroutine, busy or block,
// until stop.
func startEcho(mode string, addr netip.Addr) (*echoSide, error) {
	if mode == "turn" {
		return startTurnEcho(addr)
	}
	e := &echoSide{done: make(chan struct{})}
	buf := make([]byte, 2048)
	switch mode {
	case "busy":
		fd, sa, err := rawSocket(addr.String())
		if err != nil {
			return nil, err
		}
		e.port = sa.(*unix.SockaddrInet4).Port
		e.stopFn = func() {}
		go func() {
			defer close(e.done)
			defer unix.Close(fd)
			runtime.LockOSThread()
			for !e.quit.Load() {
				_, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
				if err == nil {
					_ = unix.Sendto(fd, buf[:pingPongSize], 0, from)
				}
			}
		}()
	case "block":
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			return nil, err
		}
		e.port = c.LocalAddr().(*net.UDPAddr).Port
		e.stopFn = func() { c.Close() }
		go func() {
			defer close(e.done)
			for {
				_, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					if !e.quit.Load() {
						e.err = err
					}
					return
				}
				_, _ = c.WriteToUDPAddrPort(buf[:pingPongSize], from)
			}
		}()
	default:
		return nil, fmt.Errorf("unknown ping-pong mode %q", mode)
	}
	return e, nil
}

// stop ends the echo and waits for its goroutine.
func (e *echoSide) stop() {
	e.quit.Store(true)
	e.stopFn()
	<-e.done
}

// pingPongBusy is the busy mode's timing side: a raw non-blocking socket,
// spun on. It returns the rounds' times and the round trips lost.
func pingPongBusy(rounds int, to netip.AddrPort) ([]time.Duration, int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, _, err := rawSocket(localAddr())
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}
	out, in := make([]byte, pingPongSize), make([]byte, 2048)
	return pingPongRounds(rounds, func(i uint32, deadline time.Time) (time.Time, bool, error) {
		binary.BigEndian.PutUint32(out, i)
		sent := time.Now()
		if err := unix.Sendto(fd, out, 0, sa); err != nil {
			return sent, false, err
		}
		for k := 1; ; k++ {
			if n, _, err := unix.Recvfrom(fd, in, unix.MSG_DONTWAIT); err == nil && n >= 4 && binary.BigEndian.Uint32(in) == i {
				return sent, true, nil
			}
			if k%4096 == 0 && time.Now().After(deadline) {
				return sent, false, nil
			}
		}
	})
}

// rawSocket is a non-blocking UDP socket bound to addr on a free port,
// outside Go's network poller, and its address.
func rawSocket(addr string) (int, unix.Sockaddr, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: netip.MustParseAddr(addr).As4()}); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, sa, nil
}

// pingPongBlock is the block mode's timing side: net.UDPConn, Go's
// network poller. It returns the rounds' times and the round trips lost.
// The read deadline is set before each round's clock starts.
func pingPongBlock(rounds int, to netip.AddrPort) ([]time.Duration, int, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(localAddr()), 0)))
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	out, in := make([]byte, pingPongSize), make([]byte, 2048)
	return pingPongRounds(rounds, func(i uint32, deadline time.Time) (time.Time, bool, error) {
		if err := c.SetReadDeadline(deadline); err != nil {
			return time.Time{}, false, err
		}
		binary.BigEndian.PutUint32(out, i)
		sent := time.Now()
		if _, err := c.WriteToUDPAddrPort(out, to); err != nil {
			return sent, false, err
		}
		for {
			n, _, err := c.ReadFromUDPAddrPort(in)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return sent, false, nil
			}
			if err != nil {
				return sent, false, fmt.Errorf("ping-pong: %w", err)
			}
			if n >= 4 && binary.BigEndian.Uint32(in) == i {
				return sent, true, nil
			}
		}
	})
}
