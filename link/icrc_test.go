package link

import (
	"bytes"
	"testing"
)

type hidingLink struct{ Link }

func (hidingLink) GuessesIPv4ID() bool { return true }

func TestVerifyICRC(t *testing.T) {
	r := newRand(t)
	e := randEncap(r, true)
	pkt := randPacket(t, r, &e, 100)
	guess := e
	guess.ID = 0
	if VerifyICRC(nil, &guess, pkt) {
		t.Fatal("a link that shows the ID: wrong ID accepted")
	}
	if !VerifyICRC(hidingLink{}, &guess, pkt) || guess.ID != e.ID {
		t.Fatalf("hiding link: ID %#x, want %#x", guess.ID, e.ID)
	}
	bad := bytes.Clone(pkt)
	bad[20] ^= 1
	guess.ID = 0
	if VerifyICRC(hidingLink{}, &guess, bad) {
		t.Log("a corrupted packet was accepted (probability 2^-16)")
	}
	e6 := randEncap(r, false)
	pkt6 := randPacket(t, r, &e6, 100)
	e6.SrcPort++
	if VerifyICRC(hidingLink{}, &e6, pkt6) {
		t.Fatal("IPv6 with a wrong port accepted")
	}
}
