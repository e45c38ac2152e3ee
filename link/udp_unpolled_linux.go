package link

// The UDP link's socket as the link reaches it (udpSock): through Go's
// netpoller (netSock, the default), or outside it (fdSock,
// UDPConfig.Unpolled).
//
// Why outside. Go registers every socket it opens with its netpoller,
// edge-triggered (internal/poll, runtime/netpoll_epoll.go), and a thread
// with no goroutine to run blocks in epoll_wait until the next timer. In
// a C program running the engine (softnic's libibverbs) the program's
// thread keeps one P between its calls, and the engine's other P's thread
// waits in epoll: every datagram the kernel queues on the socket wakes
// it, though no goroutine waits there (the program's polls read the
// socket, NIC.Progress), and it blocks again: a context switch per
// datagram on each side (docs/performance.md, "softnic's libibverbs: the
// context switches of the engine's second P"). An unpolled socket is not
// in that epoll set: the link keeps a duplicate of its descriptor and
// closes the net.UDPConn (which takes the original out of the set), and a
// ReadBatch with nothing to read waits in ppoll(2) on the socket, a
// blocking system call on its own thread. A datagram then wakes a thread
// only when a reader really waits for it.
//
// The cost, and why only softnic's C library opens it so: the waiting
// goroutine holds its thread in a system call, and its P until the
// runtime's sysmon hands it off (20 µs to 10 ms later). The C library
// runs the engine with at least two Ps; the Go tools may run with one
// (GOMAXPROCS=1), where that wait would stall every other goroutine.

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// udpSock is the link's socket: a syscall.RawConn whose Read and Write
// wait for readiness between calls of their function, Control and Close
// excluded from each other (a descriptor is never closed under a
// callback), and the read wake-up (wakeReader).
type udpSock interface {
	syscall.RawConn
	// wake makes a Read waiting for readiness return errWake, or the
	// next one once it has called its function, until clearWake.
	wake()
	// clearWake takes back a wake-up (ReadBatch, before it looks at
	// what the wake-up was for).
	clearWake()
	// close closes the socket: waiting Reads and Writes return an
	// error, and so does every call after it.
	close() error
}

var (
	_ udpSock = netSock{}
	_ udpSock = (*fdSock)(nil)
)

// errWake is what fdSock.Read returns when woken (isWake).
var errWake = errors.New("link: read woken")

// isWake reports whether err is the wake-up of a waiting ReadBatch
// (udpSock.wake): a read deadline in the past on a netSock, errWake on
// an fdSock.
func isWake(err error) bool { return err == errWake || errors.Is(err, os.ErrDeadlineExceeded) }

// netSock is the socket in Go's netpoller: the net.UDPConn's RawConn,
// whose Read parks the goroutine on the poller. A wake-up is a read
// deadline in the past.
type netSock struct {
	syscall.RawConn
	conn *net.UDPConn
}

func (s netSock) wake()        { _ = s.conn.SetReadDeadline(time.Now()) }
func (s netSock) clearWake()   { _ = s.conn.SetReadDeadline(time.Time{}) }
func (s netSock) close() error { return s.conn.Close() }

// fdSock is the socket outside Go's netpoller (UDPConfig.Unpolled): a
// descriptor of its own, non-blocking as the net.UDPConn left it, and two
// eventfds a waiting Read polls beside it, one for wakeReader (wakefd)
// and one for close (closefd; Writes poll it too).
type fdSock struct {
	fd, wakefd, closefd int
	// refs counts the calls using the descriptors, plus fdClosed once
	// close began: close waits for the count to drop to zero (idle)
	// before it closes them, as internal/poll's fdMutex does.
	refs     atomic.Int64
	idle     chan struct{}
	idleOnce sync.Once
	closing  atomic.Bool
	// woken is a wake-up not taken back (wake, clearWake); waiting: a
	// Read is in ppoll or about to be, so a wake-up must write wakefd.
	// Each is stored before the other is loaded, so that either the
	// reader sees woken before it waits or the waker sees waiting and
	// writes.
	woken, waiting atomic.Bool
}

// fdClosed is the bit of fdSock.refs close sets.
const fdClosed = 1 << 40

// eventfdOne is the 8 bytes that add 1 to an eventfd's counter.
var eventfdOne = binary.NativeEndian.AppendUint64(nil, 1)

// newFDSock takes fd (the caller's from now on not) and makes its
// eventfds.
func newFDSock(fd int) (*fdSock, error) {
	s := &fdSock{fd: fd, wakefd: -1, closefd: -1, idle: make(chan struct{})}
	var err error
	if s.wakefd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
		s.closefd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	}
	if err != nil {
		for _, d := range []int{s.closefd, s.wakefd, fd} {
			if d >= 0 {
				unix.Close(d)
			}
		}
		return nil, os.NewSyscallError("eventfd", err)
	}
	return s, nil
}

// acquire takes a reference on the descriptors, false once close began.
func (s *fdSock) acquire() bool {
	if s.refs.Add(1)&fdClosed != 0 {
		s.release()
		return false
	}
	return true
}

// release drops a reference; the last one after close began lets close
// go on.
func (s *fdSock) release() {
	if s.refs.Add(-1) == fdClosed {
		s.idleOnce.Do(func() { close(s.idle) })
	}
}

// Control calls f with the descriptor, which stays open until f returns.
func (s *fdSock) Control(f func(fd uintptr)) error {
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	f(uintptr(s.fd))
	return nil
}

// Read calls f until it reports done, waiting in between for the socket
// to turn readable. It returns errWake when woken (wake) and
// net.ErrClosed when the socket is closed.
func (s *fdSock) Read(f func(fd uintptr) bool) error {
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	for !f(uintptr(s.fd)) {
		if err := s.wait(unix.POLLIN); err != nil {
			return err
		}
	}
	return nil
}

// Write calls f until it reports done, waiting in between for the socket
// to take more (send buffer space). It returns net.ErrClosed when the
// socket is closed.
func (s *fdSock) Write(f func(fd uintptr) bool) error {
	if !s.acquire() {
		return net.ErrClosed
	}
	defer s.release()
	for !f(uintptr(s.fd)) {
		if err := s.wait(unix.POLLOUT); err != nil {
			return err
		}
	}
	return nil
}

// wait blocks in ppoll until the socket reports ev (or an error), the
// socket is closed, or, for a read, a wake-up comes.
func (s *fdSock) wait(ev int16) error {
	read := ev == unix.POLLIN
	fds := [3]unix.PollFd{
		{Fd: int32(s.fd), Events: ev},
		{Fd: int32(s.closefd), Events: unix.POLLIN},
		{Fd: int32(s.wakefd), Events: unix.POLLIN},
	}
	nfds := 2
	if read {
		nfds = 3
	}
	for {
		if read {
			s.waiting.Store(true)
			if s.woken.Load() {
				s.waiting.Store(false)
				return errWake
			}
		}
		_, err := unix.Ppoll(fds[:nfds], nil, nil)
		if read {
			s.waiting.Store(false)
		}
		if s.closing.Load() {
			return net.ErrClosed
		}
		if err != nil && err != unix.EINTR {
			return os.NewSyscallError("ppoll", err)
		}
		if read && fds[2].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(s.wakefd, b[:]) // reset the counter
		}
		if read && s.woken.Load() {
			return errWake
		}
		if fds[0].Revents != 0 {
			return nil
		}
	}
}

// wake makes a waiting Read return errWake, or the next Read once its
// function found nothing to do.
func (s *fdSock) wake() {
	s.woken.Store(true)
	if s.waiting.Load() && s.acquire() {
		_, _ = unix.Write(s.wakefd, eventfdOne)
		s.release()
	}
}

func (s *fdSock) clearWake() { s.woken.Store(false) }

// close wakes every waiting Read and Write, waits for the calls using
// the descriptors to return, and closes them.
func (s *fdSock) close() error {
	if s.closing.Swap(true) {
		return net.ErrClosed
	}
	if s.refs.Add(fdClosed) != fdClosed {
		_, _ = unix.Write(s.closefd, eventfdOne)
		<-s.idle
	}
	unix.Close(s.wakefd)
	unix.Close(s.closefd)
	if err := unix.Close(s.fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// unpoll takes the link's socket out of Go's netpoller: it duplicates
// the descriptor, closes the net.UDPConn (which removes the original from
// the poller's epoll set before closing it) and makes l.sock the
// duplicate's fdSock.
func (l *UDPLink) unpoll(conn *net.UDPConn) error {
	dup := -1
	var dupErr error
	if err := l.sock.Control(func(fd uintptr) {
		dup, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return err
	}
	if dupErr != nil {
		return os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", dupErr)
	}
	s, err := newFDSock(dup)
	if err != nil {
		return err
	}
	conn.Close()
	l.sock = s
	return nil
}
