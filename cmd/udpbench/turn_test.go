//go:build linux

package main

import (
	"net/netip"
	"testing"
	"time"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

// lossyTurnEcho is a turn echo on 127.0.0.2 that does not answer the
// first copy of round drop's WRITE, answers the first copy of round
// half's with its WRITE only (as if the ACK were lost), and answers
// nothing when never is set. It returns its address.
func lossyTurnEcho(t *testing.T, drop, half uint32, never bool) netip.AddrPort {
	t.Helper()
	l, err := turnLink(netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	s := newTurnSide(l)
	go func() {
		defer close(done)
		dropped, halved := false, false
		for {
			n, err := l.ReadBatch(s.rx)
			if err != nil {
				return
			}
			for k := range s.rx[:n] {
				d := &s.rx[k]
				i, write, ok := turnRound(d)
				to := netip.AddrPortFrom(d.Encap.Src, d.Encap.SrcPort)
				switch {
				case !ok || !write || never:
				case i == drop && !dropped:
					dropped = true
				case i == half && !halved:
					halved = true
					err := s.build(i, to)
					if err == nil {
						err = s.write(s.tx[:1]) // the WRITE alone
					}
					if err != nil {
						t.Error(err)
					}
				default:
					if err := s.send(i, to); err != nil {
						t.Error(err)
					}
				}
			}
			s.release(n)
		}
	}()
	return netip.AddrPortFrom(l.LocalAddr(), l.Port())
}

// The turn mode's datagrams are what they say: a WRITE_ONLY with the
// round in its payload and an ACK with it in its PSN, each with the ICRC
// rxe computes, and the two come back through the echo as one round.
func TestTurnDatagrams(t *testing.T) {
	l, err := turnLink(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := newTurnSide(l)
	if err := s.send(0x1234567, netip.MustParseAddrPort("127.0.0.2:9")); err != nil {
		t.Fatal(err)
	}
	for k, want := range []wire.Opcode{wire.RCWriteOnly, wire.RCAck} {
		d := &s.tx[k]
		var p wire.Packet
		if err := wire.Parse(d.Buf, &p); err != nil {
			t.Fatalf("datagram %d: %v", k, err)
		}
		if got := p.BTH().Opcode(); got != want {
			t.Errorf("datagram %d: %v, want %v", k, got, want)
		}
		if err := wire.CheckICRC(&d.Encap, d.Buf); err != nil {
			t.Errorf("datagram %d (%v): %v", k, want, err)
		}
		i, write, ok := turnRound(d)
		if !ok || write != (k == 0) || i&wire.PSNMask != 0x1234567&wire.PSNMask {
			t.Errorf("datagram %d: round %#x, write %v, ok %v", k, i, write, ok)
		}
	}
	if _, _, ok := turnRound(&link.Datagram{Buf: make([]byte, 10)}); ok {
		t.Error("a 10-byte datagram was taken for a round's")
	}

	// Received by another side: the GSO pair comes back as the round's
	// WRITE and ACK, lent in the link's GRO buffer, and release gives
	// back the loans and each datagram its own buffer.
	l2, err := turnLink(netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	r := newTurnSide(l2)
	if err := s.send(7, netip.AddrPortFrom(l2.LocalAddr(), l2.Port())); err != nil {
		t.Fatal(err)
	}
	got, lent := map[bool]bool{}, 0
	for len(got) < 2 {
		n, err := l2.ReadBatch(r.rx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range r.rx[:n] {
			i, write, ok := turnRound(&r.rx[k])
			if !ok || i != 7 {
				t.Fatalf("received %x: round %d, ok %v", r.rx[k].Buf, i, ok)
			}
			got[write] = true
			if r.rx[k].Loan != nil {
				lent++
			}
		}
		r.release(n)
		for k := range r.rx[:n] {
			if r.rx[k].Loan != nil || cap(r.rx[k].Buf) != link.MaxDatagram || &r.rx[k].Buf[:1][0] != &r.rxBuf[k][:1][0] {
				t.Errorf("datagram %d after release: loan %v, not its own buffer", k, r.rx[k].Loan)
			}
		}
	}
	if l2.GRO() && lent == 0 {
		t.Error("a GRO link lent nothing")
	}
}

// In the turn mode a lost WRITE and a lost ACK each cost a round made
// again, not the run; a peer that stops answering ends it with an error
// after pingPongMaxLost rounds resent. (A round's timeout is long enough
// for a loaded machine under -race, where the silent peer's need not be.)
func TestPingPongTurnLoss(t *testing.T) {
	defer func(d time.Duration) { pingPongRoundTimeout = d }(pingPongRoundTimeout)
	pingPongRoundTimeout = 300 * time.Millisecond
	d, lost, err := pingPongTurn(100, lossyTurnEcho(t, 500, 1050, false))
	if err != nil || len(d) != 100 || lost != 2 {
		t.Errorf("one WRITE lost and one ACK lost: %d samples, %d lost, %v; want 100, 2, nil", len(d), lost, err)
	}
	pingPongRoundTimeout = 20 * time.Millisecond
	_, lost, err = pingPongTurn(100, lossyTurnEcho(t, 0, 0, true))
	if err == nil || lost != pingPongMaxLost+1 {
		t.Errorf("a silent peer: %d lost, %v; want %d and an error", lost, err, pingPongMaxLost+1)
	}
}

// The turn mode's timing side needs an address of its own for its link.
func TestPingPongTurnNeedsLocal(t *testing.T) {
	setFlag(t, peer, "127.0.0.2:1")
	setFlag(t, local, "")
	if _, _, err := pingPongTurn(1, netip.MustParseAddrPort("127.0.0.2:1")); err == nil {
		t.Error("ran bound to 0.0.0.0")
	}
}
