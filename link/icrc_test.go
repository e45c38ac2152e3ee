package link

import (
	"bytes"
	"testing"

	"github.com/softnic/softnic/wire"
)

func TestSolveIPv4ICRC(t *testing.T) {
	r := newRand(t)
	e := randEncap(r, true)
	pkt := randPacket(t, r, &e, 100)
	guess := e
	if s := solveIPv4ICRC(&guess, pkt); s != ICRCGood || guess != e {
		t.Fatalf("right guess: %v, %+v, want good, %+v", s, guess, e)
	}
	guess.ID ^= uint16(r.Uint32()) | 1
	if s := solveIPv4ICRC(&guess, pkt); s != ICRCGood || guess.ID != e.ID {
		t.Fatalf("wrong guess: %v, ID %#x, want good, %#x", s, guess.ID, e.ID)
	}
	// A corrupted byte of the payload: some identification may still fit
	// (probability 2^-16); it is then not the sender's.
	bad := bytes.Clone(pkt)
	bad[20] ^= 1
	guess.ID = 0
	if s := solveIPv4ICRC(&guess, bad); s == ICRCGood {
		if guess.ID == e.ID {
			t.Fatal("a corrupted packet passed with the sender's identification")
		}
		t.Log("a corrupted packet was accepted (probability 2^-16)")
	} else if s != ICRCBad {
		t.Fatalf("corrupted: %v, want bad", s)
	}
	// Only the identification is solved for: a wrong source port fails.
	guess = e
	guess.SrcPort++
	if s := solveIPv4ICRC(&guess, pkt); s == ICRCGood && guess.ID == e.ID {
		t.Fatal("a wrong source port passed with the sender's identification")
	}
	if s := solveIPv4ICRC(&guess, pkt[:wire.BTHLen+wire.ICRCLen-1]); s != ICRCBad {
		t.Fatalf("truncated: %v, want bad", s)
	}
}

// TestDatagramCheckICRC: the check acts on the status alone and records
// its verdict.
func TestDatagramCheckICRC(t *testing.T) {
	r := newRand(t)
	e4, e6 := randEncap(r, true), randEncap(r, false)
	pkt4, pkt6 := randPacket(t, r, &e4, 100), randPacket(t, r, &e6, 100)
	guessed := e4
	guessed.ID ^= 0x0101
	bad4 := bytes.Clone(pkt4)
	bad4[wire.BTHLen] ^= 0x40
	for _, c := range []struct {
		name   string
		d      Datagram
		ok     bool
		after  ICRCStatus
		wantID uint16
	}{
		{"unchecked right", Datagram{Encap: e6, Buf: pkt6}, true, ICRCGood, 0},
		{"unchecked with the guessed ID", Datagram{Encap: guessed, Buf: pkt4}, false, ICRCBad, guessed.ID},
		{"guessed ID solved", Datagram{Encap: guessed, Buf: pkt4, ICRC: ICRCGuessedIPv4ID}, true, ICRCGood, e4.ID},
		{"guessed ID on IPv6", Datagram{Encap: e6, Buf: pkt6, ICRC: ICRCGuessedIPv4ID}, false, ICRCBad, 0},
		{"good taken", Datagram{Encap: e4, Buf: bad4, ICRC: ICRCGood}, true, ICRCGood, e4.ID},
		{"bad taken", Datagram{Encap: e4, Buf: pkt4, ICRC: ICRCBad}, false, ICRCBad, e4.ID},
		{"unverifiable", Datagram{Encap: e4, Buf: bad4, ICRC: ICRCUnverifiable}, true, ICRCUnverifiable, e4.ID},
	} {
		d := c.d
		if ok := d.CheckICRC(); ok != c.ok || d.ICRC != c.after || d.Encap.IsIPv4() && d.Encap.ID != c.wantID {
			t.Errorf("%s: %v, status %v, ID %#x; want %v, %v, %#x", c.name, ok, d.ICRC, d.Encap.ID, c.ok, c.after, c.wantID)
		}
	}
}
