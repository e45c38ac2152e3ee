package transport

import (
	"testing"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// TestNAKStatus: every AETH syndrome maps to the status it fails a WQE
// with (IBTA Table 44, rxe_comp.c check_ack), or to none.
func TestNAKStatus(t *testing.T) {
	want := map[wire.Syndrome]ibv.WCStatus{
		wire.NakInvalidRequest: ibv.WCRemInvReqErr,
		wire.NakRemoteAccess:   ibv.WCRemAccessErr,
		wire.NakRemoteOp:       ibv.WCRemOpErr,
		wire.NakInvalidRDReq:   ibv.WCRemOpErr,
	}
	for s := range 256 {
		syn := wire.Syndrome(s)
		w, ok := want[syn]
		switch {
		case ok:
		case syn.Type() == wire.SyndromeNAK && syn != wire.NakPSNSequence:
			w = ibv.WCRemOpErr // reserved NAK codes
		default:
			w = ibv.WCSuccess // ACK, RNR NAK, sequence NAK, reserved type
		}
		if got := NAKStatus(syn); got != w {
			t.Errorf("NAKStatus(%#x %v) = %v, want %v", s, syn, got, w)
		}
	}
	for _, n := range naks {
		if n.syn.Type() != wire.SyndromeNAK || n.syn == wire.NakPSNSequence || n.status == ibv.WCSuccess {
			t.Errorf("naks row %v -> %v: not a NAK that fails a WQE", n.syn, n.status)
		}
	}
}
