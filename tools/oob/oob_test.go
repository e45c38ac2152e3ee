package oob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDialRetry: a refused connection is tried again until the retry
// time has passed; any other failure, or no retry time, ends at once.
func TestDialRetry(t *testing.T) {
	refuse := func(n int, other error) (DialFunc, *int) {
		calls := 0
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			calls++
			if network != "tcp" || addr != "server:18515" {
				t.Errorf("dial %s %s, want tcp server:18515", network, addr)
			}
			if calls <= n {
				if other != nil {
					return nil, other
				}
				return nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
			}
			c, _ := net.Pipe()
			return c, nil
		}, &calls
	}
	ctx := context.Background()
	d, calls := refuse(2, nil)
	c, err := Dial(ctx, d, "server", 18515, time.Second, time.Minute)
	if err != nil || *calls != 3 {
		t.Fatalf("refused twice, retrying: %v after %d calls, want a connection at the third", err, *calls)
	}
	c.Close()

	d, calls = refuse(1, nil)
	_, err = Dial(ctx, d, "server", 18515, time.Second, 0)
	if want := "(is the server running, on TCP port 18515?)"; err == nil || !strings.Contains(err.Error(), want) || *calls != 1 {
		t.Errorf("refused, no retry: %v after %d calls, want one try and %q", err, *calls, want)
	}

	d, calls = refuse(1, errors.New("no route to host"))
	if _, err = Dial(ctx, d, "server", 18515, time.Second, time.Minute); err == nil || *calls != 1 {
		t.Errorf("unreachable: %v after %d calls, want the error at once", err, *calls)
	}
}

// TestAccept: the accept timeout and the context each end the wait for a
// client, with the error that says which.
func TestAccept(t *testing.T) {
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	_, err := Accept(context.Background(), listen(), 10*time.Millisecond)
	if want := "accept() failed: timeout: no client connected within 10ms"; err == nil || err.Error() != want {
		t.Errorf("timeout: %v, want %q", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Accept(ctx, listen(), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want %v", err, context.Canceled)
	}
	ln := listen()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
		}
	}()
	c, err := Accept(context.Background(), ln, time.Minute)
	if err != nil {
		t.Fatalf("a client: %v", err)
	}
	c.Close()
}

// TestConnStall: a read that waits out the stall timeout says so; the
// context's end ends a read at once.
func TestConnStall(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := NewConn(context.Background(), a, 20*time.Millisecond)
	go b.Write([]byte("hi"))
	buf := make([]byte, 2)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("Read = %q, %v, want \"hi\"", buf[:n], err)
	}
	_, err := c.Read(buf)
	if want := "timeout: the peer sent nothing for 20ms"; err == nil || c.Timeout(err).Error() != want {
		t.Errorf("silent peer: %v, want %q", err, want)
	}
	if err := errors.New("other"); c.Timeout(err) != err {
		t.Errorf("Timeout changed an error that is no timeout")
	}
	c.Close()

	a, b = net.Pipe()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c = NewConn(ctx, a, time.Hour)
	defer c.Close()
	done := make(chan error)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	cancel()
	if err := <-done; err == nil {
		t.Errorf("Read after the context ended: no error")
	}
}
