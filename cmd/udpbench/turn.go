//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// The turn mode is the floor of softnic's write_lat turn rather than of
// one datagram: each side answers the other's RDMA WRITE with the two
// datagrams an RC responder that is also the next requester sends, the
// ACK of the WRITE it got (20 bytes: BTH, AETH, ICRC) and its own WRITE
// (40 bytes), through softnic's UDP link (link.UDPLink, as the engine
// configures it: GSO, GRO and lending on) with one WriteBatch, which
// sends the pair as one GSO send as the engine's gsoPair orders it; and
// each side waits for both of the other's in ReadBatch, parked in Go's
// network poller as softnic's receive goroutine waits. No engine, no
// verbs, no second goroutine: what softnic's write_lat costs beyond it is
// softnic's own work.

// turnPortBase is where a turn side starts looking for a free port (the
// link binds one port and sends from it).
const turnPortBase = 47930

// turnQPN is the destination QP the turn's datagrams carry.
const turnQPN = 0x11

// turnLink opens a UDP link on addr on the first free port from
// turnPortBase, lending its GRO buffers as the engine has it.
func turnLink(addr netip.Addr) (*link.UDPLink, error) {
	var err error
	for port := turnPortBase; port < turnPortBase+200; port++ {
		var l *link.UDPLink
		if l, err = link.ListenUDP(link.UDPConfig{Addr: addr, Port: uint16(port)}); err == nil {
			l.Lend()
			return l, nil
		}
	}
	return nil, fmt.Errorf("turn: no free UDP port from %d on %v: %w", turnPortBase, addr, err)
}

// turnSide is one side's link and the two datagrams it sends each turn,
// built again for every turn as the engine builds each packet.
type turnSide struct {
	l     *link.UDPLink
	tx    [2]link.Datagram
	txBuf [2][]byte
	rx    []link.Datagram
	rxBuf [][]byte // rx's own buffers, which a lent datagram's Buf replaced
}

func newTurnSide(l *link.UDPLink) *turnSide {
	s := &turnSide{l: l, rx: make([]link.Datagram, l.BatchSize()), rxBuf: make([][]byte, l.BatchSize())}
	for i := range s.txBuf {
		s.txBuf[i] = make([]byte, link.MaxDatagram)
	}
	for i := range s.rx {
		s.rxBuf[i] = make([]byte, 0, link.MaxDatagram)
		s.rx[i].Buf = s.rxBuf[i]
	}
	return s
}

// send writes round i's WRITE (the round in its payload and PSN) and the
// ACK of the peer's WRITE of the same round to 'to', longer first, in one
// WriteBatch.
func (s *turnSide) send(i uint32, to netip.AddrPort) error {
	if err := s.build(i, to); err != nil {
		return err
	}
	return s.write(s.tx[:])
}

// write sends ds with one WriteBatch.
func (s *turnSide) write(ds []link.Datagram) error {
	if _, err := s.l.WriteBatch(ds); err != nil {
		return err
	}
	for k := range ds {
		if ds[k].Err != 0 {
			return fmt.Errorf("turn: send: %w", ds[k].Err)
		}
	}
	return nil
}

// build makes round i's two datagrams to 'to' in s.tx: the WRITE, then
// the ACK.
func (s *turnSide) build(i uint32, to netip.AddrPort) error {
	e := wire.Encap{Src: s.l.LocalAddr(), Dst: to.Addr(), SrcPort: s.l.SrcPort(), DstPort: to.Port(),
		HopLimit: 64, FragOff: wire.IPv4DF}
	psn := wire.PSN(i & wire.PSNMask)
	var payload [8]byte
	binary.BigEndian.PutUint32(payload[:], i)
	write := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PKey: wire.DefaultPKey, DestQP: turnQPN, PSN: psn, AckReq: true},
		RETH: wire.RETHFields{VA: 0x1000, RKey: 0x1234, DMALen: uint32(len(payload))}}
	ack := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck, PKey: wire.DefaultPKey, DestQP: turnQPN, PSN: psn},
		AETH: wire.AETHFields{MSN: i & wire.PSNMask}}
	for k, h := range []*wire.Headers{&write, &ack} {
		var p []byte
		if k == 0 {
			p = payload[:]
		}
		n, err := wire.Build(s.txBuf[k], &e, h, p)
		if err != nil {
			return err
		}
		s.tx[k] = link.Datagram{Encap: e, Buf: s.txBuf[k][:n]}
	}
	return nil
}

// turnRound returns the round a received datagram belongs to and whether
// it is the WRITE (false: the ACK); ok is false for anything else.
func turnRound(d *link.Datagram) (round uint32, write, ok bool) {
	b := d.Buf
	if len(b) < wire.BTHLen+wire.ICRCLen {
		return 0, false, false
	}
	switch wire.BTH(b).Opcode() {
	case wire.RCWriteOnly:
		if len(b) < wire.BTHLen+wire.RETHLen+4+wire.ICRCLen {
			return 0, false, false
		}
		return binary.BigEndian.Uint32(b[wire.BTHLen+wire.RETHLen:]), true, true
	case wire.RCAck:
		return uint32(wire.BTH(b).PSN()), false, true
	}
	return 0, false, false
}

// release gives back the loans of the first n received datagrams and
// gives each its own buffer back (a lent datagram's Buf is in the
// link's buffer, which the link reuses once released), as the engine
// does before each read.
func (s *turnSide) release(n int) {
	for k := range s.rx[:n] {
		if s.rx[k].Loan != nil {
			s.rx[k].Loan.Release()
			s.rx[k].Loan = nil
		}
		s.rx[k].Buf = s.rxBuf[k][:0]
	}
}

// startTurnEcho is the turn mode's answering side on addr: every WRITE
// it receives is answered with the same round's WRITE and its ACK, to the
// WRITE's source.
func startTurnEcho(addr netip.Addr) (*echoSide, error) {
	l, err := turnLink(addr)
	if err != nil {
		return nil, err
	}
	e := &echoSide{done: make(chan struct{}), port: int(l.Port())}
	e.stopFn = func() { l.Close() }
	s := newTurnSide(l)
	go func() {
		defer close(e.done)
		for {
			n, err := l.ReadBatch(s.rx)
			if err != nil {
				if !errors.Is(err, link.ErrLinkClosed) || !e.quit.Load() {
					e.err = err
				}
				return
			}
			for k := range s.rx[:n] {
				d := &s.rx[k]
				if i, write, ok := turnRound(d); ok && write {
					if err := s.send(i, netip.AddrPortFrom(d.Encap.Src, d.Encap.SrcPort)); err != nil {
						e.err = err
					}
				}
			}
			s.release(n)
		}
	}()
	return e, nil
}

// pingPongTurn is the turn mode's timing side: a link on the local
// address, each round its WRITE and ACK sent in one WriteBatch and
// ReadBatch until the peer's WRITE and ACK of that round are both in. A
// round without both by its deadline is made again (the link's read
// yield says so once the deadline passed, and a timer wakes the read).
func pingPongTurn(rounds int, to netip.AddrPort) ([]time.Duration, int, error) {
	la, err := netip.ParseAddr(localAddr())
	if err != nil || la.IsUnspecified() {
		return nil, 0, fmt.Errorf("turn: needs -local with -peer (a link binds one address)")
	}
	l, err := turnLink(la)
	if err != nil {
		return nil, 0, err
	}
	defer l.Close()
	s := newTurnSide(l)
	var deadline atomic.Int64
	l.SetReadYield(func() bool { return time.Now().UnixNano() >= deadline.Load() })
	wake := time.AfterFunc(time.Hour, func() { l.WakeRead() })
	defer wake.Stop()
	return pingPongRounds(rounds, func(i uint32, dl time.Time) (time.Time, bool, error) {
		deadline.Store(dl.UnixNano())
		wake.Reset(time.Until(dl))
		sent := time.Now()
		if err := s.send(i, to); err != nil {
			return sent, false, err
		}
		gotWrite, gotAck := false, false
		for !gotWrite || !gotAck {
			n, err := l.ReadBatch(s.rx)
			if err != nil {
				return sent, false, fmt.Errorf("ping-pong: %w", err)
			}
			if n == 0 { // the yield: past the deadline
				return sent, false, nil
			}
			for k := range s.rx[:n] {
				if r, write, ok := turnRound(&s.rx[k]); ok && r&wire.PSNMask == i&wire.PSNMask {
					gotWrite = gotWrite || write
					gotAck = gotAck || !write
				}
			}
			s.release(n)
		}
		return sent, true, nil
	})
}
