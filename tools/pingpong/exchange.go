package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// conn wraps the out-of-band connection so every read and write is
// bounded by the stall timeout and by ctx.
type conn struct {
	c     net.Conn
	stall time.Duration
	stop  func() bool
}

func newConn(ctx context.Context, c net.Conn, stall time.Duration) *conn {
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return &conn{c: c, stall: stall, stop: stop}
}

func (c *conn) close() {
	c.stop()
	c.c.Close()
}

func (c *conn) deadline() { c.c.SetDeadline(time.Now().Add(c.stall)) }

func (c *conn) write(b []byte, what string) error {
	c.deadline()
	if _, err := c.c.Write(b); err != nil {
		return fail(ioErr(err, c.stall), "Couldn't send %s", what)
	}
	return nil
}

// readMsg reads one address message, giving up early when the first
// bytes show the peer speaks another protocol.
func (c *conn) readMsg(what string) ([MsgSize]byte, error) {
	var b [MsgSize]byte
	n := 0
	for n < MsgSize {
		c.deadline()
		k, err := c.c.Read(b[n:])
		n += k
		if !LooksLikeDest(b[:n]) {
			return b, fail(&ErrFormat{Got: b[:n], Hint: guessPeer(b[:n])}, "Couldn't read %s", what)
		}
		if err != nil && n < MsgSize {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("the peer closed the connection after %d of %d bytes", n, MsgSize)
			}
			return b, fail(ioErr(err, c.stall), "%d/%d: Couldn't read %s", n, MsgSize, what)
		}
	}
	return b, nil
}

func (c *conn) readDone() error {
	var b [len(Done)]byte
	c.deadline()
	if _, err := io.ReadFull(c.c, b[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the peer closed the connection before sending \"done\"")
		}
		return fail(ioErr(err, c.stall), "Couldn't send/recv local address")
	}
	if b != Done {
		return fail(fmt.Errorf("got %q, want \"done\"", printable(b[:])), "Couldn't send/recv local address")
	}
	return nil
}

// ioErr turns a deadline into a stall error.
func ioErr(err error, stall time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("timeout: the peer sent nothing for %v", stall)
	}
	return err
}

// listen opens the server's socket as pp_server_exch_dest does (any
// address, SO_REUSEADDR), with a clear error for a port in use.
func listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fail(err, "Couldn't listen to port %d (TCP port %d is in use: another pingpong server? pick another -p)", port, port)
		}
		return nil, fail(err, "Couldn't listen to port %d", port)
	}
	return ln, nil
}

// accept waits for the client, bounded by ctx and timeout (0: none).
func accept(ctx context.Context, ln net.Listener, timeout time.Duration) (net.Conn, error) {
	if tl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { tl.SetDeadline(time.Unix(1, 0)) })
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
			return nil, fail(fmt.Errorf("timeout: no client connected within %v", timeout), "accept() failed")
		}
		return nil, fail(err, "accept() failed")
	}
	return c, nil
}

// dial connects to the server as pp_client_exch_dest does; with
// env.ConnectRetry it keeps trying a refused connection for that long.
func dial(ctx context.Context, env *Env, host string, port int) (net.Conn, error) {
	c, err := DialRetry(ctx, env.Dial, host, port, env.Stall, env.ConnectRetry)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail(err, "Couldn't connect to %s:%d", host, port)
	}
	return c, nil
}

// DialRetry connects to host:port with d (nil: a net.Dialer), each
// attempt bounded by timeout; while the connection is refused it tries
// again until retry has passed. A refused connection's error says that
// no server listens.
func DialRetry(ctx context.Context, d func(ctx context.Context, network, addr string) (net.Conn, error), host string, port int, timeout, retry time.Duration) (net.Conn, error) {
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

// clientExchange sends n local addresses, reads n remote ones and sends
// "done" (pp_client_exch_dest; n is 1, or MaxQP for srq_pingpong).
func clientExchange(c *conn, my []Dest) ([]Dest, error) {
	for i := range my {
		m := my[i].Marshal()
		if err := c.write(m[:], "local address"); err != nil {
			return nil, err
		}
	}
	rem := make([]Dest, len(my))
	for i := range rem {
		b, err := c.readMsg("remote address")
		if err != nil {
			return nil, err
		}
		if rem[i], err = ParseDest(b[:]); err != nil {
			return nil, fail(err, "Couldn't read remote address")
		}
	}
	if err := c.write(Done[:], "\"done\""); err != nil {
		return nil, err
	}
	return rem, nil
}

// serverExchange reads n remote addresses, connects with them, sends n
// local ones and waits for "done" (pp_server_exch_dest).
func serverExchange(c *conn, my []Dest, connect func([]Dest) error) ([]Dest, error) {
	rem := make([]Dest, len(my))
	for i := range rem {
		b, err := c.readMsg("remote address")
		if err != nil {
			return nil, err
		}
		if rem[i], err = ParseDest(b[:]); err != nil {
			return nil, fail(err, "Couldn't read remote address")
		}
	}
	if err := connect(rem); err != nil {
		return nil, fail(err, "Couldn't connect to remote QP")
	}
	for i := range my {
		m := my[i].Marshal()
		if err := c.write(m[:], "local address"); err != nil {
			return nil, err
		}
	}
	if err := c.readDone(); err != nil {
		return nil, err
	}
	return rem, nil
}

// exchange runs the client or server side of the address exchange; the
// server connects its QPs (connect) before it answers, the client after.
func exchange(ctx context.Context, cfg *Config, env *Env, my []Dest, connect func([]Dest) error) ([]Dest, error) {
	var nc net.Conn
	if cfg.ServerName != "" {
		c, err := dial(ctx, env, cfg.ServerName, cfg.Port)
		if err != nil {
			return nil, err
		}
		nc = c
	} else {
		ln := env.Listener
		if ln == nil {
			l, err := listen(cfg.Port)
			if err != nil {
				return nil, err
			}
			ln = l
		}
		c, err := accept(ctx, ln, env.AcceptTimeout)
		ln.Close() // the C server closes its listening socket once connected
		if err != nil {
			return nil, err
		}
		nc = c
	}
	c := newConn(ctx, nc, env.Stall)
	defer c.close()
	var rem []Dest
	var err error
	if cfg.ServerName != "" {
		rem, err = clientExchange(c, my)
	} else {
		rem, err = serverExchange(c, my, connect)
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rem, err
}
