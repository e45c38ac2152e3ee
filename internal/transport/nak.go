package transport

import (
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// naks is the one table of the NAK codes that fail a request and the
// work completion status each stands for (IBTA 9.7.5.2.4 and Table 44;
// rxe_comp.c check_ack, and rxe_resp.c's RESPST_ERR_* states, which send
// the code of the status they complete with). The RC responder NAKs an
// error with its code and completes the receive WQE in use with the
// code's status (rc's respRules); the requester's completer fails the
// WQE the NAK names with the same status (NAKStatus). Package wire has
// the codes and ibv the statuses, and wire imports nothing: the table
// lives here, the lowest package that sees both.
var naks = [...]struct {
	syn    wire.Syndrome
	status ibv.WCStatus
}{
	{wire.NakInvalidRequest, ibv.WCRemInvReqErr},
	{wire.NakRemoteAccess, ibv.WCRemAccessErr},
	{wire.NakRemoteOp, ibv.WCRemOpErr},
}

// NAKStatus returns the status a requester's WQE completes with when the
// responder NAKs it with syn: the table's (naks) for the three codes it
// defines, Remote Operational Error for the other NAK codes (0x64,
// Invalid RD Request, which RC never sends, and the reserved ones, as
// rxe's check_ack default case: "unexpected nak"), and WCSuccess for a
// syndrome that fails nothing: an ACK, an RNR NAK or a PSN sequence NAK
// (their WQEs are sent again), a reserved syndrome type.
func NAKStatus(syn wire.Syndrome) ibv.WCStatus {
	if syn.Type() != wire.SyndromeNAK || syn == wire.NakPSNSequence {
		return ibv.WCSuccess
	}
	for _, n := range naks {
		if n.syn == syn {
			return n.status
		}
	}
	return ibv.WCRemOpErr
}
