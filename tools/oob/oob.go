// Package oob is the out-of-band TCP connection over which softnic's
// pingpongs (rdma-core's pp_client_exch_dest and pp_server_exch_dest,
// xsrq_pingpong's pp_client_connect) and perftest look-alikes (perftest's
// ethernet_client_connect and ethernet_server_connect) exchange their
// QPs' addresses before any RDMA traffic: a client that dials, retrying
// a server that does not listen yet; a server that accepts within a
// bound; and a connection whose every read and write is bounded by the
// stall timeout and ends with the run's context. Each tool keeps its own
// messages and their order.
package oob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// DialFunc connects to addr on network, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial connects a client to host:port with d (nil: a net.Dialer), each
// attempt bounded by timeout. While the connection is refused it tries
// again, every 20 ms, until retry has passed (0: one try, as the C tools
// do); a refused connection's error then says that no server listens.
func Dial(ctx context.Context, d DialFunc, host string, port int, timeout, retry time.Duration) (net.Conn, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if d == nil {
		var nd net.Dialer
		d = nd.DialContext
	}
	until := time.Now().Add(retry)
	for {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		c, err := d(dctx, "tcp", addr)
		cancel()
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			return nil, err
		}
		if time.Now().After(until) {
			return nil, fmt.Errorf("%w (is the server running, on TCP port %d?)", err, port)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Accept waits for one client on ln, bounded by ctx (its error then) and
// by timeout (0: none). Its other errors read "accept() failed: ...". The
// caller closes ln: the C servers close their listening socket once the
// client is in.
func Accept(ctx context.Context, ln net.Listener, timeout time.Duration) (net.Conn, error) {
	if tl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { tl.SetDeadline(past) })
		defer stop()
		if timeout > 0 {
			tl.SetDeadline(time.Now().Add(timeout))
		}
	}
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("accept() failed: timeout: no client connected within %v", timeout)
		}
		return nil, fmt.Errorf("accept() failed: %w", err)
	}
	return c, nil
}

// Conn is an open out-of-band connection. Each Read and Write waits at
// most the stall timeout, and all of them end when the context given to
// NewConn ends.
type Conn struct {
	c     net.Conn
	ctx   context.Context
	stall time.Duration
	stop  func() bool
}

// past is a deadline that has passed: it ends every wait on a
// connection at once.
var past = time.Unix(1, 0)

// NewConn wraps c, bounding each wait by stall and ending with ctx.
func NewConn(ctx context.Context, c net.Conn, stall time.Duration) *Conn {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(past) })
	return &Conn{c: c, ctx: ctx, stall: stall, stop: stop}
}

// Stall is the bound of each wait.
func (c *Conn) Stall() time.Duration { return c.stall }

// arm sets the deadline of the next wait. A context that ended since the
// connection opened keeps the deadline in the past: the stall's deadline
// must not undo the context's.
func (c *Conn) arm() {
	c.c.SetDeadline(time.Now().Add(c.stall))
	if c.ctx.Err() != nil {
		c.c.SetDeadline(past)
	}
}

// Read reads what the peer sent, waiting at most the stall timeout.
func (c *Conn) Read(b []byte) (int, error) {
	c.arm()
	return c.c.Read(b)
}

// Write writes b, waiting at most the stall timeout.
func (c *Conn) Write(b []byte) (int, error) {
	c.arm()
	return c.c.Write(b)
}

// Close ends the connection.
func (c *Conn) Close() error {
	c.stop()
	return c.c.Close()
}

// Timeout turns the error of a Read or Write that waited out the stall
// timeout into one that says so; other errors it returns as they are.
func (c *Conn) Timeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("timeout: the peer sent nothing for %v", c.stall)
	}
	return err
}
