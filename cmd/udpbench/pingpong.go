//go:build linux

package main

import (
	"bufio"
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
//
// pingPongSize is a RoCEv2 RDMA WRITE_ONLY of 8 bytes (BTH, RETH,
// payload, ICRC): write_lat 8 B's request.
const pingPongSize = wire.BTHLen + wire.RETHLen + 8 + wire.ICRCLen

// pingPongWarmup round trips are made before the samples are taken.
const pingPongWarmup = 1000

// pingPongTimeout bounds a whole run of rounds (a lost datagram would
// stop it): 10 s, and 5 ms a round trip (a round trip between two
// emulated guests takes about one).
func pingPongTimeout(rounds int) time.Duration {
	return 10*time.Second + time.Duration(pingPongWarmup+rounds)*5*time.Millisecond
}

// pingPongResult is one ping-pong mode's half round trips, µs.
type pingPongResult struct {
	typical, p99 float64
}

func pingPong(mode string, rounds int) (pingPongResult, error) {
	if mode != "busy" && mode != "block" {
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
	var err error
	if mode == "busy" {
		d, err = pingPongBusy(rounds, to)
	} else {
		d, err = pingPongBlock(rounds, to)
	}
	if err != nil {
		return pingPongResult{}, err
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
// spun on.
func pingPongBusy(rounds int, to netip.AddrPort) ([]time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, _, err := rawSocket(localAddr())
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())}
	deadline := time.Now().Add(pingPongTimeout(rounds))
	buf := make([]byte, 2048)
	d := make([]time.Duration, 0, rounds)
	for i := range pingPongWarmup + rounds {
		start := time.Now()
		if err := unix.Sendto(fd, buf[:pingPongSize], 0, sa); err != nil {
			return nil, err
		}
		for k := 1; ; k++ {
			if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err == nil {
				break
			}
			if k%4096 == 0 && time.Now().After(deadline) {
				return nil, fmt.Errorf("ping-pong: no answer within %v", pingPongTimeout(rounds))
			}
		}
		if i >= pingPongWarmup {
			d = append(d, time.Since(start))
		}
	}
	return d, nil
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
// network poller.
func pingPongBlock(rounds int, to netip.AddrPort) ([]time.Duration, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(localAddr()), 0)))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(pingPongTimeout(rounds))); err != nil {
		return nil, err
	}
	buf := make([]byte, 2048)
	d := make([]time.Duration, 0, rounds)
	for i := range pingPongWarmup + rounds {
		start := time.Now()
		if _, err := c.WriteToUDPAddrPort(buf[:pingPongSize], to); err != nil {
			return nil, err
		}
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			return nil, fmt.Errorf("ping-pong: %w", err)
		}
		if i >= pingPongWarmup {
			d = append(d, time.Since(start))
		}
	}
	return d, nil
}
