package verbs_test

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
				f := fabric.New(fabric.Config{Seed: 1})
				defer f.Close()
				a, b := newPair(t, f, pairOpts{typ: ibv.QPTypeUC})
				rec := record(t, f)
				f.AddFilter(fabric.DropNth(c.nth, ops(a, c.lose)))

				const n = 4*1024 + 8 // five packets
				fill(a.buf[:n], 61)
				fill(a.buf[n:2*n], 62)
				fill(a.buf[2*n:3*n], 63)
				postRecv(t, b, recvWR(b, 1, 0, 8192), recvWR(b, 2, 8192, 8192))
				wr := func(id uint64, off int) ibv.SendWR {
					w := rdmaWR(a, b, id, c.op, off, 16384+off, n)
					w.Imm = uint32(id)
					return w
				}
				post(t, a, wr(10, 0), wr(11, n))
				for i, wc := range waitWC(t, a.cq, 2) {
					wantWC(t, wc, uint64(10+i), ibv.WCSuccess, wcOpcodeOf(c.op))
				}
				// Only the second message completes, in the first WQE.
				got := waitWC(t, b.cq, 1)
				noWC(t, b.cq, time.Second)
				wantOp := ibv.WCRecv
				if c.op == ibv.WRRDMAWriteWithImm {
					wantOp = ibv.WCRecvRDMAWithImm
					if got[0].Imm != 11 {
						t.Errorf("immediate %d, want 11 (the intact message)", got[0].Imm)
					}
					checkBytes(t, "second WRITE", b.buf[16384+n:16384+2*n], a.buf[n:2*n])
				} else {
					checkBytes(t, "second SEND", b.buf[:n], a.buf[n:2*n])
				}
				wantWC(t, got[0], 1, ibv.WCSuccess, wantOp)
				if got[0].ByteLen != n {
					t.Errorf("byte_len %d, want %d", got[0].ByteLen, n)
				}
				// Packets after the loss are dropped and counted; a lost
				// LAST leaves none to drop (the next FIRST abandons the
				// partial message).
				if n := b.dev.Counters().DropUCMessage; (n > 0) != !c.lose.Is(wire.MaskEnd) {
					t.Errorf("drop_uc_message %d after losing a %v", n, c.lose)
				}
				if got := rec.count(from(b)); got != 0 {
					t.Errorf("the UC responder sent %d packets", got)
				}
				for _, p := range rec.match(from(a)) {
					if p.op().Class() != wire.ClassUC || p.Wire.AckReq() {
						t.Errorf("UC request %s", p.desc())
					}
				}

				// The second receive WQE is still there for a third message.
				post(t, a, wr(12, 2*n))
				wantWC(t, waitWC(t, a.cq, 1)[0], 12, ibv.WCSuccess, wcOpcodeOf(c.op))
				wc := waitWC(t, b.cq, 1)[0]
				wantWC(t, wc, 2, ibv.WCSuccess, wantOp)
				if c.op == ibv.WRSend {
					checkBytes(t, "third SEND", b.buf[8192:8192+n], a.buf[2*n:3*n])
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
				f := fabric.New(fabric.Config{Seed: seed})
				defer f.Close()
				a, b := newPair(t, f, pairOpts{typ: ibv.QPTypeUC, mtu: ibv.MTU256, bufSize: 1 << 17})
				f.SetImpairment(fabric.Impairment{Loss: 0.05})

				const msgs, size = 60, 700 // three packets each
				for i := range msgs {
					fill(a.buf[i*size:(i+1)*size], 1000+i)
				}
				var recvs []ibv.RecvWR
				for i := range msgs {
					recvs = append(recvs, recvWR(b, uint64(i), 65536+i*1024, 1024))
				}
				postRecv(t, b, recvs...)
				for i := range msgs {
					post(t, a, sendWR(a, uint64(i), ibv.WRSend, i*size, size))
				}
				waitWC(t, a.cq, msgs)
				settle(time.Millisecond)
				wcs := pollAll(b.cq)

				whole := 0
				delivered := b.dev.Counters().RcvdPkts
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
