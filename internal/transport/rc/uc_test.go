package rc_test

// UC under loss (IBTA 9.8.3; rxe_resp.c check_psn / check_op_seq for UC,
// do_class_d1e_error): no ACKs, no NAKs, no retries; a message missing a
// packet is dropped whole without consuming a receive WQE, and the next
// message starts clean.

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

func TestUCLostPacket(t *testing.T) {
	for _, c := range []struct {
		name string
		op   ibv.WROpcode
		lose wire.Opcode
		nth  int
	}{
		{"SEND middle", ibv.WRSend, wire.UCSendMiddle, 1},
		{"SEND first", ibv.WRSend, wire.UCSendFirst, 1},
		{"SEND last", ibv.WRSend, wire.UCSendLast, 1},
		{"WRITE_WITH_IMM middle", ibv.WRRDMAWriteWithImm, wire.UCWriteMiddle, 2},
		{"WRITE_WITH_IMM last", ibv.WRRDMAWriteWithImm, wire.UCWriteLastImm, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, opts{typ: ibv.QPTypeUC})
				rec := n.Recorder()
				n.Fabric().AddFilter(fabric.DropNth(c.nth, ops(a, c.lose)))

				const size = 4*1024 + 8 // five packets
				fill(a.buf[:size], 61)
				fill(a.buf[size:2*size], 62)
				fill(a.buf[2*size:3*size], 63)
				b.postRecv(recvWR(b, 1, 0, 8192), recvWR(b, 2, 8192, 8192))
				wr := func(id uint64, off int) ibv.SendWR {
					w := rdmaWR(a, b, id, c.op, off, 16384+off, size)
					w.Imm = uint32(id)
					return w
				}
				a.post(wr(10, 0), wr(11, size))
				for i, wc := range a.waitWC(2) {
					wantWC(t, wc, uint64(10+i), ibv.WCSuccess, wcOpcodeOf(c.op))
				}
				// Only the second message completes, in the first WQE.
				got := b.waitWC(1)
				b.noWC(time.Second)
				wantOp := ibv.WCRecv
				if c.op == ibv.WRRDMAWriteWithImm {
					wantOp = ibv.WCRecvRDMAWithImm
					if got[0].Imm != 11 {
						t.Errorf("immediate %d, want 11 (the intact message)", got[0].Imm)
					}
					checkBytes(t, "second WRITE", b.buf[16384+size:16384+2*size], a.buf[size:2*size])
				} else {
					checkBytes(t, "second SEND", b.buf[:size], a.buf[size:2*size])
				}
				wantWC(t, got[0], 1, ibv.WCSuccess, wantOp)
				if got[0].ByteLen != size {
					t.Errorf("byte_len %d, want %d", got[0].ByteLen, size)
				}
				// Packets after the loss are dropped and counted; a lost
				// LAST leaves none to drop (the next FIRST abandons the
				// partial message).
				if k := b.ctr().DropUCMessage.Load(); (k > 0) != !c.lose.Is(wire.MaskEnd) {
					t.Errorf("drop_uc_message %d after losing a %v", k, c.lose)
				}
				if got := rec.Count(from(b)); got != 0 {
					t.Errorf("the UC responder sent %d packets", got)
				}
				tt.CheckEach(t, rec.Match(from(a)), tt.Class(wire.ClassUC), tt.AckReq(false))

				// The second receive WQE is still there for a third message.
				a.post(wr(12, 2*size))
				wantWC(t, a.waitWC(1)[0], 12, ibv.WCSuccess, wcOpcodeOf(c.op))
				wc := b.waitWC(1)[0]
				wantWC(t, wc, 2, ibv.WCSuccess, wantOp)
				if c.op == ibv.WRSend {
					checkBytes(t, "third SEND", b.buf[8192:8192+size], a.buf[2*size:3*size])
				}
				wantState(t, "requester", a, ibv.QPStateRTS)
				wantState(t, "responder", b, ibv.QPStateRTS)
			})
		})
	}
}

// UC keeps going through random loss: every message that arrives whole
// completes intact and in order, each in the next receive WQE; none
// arrives torn. The seed is logged.
func TestUCRandomLoss(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("fabric seed %d", seed)
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, seed)
				a, b := newPair(t, n, opts{typ: ibv.QPTypeUC, mtu: ibv.MTU256, bufSize: 1 << 17})
				n.Fabric().SetImpairment(fabric.Impairment{Loss: 0.05})

				const msgs, size = 60, 700 // three packets each
				for i := range msgs {
					fill(a.buf[i*size:(i+1)*size], 1000+i)
				}
				var recvs []ibv.RecvWR
				for i := range msgs {
					recvs = append(recvs, recvWR(b, uint64(i), 65536+i*1024, 1024))
				}
				b.postRecv(recvs...)
				for i := range msgs {
					a.post(sendWR(a, uint64(i), ibv.WRSend, i*size, size))
				}
				a.waitWC(msgs)
				n.Run(time.Millisecond)
				wcs := b.pollAll()

				whole := 0
				delivered := b.ctr().RcvdPkts.Load()
				for i, wc := range wcs {
					if wc.Status != ibv.WCSuccess || wc.WRID != uint64(i) || wc.ByteLen != size {
						t.Fatalf("completion %d: %+v", i, wc)
					}
					got := b.buf[65536+i*1024 : 65536+i*1024+size]
					// It must be one of the messages, whole, and later
					// than the one before.
					k := -1
					for m := whole; m < msgs; m++ {
						if string(got) == string(a.buf[m*size:(m+1)*size]) {
							k = m
							break
						}
					}
					if k < 0 {
						t.Fatalf("completion %d holds no message sent after message %d", i, whole)
					}
					whole = k + 1
				}
				t.Logf("%d of %d messages arrived whole (%d packets delivered)", len(wcs), msgs, delivered)
				if len(wcs) == 0 || len(wcs) == msgs {
					t.Errorf("%d of %d messages completed: want some lost and some through at 5%% loss", len(wcs), msgs)
				}
			})
		})
	}
}
