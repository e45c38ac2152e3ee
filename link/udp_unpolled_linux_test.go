package link

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/softnic/softnic/wire"
)

// epollTargets returns the descriptors registered in the process's epoll
// sets (/proc/self/fdinfo of each eventpoll descriptor, "tfd:" lines),
// and how many epoll sets there are.
func epollTargets(t *testing.T) (map[int]bool, int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	tfd := regexp.MustCompile(`(?m)^tfd:\s+(\d+)\s`)
	fds, sets := map[int]bool{}, 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || !strings.Contains(target, "eventpoll") {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		sets++
		for _, m := range tfd.FindAllStringSubmatch(string(info), -1) {
			fd, _ := strconv.Atoi(m[1])
			fds[fd] = true
		}
	}
	return fds, sets
}

// An unpolled link's socket is in no epoll set of the process: a
// datagram wakes no thread in Go's netpoller. A polled one's is (which
// shows the check sees Go's registrations).
func TestUnpolledSocketOutOfNetpoller(t *testing.T) {
	for _, unpolled := range []bool{false, true} {
		t.Run(fmt.Sprintf("unpolled=%v", unpolled), func(t *testing.T) {
			if !unpolled && unpolledTest {
				t.Skip("every link is unpolled in this run")
			}
			l, err := ListenUDP(UDPConfig{Addr: netip.MustParseAddr("127.0.0.1"), Port: 0xFFE1, Unpolled: unpolled})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			fd := l.PollFD()
			fds, sets := epollTargets(t)
			if sets == 0 {
				t.Fatal("no epoll set in the process: Go's netpoller should have one")
			}
			if fds[fd] == unpolled {
				t.Errorf("socket %d in an epoll set: %v, want %v", fd, fds[fd], !unpolled)
			}
		})
	}
}

// awaitWaiting waits until the link's reader waits in ppoll (or is about
// to: fdSock.waiting).
func awaitWaiting(t *testing.T, s *fdSock) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !s.waiting.Load(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the reader never waited")
		}
	}
}

// A ReadBatch waiting in ppoll returns when woken (WakeRead, with a read
// yield that says so) and when the link is closed; Close returns only
// once that reader has let go of the descriptors, and every use after it
// fails.
func TestUnpolledWakeAndClose(t *testing.T) {
	l, err := ListenUDP(UDPConfig{Addr: netip.MustParseAddr("127.0.0.1"), Port: 0xFFE2, Unpolled: true})
	if err != nil {
		t.Fatal(err)
	}
	s := l.sock.(*fdSock)
	var woke atomic.Bool
	l.SetReadYield(woke.Load)
	type result struct {
		n   int
		err error
	}
	read := func() chan result {
		c := make(chan result, 1)
		go func() {
			n, err := l.ReadBatch(rxBatch(4))
			c <- result{n, err}
		}()
		return c
	}

	c := read()
	awaitWaiting(t, s)
	woke.Store(true)
	l.WakeRead()
	if r := <-c; r.n != 0 || r.err != nil {
		t.Fatalf("woken ReadBatch = %d, %v; want 0, nil", r.n, r.err)
	}

	woke.Store(false)
	c = read()
	awaitWaiting(t, s)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := <-c; r.n != 0 || !errors.Is(r.err, ErrLinkClosed) {
		t.Fatalf("ReadBatch across Close = %d, %v; want 0, %v", r.n, r.err, ErrLinkClosed)
	}
	if refs := s.refs.Load(); refs != fdClosed {
		t.Errorf("descriptor references after Close: %#x, want %#x (closed, none held)", refs, fdClosed)
	}
	if fd := l.PollFD(); fd != -1 {
		t.Errorf("PollFD after Close = %d, want -1", fd)
	}
	if err := s.Control(func(uintptr) { t.Error("Control ran after Close") }); err == nil {
		t.Error("Control after Close succeeded")
	}
	d := []Datagram{{Buf: make([]byte, 64), Encap: wire.Encap{Dst: netip.MustParseAddr("127.0.0.1"), DstPort: 0xFFE2, HopLimit: 64}}}
	if _, err := l.WriteBatch(d); !errors.Is(err, ErrLinkClosed) {
		t.Errorf("WriteBatch after Close: %v, want %v", err, ErrLinkClosed)
	}
}
