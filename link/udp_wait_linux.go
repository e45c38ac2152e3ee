package link

// ReadBatch's wait on Go's poller, and what takes it off the socket for
// a busy-polling application (PreferBusyPoll, SetReadYield, WakeRead).
// The receive pass it makes is in udp_recv_linux.go.
//
// ReadBatch makes its passes inside RawConn.Read's callback and waits by
// returning false from it: FD.RawRead (internal/poll/fd_unix.go) then
// parks on the runtime poller (pollDesc.waitRead) holding the read lock,
// which only ReadBatch callers take.
//
// The pass has to be inside the callback, not before RawConn.Read: RawRead
// first clears the descriptor's readiness (pollDesc.prepareRead, the
// runtime's poll_runtime_pollReset), so a datagram arriving between an
// earlier empty pass and that reset would leave no readiness behind and
// the reader would park with it queued. Inside the callback every pass
// follows the reset; every datagram queued after it wakes the socket's
// waiters (net/ipv4/udp.c: __udp_enqueue_schedule_skb calls
// sk_data_ready), which the runtime's edge-triggered epoll turns into
// readiness that waitRead consumes without parking if it came first. So a
// ReadBatch parks only after a pass, under rxMu, found no leftovers and
// an empty socket, and whatever arrives later wakes it; datagrams or GRO
// leftovers TryReadBatch leaves behind came from such arrivals. A woken
// reader whose datagrams TryReadBatch took finds nothing and parks again.
//
// An unpolled socket (UDPConfig.Unpolled, fdSock) waits in ppoll(2)
// instead, which reports the socket's state when it is called (level,
// not edge): a datagram queued after the last empty pass is seen by the
// next ppoll, and the same holds.

import "golang.org/x/sys/unix"

// udpWait is ReadBatch's state for RawConn.Read's callback, guarded by
// waitMu, which ReadBatch holds while it waits.
type udpWait struct {
	l      *UDPLink
	msgs   []Datagram
	n      int
	closed bool
	fn     func(uintptr) bool
}

// ReadBatch blocks until datagrams arrive and fills msgs[:n]: each Buf
// resliced within its capacity, Encap from the socket (see UDPLink), an
// IPv4 datagram's identification guessed (ICRCGuessedIPv4ID) or, in the
// IPv4ICRCSkip mode, ICRCUnverifiable. Datagrams longer than their buffer
// are dropped and counted; a failed recvmmsg is counted and retried.
// While it waits it holds nothing TryReadBatch needs. It returns 0
// datagrams when it finds the socket empty and its read yield says so
// (SetReadYield). After Close it returns ErrLinkClosed.
func (l *UDPLink) ReadBatch(msgs []Datagram) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	l.waitMu.Lock()
	defer l.waitMu.Unlock()
	w := &l.wait
	woken := false
	for {
		if woken || l.mc.queued.Swap(false) {
			// Multicast (udp_mcast_linux.go): clear the deadline a
			// group's reader sets to wake us, then take what it queued.
			// A reader that queues after the Swap also sets the
			// deadline, so the Read below returns at once: no datagram
			// waits for the next unicast one.
			l.sock.clearWake()
			if n := l.takeMcast(msgs); n > 0 {
				return n, nil
			}
		}
		w.msgs, w.n, w.closed = msgs, 0, false
		err := l.sock.Read(w.fn)
		n, closed := w.n, w.closed
		w.msgs = nil
		if err != nil && !closed && !l.closed.Load() && isWake(err) {
			woken = true
			continue
		}
		if err != nil || closed {
			return 0, ErrLinkClosed
		}
		return n, nil
	}
}

// read is ReadBatch's RawConn.Read callback: passes until one delivers,
// false (wait for readiness) when the socket is empty, true when the link
// is closed. It runs after RawRead's readiness reset (see the notes at
// the top of this file).
func (w *udpWait) read(fd uintptr) bool {
	l := w.l
	for {
		if l.closed.Load() {
			w.closed = true
			return true
		}
		l.rxMu.Lock()
		n, e := l.rx.pass(fd, w.msgs)
		l.rxMu.Unlock()
		l.tellErrors()
		if n > 0 {
			w.n = n
			return true
		}
		if e == unix.EAGAIN {
			// SetReadYield: step off here, at a wake-up that found the
			// datagram taken by a poll, or wait on for the next one.
			y := l.yield.Load()
			return y != nil && (*y)()
		}
		// A failed call (counted), or datagrams all dropped as
		// truncated: what else is queued sends no new readiness, so
		// try again now.
	}
}

// PreferBusyPoll is true: see the package's PreferBusyPoll.
func (l *UDPLink) PreferBusyPoll() bool { return true }

// SetReadYield sets the question ReadBatch asks when it finds the
// socket empty (the package's SetReadYield): true makes it return 0
// datagrams. nil takes it away.
func (l *UDPLink) SetReadYield(yield func() bool) bool {
	if yield == nil {
		l.yield.Store(nil)
	} else {
		l.yield.Store(&yield)
	}
	return true
}

// WakeRead wakes a ReadBatch waiting on the socket (the package's
// WakeRead; wakeReader): it then asks its read yield and returns 0
// datagrams if that says so, or waits on. It reports false once the link
// is closed.
func (l *UDPLink) WakeRead() bool {
	if l.closed.Load() {
		return false
	}
	l.wakeReader()
	return true
}

// wakeReader makes a ReadBatch parked on the socket return from its wait
// now, or the next one at once: it sets the socket's read deadline in
// the past, which ReadBatch takes as a wake-up (isWake), clears, and
// follows with a look at the multicast queue and a new pass over the
// socket (with its read yield). ReadBatch clears the deadline before it
// looks, so a wake-up set after the look is not lost. The multicast
// readers, TryReadBatch's GRO leftovers and WakeRead use it.
func (l *UDPLink) wakeReader() { l.sock.wake() }
