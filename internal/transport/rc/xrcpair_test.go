package rc_test

// XRC between an initiator (XRC_SEND) and a target (XRC_RECV) under loss:
// everything but the opcodes' class and the XRCETH is RC's own code, so
// the go-back-N, the NAK and the READ re-issue must work as on RC, with
// the XRCETH in every request packet, resends included (IBTA 9.3.7).

import (
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

func TestXRCLostPackets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newXRCPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(2, ops(a, wire.ClassXRC|wire.RCSendMiddle)))
		n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.ClassXRC|wire.RCReadResponseMiddle)))

		// A SEND of five packets, its third lost: a sequence NAK and a
		// resend from PSN 2, into the receive of the SRQ the XRCETH names.
		const size = 4*1024 + 300
		fill(a.buf[:size], 1)
		b.postRecv(recvWR(b, 100, 0, 8192))
		send := sendWR(a, 1, ibv.WRSend, 0, size)
		send.RemoteSRQN = xrcSRQN
		a.post(send)
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wc := b.waitWC(1)[0]
		wantWC(t, wc, 100, ibv.WCSuccess, ibv.WCRecv)
		if wc.ByteLen != size || wc.QPNum != b.qpn() {
			t.Errorf("receive completion %+v, want byte_len %d on QP %#x", wc, size, b.qpn())
		}
		checkBytes(t, "received message", b.buf[:size], a.buf[:size])
		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs,
			"XRC_SEND_FIRST/0", "XRC_SEND_MIDDLE/1", "XRC_SEND_MIDDLE/2", "XRC_SEND_MIDDLE/3", "XRC_SEND_LAST/4!",
			"XRC_SEND_MIDDLE/2", "XRC_SEND_MIDDLE/3", "XRC_SEND_LAST/4!")
		tt.CheckEach(t, reqs, tt.Class(wire.ClassXRC), tt.XRCSRQ(xrcSRQN), tt.DestQP(b.qpn()))
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "XRC_ACKNOWLEDGE/2 NAK_PSN_SEQ_ERR", "XRC_ACKNOWLEDGE/4")

		// A READ of three responses, the middle one lost: the re-issued
		// READ asks for PSN 6's PMTU alone, and the target replays it.
		rec.Reset()
		const rn, roff = 2500, 20000
		fill(b.buf[roff:roff+rn], 2)
		read := rdmaWR(a, b, 2, ibv.WRRDMARead, 10000, roff, rn)
		read.RemoteSRQN = xrcSRQN
		a.post(read)
		wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMARead)
		checkBytes(t, "read data", a.buf[10000:10000+rn], b.buf[roff:roff+rn])
		reqs = rec.Match(from(a))
		tt.CheckSeq(t, "READ requests", reqs, "XRC_RDMA_READ_REQUEST/5!", "XRC_RDMA_READ_REQUEST/6!")
		if len(reqs) == 2 {
			tt.Check(t, &reqs[1], tt.XRCSRQ(xrcSRQN),
				tt.RETH(wire.RETHFields{VA: b.mr.Addr() + roff + 1024, RKey: b.mr.RKey(), DMALen: 1024}))
		}
		tt.CheckSeq(t, "READ responses", rec.Match(from(b)),
			"XRC_RDMA_READ_RESPONSE_FIRST/5", "XRC_RDMA_READ_RESPONSE_MIDDLE/6", "XRC_RDMA_READ_RESPONSE_LAST/7",
			"XRC_RDMA_READ_RESPONSE_LAST/6")
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("initiator timeouts %d, want 0", got)
		}
		wantState(t, "initiator", a, ibv.QPStateRTS)
		wantState(t, "target", b, ibv.QPStateRTS)
	})
}
