//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// The two-host modes measure the floors between two machines (the
// guests of scripts/bench --guests): udpbench -serve ADDR:PORT on one
// answers a udpbench -peer ADDR:PORT on the other. Over one TCP
// connection for each mode, the peer asks for a receiver or an echo, the
// server binds a UDP socket on ADDR (port chosen by the kernel) and
// answers with its port:
//
//	recv GRO SIZE   receive raw SIZE-byte datagrams (GRO 1: with UDP_GRO)
//	                and count them until the line "stop", then answer
//	                "got BYTES PKTS"
//	echo MODE       answer every datagram at once (busy, block or turn,
//	                the ping-pong's modes) until the connection closes
//
// Answers are "port N" or "error TEXT". Only the raw modes and the
// ping-pong have two-host versions: the link modes need both ends in one
// process.

// ctlTimeout bounds each control exchange (not a mode's run).
const ctlTimeout = 30 * time.Second

// serve answers peers on addr until it fails; it prints "serving ADDR"
// when it listens.
func serve(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("-serve %q: %w", addr, err)
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Printf("serving %v\n", ln.Addr())
	return serveOn(ln)
}

// serveOn answers the peers that connect to ln until it is closed; their
// UDP sockets bind ln's address.
func serveOn(ln *net.TCPListener) error {
	local := ln.Addr().(*net.TCPAddr).AddrPort().Addr()
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			if err := serveOne(c, local); err != nil {
				fmt.Fprintf(os.Stderr, "udpbench -serve: %v: %v\n", c.RemoteAddr(), err)
				fmt.Fprintf(c, "error %v\n", err)
			}
		}()
	}
}

// serveOne answers one peer's request on c; local is the address its UDP
// socket binds.
func serveOne(c *net.TCPConn, local netip.Addr) error {
	r := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(ctlTimeout))
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	q, err := parseRequest(line)
	if err != nil {
		return err
	}
	switch q.kind {
	case "recv":
		u, rc, err := listen(local.String(), 0)
		if err != nil {
			return err
		}
		rx, err := startRawRecv(u, rc, q.gro, q.size)
		if err != nil {
			u.Close()
			return err
		}
		fmt.Fprintf(c, "port %d\n", u.LocalAddr().(*net.UDPAddr).Port)
		c.SetDeadline(time.Time{}) // the peer sends for as long as it was told to
		line, err := r.ReadString('\n')
		bytes, pkts := rx.stop()
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "stop" {
			return fmt.Errorf("want stop, got %q", line)
		}
		_, err = fmt.Fprintf(c, "got %d %d\n", bytes, pkts)
		return err
	default: // "echo"
		e, err := startEcho(q.mode, local)
		if err != nil {
			return err
		}
		defer e.stop()
		fmt.Fprintf(c, "port %d\n", e.port)
		c.SetDeadline(time.Time{})
		_, err = r.ReadString('\n') // EOF when the peer is done
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = errors.New("the peer said more than the echo needs")
		}
		return err
	}
}

// request is a peer's request line, parsed.
type request struct {
	kind string // "recv" or "echo"
	gro  bool   // recv: with UDP_GRO
	size int    // recv: datagram bytes, 1 to 65507
	mode string // echo: a ping-pong mode
}

// parseRequest reads "recv GRO SIZE" or "echo MODE" (the line from the
// network: anything else is an error).
func parseRequest(line string) (request, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "recv" && (f[1] == "0" || f[1] == "1"):
		sz, err := strconv.Atoi(f[2])
		if err != nil || sz <= 0 || sz > 0xFFFF-28 {
			return request{}, fmt.Errorf("datagram size %q", f[2])
		}
		return request{kind: "recv", gro: f[1] == "1", size: sz}, nil
	case len(f) == 2 && f[0] == "echo" && pingPongMode(f[1]):
		return request{kind: "echo", mode: f[1]}, nil
	}
	return request{}, fmt.Errorf("unknown request %q", strings.TrimSpace(line))
}

// ctl is a peer's control connection to a -serve.
type ctl struct {
	c *net.TCPConn
	r *bufio.Reader
}

// dialCtl connects to the server at addr and asks it req; it returns the
// connection and the port of the server's UDP socket.
func dialCtl(addr, req string) (*ctl, int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, 0, fmt.Errorf("-peer %q: %w", addr, err)
	}
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(ap))
	if err != nil {
		return nil, 0, err
	}
	k := &ctl{c: c, r: bufio.NewReader(c)}
	f, err := k.ask(req)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	port := 0
	if len(f) == 2 && f[0] == "port" {
		port, _ = strconv.Atoi(f[1])
	}
	if port <= 0 || port > 0xFFFF {
		c.Close()
		return nil, 0, fmt.Errorf("server %v: answered %q to %q", addr, strings.Join(f, " "), req)
	}
	return k, port, nil
}

// ask sends a line and returns the answer's fields; an "error" answer is
// an error.
func (k *ctl) ask(line string) ([]string, error) {
	k.c.SetDeadline(time.Now().Add(ctlTimeout))
	defer k.c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(k.c, "%s\n", line); err != nil {
		return nil, err
	}
	a, err := k.r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("server's answer to %q: %w", line, err)
	}
	if msg, ok := strings.CutPrefix(a, "error "); ok {
		return nil, fmt.Errorf("server: %s", strings.TrimSpace(msg))
	}
	return strings.Fields(a), nil
}

// runRawRemote is a raw mode against the server at addr: it sends from
// -local, the server receives.
func runRawRemote(addr string, gso, gro bool) (result, error) {
	k, port, err := dialCtl(addr, fmt.Sprintf("recv %d %d", map[bool]int{false: 0, true: 1}[gro], *size))
	if err != nil {
		return result{}, err
	}
	defer k.c.Close()
	u, rc, err := listen(*local, 0)
	if err != nil {
		return result{}, err
	}
	defer u.Close()
	to := netip.AddrPortFrom(netip.MustParseAddrPort(addr).Addr(), uint16(port))
	sent, elapsed, err := rawSend(rc, to, gso)
	if err != nil {
		return result{}, err
	}
	time.Sleep(50 * time.Millisecond) // drain
	f, err := k.ask("stop")
	if err != nil {
		return result{}, err
	}
	r := result{sent: sent, elapsed: elapsed}
	if len(f) != 3 || f[0] != "got" {
		return result{}, fmt.Errorf("server answered %q to stop", strings.Join(f, " "))
	}
	r.bytes, err = strconv.ParseInt(f[1], 10, 64)
	if err == nil {
		r.pkts, err = strconv.ParseInt(f[2], 10, 64)
	}
	if err != nil {
		return result{}, fmt.Errorf("server answered %q to stop: %w", strings.Join(f, " "), err)
	}
	return r, nil
}
