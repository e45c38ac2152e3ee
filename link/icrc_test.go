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
