package link

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/softnic/softnic/wire"
)

// DatagramWriter records RoCEv2 datagrams; *capture.Writer is one. It
// must be safe for concurrent use (processors write concurrently).
type DatagramWriter interface {
	WriteDatagram(ts time.Time, e *wire.Encap, udpPayload []byte) error
}

// PcapLink is a Link that records every datagram another Link reads and
// writes (the --pcap option of the command-line tools). It is for tools
// and debugging, not the fast path: each record is written under the
// writer's lock.
//
// Records show what was on the wire: a written datagram is recorded after
// the inner link's WriteBatch, which for a UDP link has rewritten the
// Encap to the headers the kernel sent and patched the ICRC to match (see
// UDPLink). A read datagram whose IPv4 identification the inner link
// guessed (ICRCGuessedIPv4ID) is checked first (Datagram.CheckICRC),
// which solves for the identification and leaves the verdict for the
// engine, so that every record's ICRC checks ("softnic decode") and no
// CRC pass is spent twice; IPv4ICRCSkip leaves a guessed identification,
// which the record then shows. A
// datagram whose Encap has no source address (the fabric lets senders
// leave it unset) is recorded from the link's address.
//
// A PcapLink has TryReadBatch whatever it wraps (a method set is fixed
// by the type), so CanPoll says whether that reads the network: it does
// when the inner link is a Poller.
type PcapLink struct {
	l      Link
	w      DatagramWriter
	now    func() time.Time
	closed atomic.Bool

	mu  sync.Mutex
	err error // first write error; guarded by mu
}

// The capabilities a PcapLink forwards to the link it wraps (caps.go); it
// has neither SplitSender (it records Buf alone) nor LinkCloser (the
// engine unwraps it).
var (
	_ Link                   = (*PcapLink)(nil)
	_ ConditionalPoller      = (*PcapLink)(nil)
	_ ConditionalMulticaster = (*PcapLink)(nil)
	_ BusyPollPreferrer      = (*PcapLink)(nil)
	_ ReadYielder            = (*PcapLink)(nil)
	_ ReadWaker              = (*PcapLink)(nil)
	_ Sequencer              = (*PcapLink)(nil)
	_ Lender                 = (*PcapLink)(nil)
	_ Unwrapper              = (*PcapLink)(nil)
	_ StateWatcher           = (*PcapLink)(nil)
	_ ErrorWatcher           = (*PcapLink)(nil)
	_ Resolver               = (*PcapLink)(nil)
)

// NewPcapLink returns l recording to w, timestamped with the wall clock.
func NewPcapLink(l Link, w DatagramWriter) *PcapLink {
	return &PcapLink{l: l, w: w, now: time.Now}
}

// Unwrap returns the inner link.
func (p *PcapLink) Unwrap() Link { return p.l }

// Err returns the first error the writer returned; recording goes on
// after it (a tool reports it at exit).
func (p *PcapLink) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ReadBatch reads from the inner link and records what it returns.
func (p *PcapLink) ReadBatch(msgs []Datagram) (int, error) {
	n, err := p.l.ReadBatch(msgs)
	p.recordRead(msgs[:n])
	return n, err
}

// TryReadBatch reads from the inner link without waiting when it is a
// Poller, and records what it returns as ReadBatch does. When it is not,
// it has no way to look without waiting and returns 0 and no error
// (ErrLinkClosed once closed): what arrives is left for ReadBatch, which
// carries the receive alone. CanPoll tells the two apart.
func (p *PcapLink) TryReadBatch(msgs []Datagram) (int, error) {
	q, ok := p.l.(Poller)
	if !ok {
		if c, ok := p.l.(LinkCloser); p.closed.Load() || ok && c.Closed() {
			return 0, ErrLinkClosed
		}
		return 0, nil
	}
	n, err := q.TryReadBatch(msgs)
	p.recordRead(msgs[:n])
	return n, err
}

// CanPoll reports whether TryReadBatch reads the inner link (the
// package's CanPoll asks it): the inner link can poll.
func (p *PcapLink) CanPoll() bool { return CanPoll(p.l) }

// Lend asks the wrapped link to lend (link.Lend): a read datagram is
// recorded before it is handed over, so its Loan changes nothing here.
func (p *PcapLink) Lend() bool { return Lend(p.l) }

// NextSeq is the inner link's (the package's NextSeq).
func (p *PcapLink) NextSeq() (uint64, bool) { return NextSeq(p.l) }

// PreferBusyPoll is the inner link's (the package's PreferBusyPoll).
func (p *PcapLink) PreferBusyPoll() bool { return PreferBusyPoll(p.l) }

// SetReadYield sets the inner link's (the package's SetReadYield): a
// ReadBatch that returns 0 datagrams records nothing.
func (p *PcapLink) SetReadYield(yield func() bool) bool { return SetReadYield(p.l, yield) }

// WakeRead wakes the inner link's reader (the package's WakeRead).
func (p *PcapLink) WakeRead() bool { return WakeRead(p.l) }

// recordRead records datagrams read, each IPv4 identification the inner
// link guessed solved first.
func (p *PcapLink) recordRead(msgs []Datagram) {
	if len(msgs) == 0 {
		return
	}
	ts := p.now()
	for i := range msgs {
		d := &msgs[i]
		if d.ICRC == ICRCGuessedIPv4ID {
			d.CheckICRC() // solves Encap.ID; the engine takes the verdict
		}
		p.record(ts, d)
	}
}

// WriteBatch writes through the inner link, then records msgs as sent.
func (p *PcapLink) WriteBatch(msgs []Datagram) (int, error) {
	n, err := p.l.WriteBatch(msgs)
	if err == nil {
		ts := p.now()
		for i := range msgs {
			p.record(ts, &msgs[i])
		}
	}
	return n, err
}

func (p *PcapLink) record(ts time.Time, d *Datagram) {
	e := d.Encap
	if !e.Src.IsValid() {
		e.Src = p.l.LocalAddr()
		if e.Dst.Unmap().Is4() {
			e.Src = e.Src.Unmap()
		}
	}
	if !e.Dst.IsValid() || d.Err != 0 {
		return // the link dropped it; nothing went on the wire
	}
	if err := p.w.WriteDatagram(ts, &e, d.Buf); err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
	}
}

// JoinGroup joins group on the inner link (Multicaster); EOPNOTSUPP when
// it cannot receive multicast.
func (p *PcapLink) JoinGroup(group netip.Addr) error {
	if m, ok := p.l.(Multicaster); ok && CanMulticast(p.l) {
		return m.JoinGroup(group)
	}
	return fmt.Errorf("%w: the link cannot receive multicast", syscall.EOPNOTSUPP)
}

// LeaveGroup leaves group on the inner link (Multicaster).
func (p *PcapLink) LeaveGroup(group netip.Addr) error {
	if m, ok := p.l.(Multicaster); ok && CanMulticast(p.l) {
		return m.LeaveGroup(group)
	}
	return fmt.Errorf("%w: the link cannot receive multicast", syscall.EOPNOTSUPP)
}

// CanMulticast reports whether the inner link receives multicast (the
// package's CanMulticast asks it).
func (p *PcapLink) CanMulticast() bool { return CanMulticast(p.l) }

// BatchSize returns the inner link's.
func (p *PcapLink) BatchSize() int { return p.l.BatchSize() }

// LocalAddr returns the inner link's.
func (p *PcapLink) LocalAddr() netip.Addr { return p.l.LocalAddr() }

// MTU returns the inner link's.
func (p *PcapLink) MTU() int { return p.l.MTU() }

// SrcPort returns the inner link's.
func (p *PcapLink) SrcPort() uint16 { return p.l.SrcPort() }

// LinkState returns the inner link's (State).
func (p *PcapLink) LinkState() (LinkState, bool) { return State(p.l) }

// WatchLinkState watches the inner link's (WatchState).
func (p *PcapLink) WatchLinkState(fn func()) (func(), bool) { return WatchState(p.l, fn) }

// WatchSendErrors watches the inner link's (WatchSendErrors).
func (p *PcapLink) WatchSendErrors(fn func(SendError)) (func(), bool) {
	return WatchSendErrors(p.l, fn)
}

// ResolveRoute asks the inner link (ResolveRoute).
func (p *PcapLink) ResolveRoute(ctx context.Context, dst netip.Addr) (Route, error) {
	return ResolveRoute(ctx, p.l, dst)
}

// Close closes the inner link; the writer is the caller's to flush and
// close.
func (p *PcapLink) Close() error {
	p.closed.Store(true)
	return p.l.Close()
}
