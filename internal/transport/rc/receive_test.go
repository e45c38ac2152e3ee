package rc_test

// What a connected QP takes from the wire once the engine has routed a
// packet to it (rxe_recv.c check_addr, check_type_state; rxe_comp.c
// check_psn): only its peer's packets, requests from RTR and responses
// from RTS on, and responses to PSNs it sent and has not seen answered.

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

func TestRCReceiveChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		o := rcOpts
		o.defaults()
		b := newEnd(t, n, "10.0.0.2", o)
		peer := n.Raw("10.0.0.1", b.node.Addr(), wire.ConnectedSrcPort(0x99, b.qpn()))
		stranger := n.Raw("10.0.0.3", b.node.Addr(), wire.ConnectedSrcPort(0x99, b.qpn()))
		rec := n.Recorder()
		send := func(r *tt.Raw, h wire.Headers) {
			h.BTH.DestQP, h.BTH.PKey = b.qpn(), wire.DefaultPKey
			var payload []byte
			if h.BTH.Opcode.Is(wire.MaskPayload) {
				payload = []byte("hi")
			}
			r.Send(h, payload)
			n.Run(time.Millisecond)
		}
		sendOnly := func(psn wire.PSN) wire.Headers {
			return wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: psn, AckReq: true}}
		}
		ack := func(psn wire.PSN) wire.Headers {
			return wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck, PSN: psn}, AETH: wire.AETHFields{Syndrome: wire.AckUnlimited}}
		}
		// dropped sends h from r and checks that it was dropped and
		// counted in the counter ctr names.
		c := b.ctr()
		dropped := func(what string, r *tt.Raw, h wire.Headers, ctr *atomic.Uint64) {
			t.Helper()
			before, sent := ctr.Load(), rec.Count(from(b))
			send(r, h)
			if got := ctr.Load() - before; got != 1 {
				t.Errorf("%s: counted %d times, want once", what, got)
			}
			if got := rec.Count(from(b)) - sent; got != 0 {
				t.Errorf("%s: answered with %d packets", what, got)
			}
			if got := b.pollAll(); len(got) != 0 {
				t.Errorf("%s: completions %+v", what, got)
			}
		}
		b.postRecv(recvWR(b, 1, 0, 64), recvWR(b, 2, 64, 64))

		// RESET and INIT take no request. The QP has no peer yet, so the
		// address check (check_addr) drops it before the state check
		// does (rxe checks the state first: check_type_state).
		dropped("a request in RESET", peer, sendOnly(0), &c.DropAddr)
		b.modify(ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1, AccessFlags: ibv.AccessRemoteWrite},
			ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags)
		dropped("a request in INIT", peer, sendOnly(0), &c.DropAddr)

		// RTR takes its peer's requests, and only its peer's; it takes no
		// response yet.
		b.modify(ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: o.mtu, DestQPN: 0x99, RQPSN: 0,
			MaxDestRdAtomic: 16, MinRNRTimer: 12,
			AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: peer.Addr()}}},
			ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
				ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer)
		dropped("a stranger's request", stranger, sendOnly(0), &c.DropAddr)
		send(peer, sendOnly(0))
		wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		dropped("a response in RTR", peer, ack(0), &c.DropState)

		// RTS takes responses to what it sent, from its peer, not a
		// ghost's (rxe_comp.c check_psn).
		b.modify(ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: 0, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			ibv.QPAttrState|ibv.QPAttrSQPSN|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic)
		dropped("an ACK of a PSN never sent", peer, ack(0), &c.DropResponse)
		b.post(sendWR(b, 10, ibv.WRSend, 0, 8))
		n.Settle()
		dropped("a stranger's ACK", stranger, ack(0), &c.DropAddr)
		send(peer, ack(0))
		wantWC(t, b.waitWC(1)[0], 10, ibv.WCSuccess, ibv.WCSend)
		dropped("the same ACK again", peer, ack(0), &c.DropResponse)

		tt.CheckSeq(t, "packets", rec.Match(from(b)), "ACKNOWLEDGE/0", "SEND_ONLY/0!")
		tt.CheckEach(t, rec.Match(from(b)), tt.DestQP(0x99), tt.From(netip.MustParseAddr("10.0.0.2")))
		wantState(t, "QP", b, ibv.QPStateRTS)
	})
}
