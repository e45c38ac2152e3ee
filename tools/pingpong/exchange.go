package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"

	"github.com/softnic/softnic/tools/oob"
	"github.com/softnic/softnic/tools/toolnic"
)

// conn is the out-of-band connection with the pingpongs' messages.
type conn struct{ *oob.Conn }

func (c conn) write(b []byte, what string) error {
	if _, err := c.Write(b); err != nil {
		return fail(c.Timeout(err), "Couldn't send %s", what)
	}
	return nil
}

// readMsg reads one address message, giving up early when the first
// bytes show the peer speaks another protocol.
func (c conn) readMsg(what string) ([MsgSize]byte, error) {
	var b [MsgSize]byte
	n := 0
	for n < MsgSize {
		k, err := c.Read(b[n:])
		n += k
		if !LooksLikeDest(b[:n]) {
			return b, fail(&ErrFormat{Got: b[:n], Hint: guessPeer(b[:n])}, "Couldn't read %s", what)
		}
		if err != nil && n < MsgSize {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("the peer closed the connection after %d of %d bytes", n, MsgSize)
			}
			return b, fail(c.Timeout(err), "%d/%d: Couldn't read %s", n, MsgSize, what)
		}
	}
	return b, nil
}

func (c conn) readDone() error {
	var b [len(Done)]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the peer closed the connection before sending \"done\"")
		}
		return fail(c.Timeout(err), "Couldn't send/recv local address")
	}
	if b != Done {
		return fail(fmt.Errorf("got %q, want \"done\"", printable(b[:])), "Couldn't send/recv local address")
	}
	return nil
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

// writeDests sends the local addresses.
func (c conn) writeDests(my []Dest) error {
	for i := range my {
		m := my[i].Marshal()
		if err := c.write(m[:], "local address"); err != nil {
			return err
		}
	}
	return nil
}

// readDests reads n remote addresses.
func (c conn) readDests(n int) ([]Dest, error) {
	rem := make([]Dest, n)
	for i := range rem {
		b, err := c.readMsg("remote address")
		if err != nil {
			return nil, err
		}
		if rem[i], err = ParseDest(b[:]); err != nil {
			return nil, fail(err, "Couldn't read remote address")
		}
	}
	return rem, nil
}

// clientExchange sends n local addresses, reads n remote ones and sends
// "done" (pp_client_exch_dest; n is 1, or MaxQP for srq_pingpong).
func clientExchange(c conn, my []Dest) ([]Dest, error) {
	if err := c.writeDests(my); err != nil {
		return nil, err
	}
	rem, err := c.readDests(len(my))
	if err != nil {
		return nil, err
	}
	if err := c.write(Done[:], "\"done\""); err != nil {
		return nil, err
	}
	return rem, nil
}

// serverExchange reads n remote addresses, connects with them, sends n
// local ones and waits for "done" (pp_server_exch_dest).
func serverExchange(c conn, my []Dest, connect func([]Dest) error) ([]Dest, error) {
	rem, err := c.readDests(len(my))
	if err != nil {
		return nil, err
	}
	if err := connect(rem); err != nil {
		return nil, fail(err, "Couldn't connect to remote QP")
	}
	if err := c.writeDests(my); err != nil {
		return nil, err
	}
	if err := c.readDone(); err != nil {
		return nil, err
	}
	return rem, nil
}

// exchange runs the client or server side of the address exchange; the
// server connects its QPs (connect) before it answers, the client after.
func exchange(ctx context.Context, cfg *Config, env *toolnic.Env, my []Dest, connect func([]Dest) error) ([]Dest, error) {
	var nc net.Conn
	if cfg.ServerName != "" {
		c, err := oob.Dial(ctx, env.Dial, cfg.ServerName, cfg.Port, env.Stall, env.ConnectRetry)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fail(err, "Couldn't connect to %s:%d", cfg.ServerName, cfg.Port)
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
		c, err := oob.Accept(ctx, ln, env.AcceptTimeout)
		ln.Close() // the C server closes its listening socket once connected
		if err != nil {
			return nil, err
		}
		nc = c
	}
	c := conn{oob.NewConn(ctx, nc, env.Stall)}
	defer c.Close()
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
