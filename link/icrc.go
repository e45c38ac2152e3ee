package link

// What a link knows of a received datagram's ICRC (ICRCStatus) and the
// engine's check that acts on it (Datagram.CheckICRC), solving for an
// IPv4 identification a UDP socket hides.

import (
	"fmt"

	"github.com/softnic/softnic/wire"
)

// ICRCStatus is what a link knows of a received datagram's ICRC. The
// receiver checks it with Datagram.CheckICRC, which acts on the status
// alone: a link states what it saw in each datagram, and is never asked.
type ICRCStatus uint8

const (
	// ICRCUnchecked: Encap holds every header field the ICRC covers as it
	// was on the wire; the ICRC is not checked yet (wire.CheckICRC). The
	// fabric and the UDP link's IPv6 datagrams.
	ICRCUnchecked ICRCStatus = iota
	// ICRCGuessedIPv4ID: Encap is as on the wire except the IPv4
	// identification, which the link could not see (a UDP socket hides
	// it) and guessed; the check solves for the right one
	// (wire.SolveIPv4ID) and corrects Encap.ID. The UDP link's IPv4
	// datagrams in the IPv4ICRCSolve mode.
	ICRCGuessedIPv4ID
	// ICRCGood: the ICRC was checked and is right for Encap.
	ICRCGood
	// ICRCBad: the ICRC was checked and is wrong (for every IPv4
	// identification, if it was guessed); the receiver drops the datagram
	// and counts it (icrc_err).
	ICRCBad
	// ICRCUnverifiable: the link could not see every covered field and
	// did not guess (IPv4ICRCSkip); the receiver accepts the datagram
	// unchecked and counts it (ICRCUnverified).
	ICRCUnverifiable
)

func (s ICRCStatus) String() string {
	switch s {
	case ICRCUnchecked:
		return "unchecked"
	case ICRCGuessedIPv4ID:
		return "guessed-ipv4-id"
	case ICRCGood:
		return "good"
	case ICRCBad:
		return "bad"
	case ICRCUnverifiable:
		return "unverifiable"
	}
	return fmt.Sprintf("ICRCStatus(%d)", uint8(s))
}

// CheckICRC checks the ICRC of a received datagram as its status says
// (rxe_icrc.c rxe_icrc_check) and reports whether it is right:
// ICRCUnchecked is checked over Encap; ICRCGuessedIPv4ID is checked with
// the guessed identification and, on a mismatch, solved for the one that
// makes it right, which replaces Encap.ID; ICRCGood and ICRCBad are the
// verdicts of an earlier check; ICRCUnverifiable reports true (nothing to
// check against). A check records its verdict in d.ICRC, so a second
// call (a PcapLink checked before recording) costs nothing. One CRC pass
// at most, plus one multiplication when the guess was wrong.
func (d *Datagram) CheckICRC() bool {
	switch d.ICRC {
	case ICRCGood, ICRCUnverifiable:
		return true
	case ICRCUnchecked:
		d.ICRC = ICRCBad
		if wire.CheckICRC(&d.Encap, d.Buf) == nil {
			d.ICRC = ICRCGood
		}
	case ICRCGuessedIPv4ID:
		d.ICRC = ICRCBad
		if d.Encap.IsIPv4() {
			d.ICRC = solveIPv4ICRC(&d.Encap, d.Buf)
		}
	}
	return d.ICRC == ICRCGood
}

// solveIPv4ICRC checks pkt's ICRC over the IPv4 header e whose
// identification is a guess (a UDP socket hides it): when the ICRC does
// not match, it solves for the only identification that makes it right
// (wire.SolveIPv4ID) and stores it in e.ID. One CRC pass, as for
// wire.CheckICRC, plus one multiplication on a mismatch; what is lost is
// 16 of the ICRC's 32 bits against corruption.
func solveIPv4ICRC(e *wire.Encap, pkt []byte) ICRCStatus {
	if len(pkt) < wire.BTHLen+wire.ICRCLen {
		return ICRCBad
	}
	got, want := wire.ComputeICRC(e, pkt), wire.StoredICRC(pkt)
	if got == want {
		return ICRCGood
	}
	x, ok := wire.SolveIPv4ID(got, want, len(pkt))
	if !ok {
		return ICRCBad
	}
	e.ID ^= x
	return ICRCGood
}
