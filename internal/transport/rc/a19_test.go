package rc_test

// FLUSH and ATOMIC WRITE (IBA 1.5 Annex A19) between two RC QPs: the
// packets and their zero-length RDMA READ RESPONSE answers, the access
// rules of the QP and the region, and the responder resources that answer
// duplicates without executing them again, under loss, duplication and a
// late replay.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

const (
	qpFlush = ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic | ibv.AccessFlushGlobal
	mrAll   = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	mrFlush = mrAll | ibv.AccessFlushGlobal
)

// flushWR is a signaled FLUSH of n bytes at off in peer's MR.
func flushWR(peer *end, wrid uint64, off int64, n uint32, typ, level uint8) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRFlush, Flags: ibv.SendSignaled, RKey: peer.mr.RKey(),
		RemoteAddr: uint64(int64(peer.mr.Addr()) + off), FlushLen: n, FlushType: typ, FlushLevel: level}
}

// atomicWriteWR is a signaled ATOMIC WRITE of v (8 inline bytes) at off
// in peer's MR.
func atomicWriteWR(peer *end, wrid uint64, off int, v []byte) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRAtomicWrite, Flags: ibv.SendSignaled | ibv.SendInline,
		RKey: peer.mr.RKey(), RemoteAddr: peer.mr.Addr() + uint64(off), InlineData: v}
}

// TestFlush: FLUSH of a range or of the whole region succeeds where the
// QP and the region grant the placement type, with the packets of IBA
// A19 and rxe (FETH then RETH, answered by an empty READ RESPONSE ONLY at
// the request's PSN that counts a message in the MSN); it fails with
// REM_INV_REQ_ERR when the QP does not allow it and REM_ACCESS_ERR when
// the key does not.
func TestFlush(t *testing.T) {
	type tc struct {
		name         string
		qpAcc, mrAcc ibv.Access
		typ, level   uint8
		off          int64 // from the region's start
		n            uint32
		badKey       bool
		want         ibv.WCStatus
	}
	const pers = wire.FlushPersistent
	tcs := []tc{
		{"global range", qpFlush, mrFlush, wire.FlushGlobal, wire.FlushRange, 100, 4000, false, ibv.WCSuccess},
		{"global whole MR", qpFlush, mrFlush, wire.FlushGlobal, wire.FlushMR, -1 << 20, 0, false, ibv.WCSuccess},
		{"global empty range at the end", qpFlush, mrFlush, wire.FlushGlobal, wire.FlushRange, 1 << 16, 0, false, ibv.WCSuccess},
		{"QP without FLUSH_GLOBAL", qpFlush &^ ibv.AccessFlushGlobal, mrFlush, wire.FlushGlobal, wire.FlushRange, 0, 64, false, ibv.WCRemInvReqErr},
		{"QP without FLUSH_PERSISTENT", qpFlush, mrFlush, pers, wire.FlushRange, 0, 64, false, ibv.WCRemInvReqErr},
		{"MR without FLUSH_GLOBAL", qpFlush, mrAll, wire.FlushGlobal, wire.FlushRange, 0, 64, false, ibv.WCRemAccessErr},
		{"MR without FLUSH_PERSISTENT", qpFlush | ibv.AccessFlushPersistent, mrFlush, pers, wire.FlushRange, 0, 64, false, ibv.WCRemAccessErr},
		{"range past the MR", qpFlush, mrFlush, wire.FlushGlobal, wire.FlushRange, 1<<16 - 32, 64, false, ibv.WCRemAccessErr},
		{"whole MR under a bad key", qpFlush, mrFlush, wire.FlushGlobal, wire.FlushMR, 0, 0, true, ibv.WCRemAccessErr},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				rec := n.Recorder()
				a, b := newPair(t, n, opts{timeout: 14, retry: 7, rnr: 7, qpAccess: c.qpAcc, access: c.mrAcc})
				// A WRITE first, so the FLUSH's MSN is the second message.
				a.post(rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, 8))
				wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
				w := flushWR(b, 2, c.off, c.n, c.typ, c.level)
				if c.badKey {
					w.RKey ^= 0x80
				}
				a.post(w)
				wc := a.waitWC(1)[0]
				wantWC(t, wc, 2, c.want, ibv.WCFlush)
				if c.want != ibv.WCSuccess {
					wantState(t, "requester", a, ibv.QPStateErr)
					return
				}
				if wc.ByteLen != c.n {
					t.Errorf("FLUSH byte_len %d, want %d", wc.ByteLen, c.n)
				}
				b.noWC(time.Millisecond) // no receive consumed at the responder
				req := rec.Match(ops(a, wire.RCFlush))
				resp := rec.Match(ops(b, wire.RCReadResponseOnly))
				if len(req) != 1 || len(resp) != 1 {
					t.Fatalf("%d FLUSH requests and %d responses, want 1 and 1", len(req), len(resp))
				}
				p := &req[0].Wire
				if ft := p.FETH(); ft.PlacementType() != c.typ || ft.Selectivity() != c.level {
					t.Errorf("FETH type %d level %d, want %d %d", ft.PlacementType(), ft.Selectivity(), c.typ, c.level)
				}
				tt.Check(t, &req[0], tt.RETH(wire.RETHFields{VA: w.RemoteAddr, RKey: w.RKey, DMALen: c.n}),
					tt.PayloadLen(0), tt.AckReq(true))
				tt.Check(t, &resp[0], tt.PSN(p.PSN()), tt.PayloadLen(0), tt.Syndrome(wire.AckUnlimited), tt.MSN(2))
			})
		})
	}
}

// TestAtomicWriteRaw: what a requester of softnic never sends but a peer
// might: an unaligned ATOMIC WRITE (IBA A19.4.2) or one whose RETH
// announces other than 8 bytes is an invalid request, and nothing is
// written.
func TestAtomicWriteRaw(t *testing.T) {
	for _, c := range []struct {
		name string
		off  uint64
		n    uint32
	}{{"unaligned", 4, 8}, {"RETH length 16", 0, 16}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				rec := n.Recorder()
				b, raw := newRawPeer(t, n, opts{}, 100)
				fill(b.buf, 9)
				before := append([]byte(nil), b.buf...)
				var h wire.Headers
				h.BTH.Opcode, h.BTH.PSN, h.BTH.AckReq = wire.RCAtomicWrite, 100, true
				h.RETH = wire.RETHFields{VA: b.mr.Addr() + 64 + c.off, RKey: b.mr.RKey(), DMALen: c.n}
				raw.send(h, []byte{1, 2, 3, 4, 5, 6, 7, 8})
				n.Run(time.Millisecond)
				resps := rec.Match(from(b))
				tt.CheckSeq(t, "responses", resps, "ACKNOWLEDGE/100 NAK_INVALID_REQ")
				checkBytes(t, "target", b.buf, before)
			})
		})
	}
}

// TestAtomicWriteNotReplayed: a duplicate ATOMIC WRITE is answered from
// its responder resource, never executed again (oA19-28, oA19-29): after
// ATOMIC WRITE v1 and a later RDMA WRITE of v2 to the same address, a
// retransmitted or late copy of the ATOMIC WRITE leaves v2.
func TestAtomicWriteNotReplayed(t *testing.T) {
	v1 := []byte{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11}
	v2 := []byte{0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22}
	t.Run("retransmitted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, 1)
			rec := n.Recorder()
			a, b := newPair(t, n, rcOpts)
			// The answer to the ATOMIC WRITE is lost: the WRITE's ACK, the
			// last answer outstanding, shows the requester it must ask
			// again for the ATOMIC WRITE's, alone (the WRITE is
			// acknowledged); the responder replays it.
			n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCReadResponseOnly)))
			copy(a.buf[8:], v2)
			a.post(atomicWriteWR(b, 1, 0, v1), rdmaWR(a, b, 2, ibv.WRRDMAWrite, 8, 0, 8))
			got := a.waitWC(2)
			wantWC(t, got[0], 1, ibv.WCSuccess, ibv.WCAtomicWrite)
			wantWC(t, got[1], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
			tt.CheckSeq(t, "requests", rec.Match(from(a)),
				"ATOMIC_WRITE/0!", "RDMA_WRITE_ONLY/1!", "ATOMIC_WRITE/0!")
			if k := b.ctr().DuplicateRequest.Load(); k != 1 {
				t.Errorf("responder saw %d duplicates, want the ATOMIC_WRITE", k)
			}
			checkBytes(t, "after the retransmitted ATOMIC_WRITE", b.buf[:8], v2)
		})
	})
	t.Run("late copy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, 1)
			rec := n.Recorder()
			a, b := newPair(t, n, rcOpts)
			a.post(atomicWriteWR(b, 1, 0, v1))
			wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCAtomicWrite)
			copy(a.buf[8:], v2)
			a.post(rdmaWR(a, b, 2, ibv.WRRDMAWrite, 8, 0, 8))
			wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
			checkBytes(t, "before the late copy", b.buf[:8], v2)
			// The network delivers the ATOMIC_WRITE once more, late.
			aw := rec.Match(ops(a, wire.RCAtomicWrite))
			if len(aw) != 1 {
				t.Fatalf("%d ATOMIC_WRITE packets recorded", len(aw))
			}
			dropped := a.ctr().DropResponse.Load()
			if _, err := a.node.Endpoint().WriteBatch([]link.Datagram{{Encap: aw[0].Encap, Buf: aw[0].Data}}); err != nil {
				t.Fatal(err)
			}
			n.Run(time.Millisecond)
			checkBytes(t, "after the late copy", b.buf[:8], v2)
			resp := rec.Match(ops(b, wire.RCReadResponseOnly))
			tt.CheckSeq(t, "answers", resp, "RDMA_READ_RESPONSE_ONLY/0", "RDMA_READ_RESPONSE_ONLY/0")
			if a.ctr().DropResponse.Load() != dropped+1 {
				t.Errorf("the requester did not drop the stale answer")
			}
			a.noWC(time.Millisecond)
			// The connection goes on.
			a.post(atomicWriteWR(b, 3, 0, v1))
			wantWC(t, a.waitWC(1)[0], 3, ibv.WCSuccess, ibv.WCAtomicWrite)
			checkBytes(t, "a new ATOMIC_WRITE", b.buf[:8], v1)
		})
	})
}

// TestFlushDuplicates: a duplicated FLUSH is answered twice from one
// execution (the replayed answer carries the same MSN), and a FLUSH whose
// answer is lost is sent again and answered from its resource.
func TestFlushDuplicates(t *testing.T) {
	o := opts{timeout: 14, retry: 7, rnr: 7, qpAccess: qpFlush, access: mrFlush}
	t.Run("duplicated", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, 1)
			rec := n.Recorder()
			a, b := newPair(t, n, o)
			n.Fabric().AddFilter(fabric.OnMatch(ops(a, wire.RCFlush), fabric.Duplicate))
			a.post(flushWR(b, 1, 0, 64, wire.FlushGlobal, wire.FlushRange))
			wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCFlush)
			a.noWC(time.Millisecond)
			resp := rec.Match(ops(b, wire.RCReadResponseOnly))
			tt.CheckSeq(t, "answers", resp, "RDMA_READ_RESPONSE_ONLY/0", "RDMA_READ_RESPONSE_ONLY/0")
			tt.CheckEach(t, resp, tt.MSN(1))
			if got := b.ctr().DuplicateRequest.Load(); got != 1 {
				t.Errorf("duplicate_request %d, want 1", got)
			}
		})
	})
	t.Run("answer lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := tt.NewNet(t, 1)
			rec := n.Recorder()
			a, b := newPair(t, n, o)
			n.Fabric().AddFilter(fabric.DropNth(1, ops(b, wire.RCReadResponseOnly)))
			start := n.Now()
			w := flushWR(b, 1, 0, 0, wire.FlushGlobal, wire.FlushMR)
			w.RemoteAddr = 0
			a.post(w)
			wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCFlush)
			reqs := rec.Match(ops(a, wire.RCFlush))
			tt.CheckSeq(t, "FLUSHes", reqs, "FLUSH/0!", "FLUSH/0!")
			if len(reqs) == 2 {
				tt.Check(t, &reqs[1], tt.At(start.Add(timeout14)))
			}
			resp := rec.Match(ops(b, wire.RCReadResponseOnly))
			tt.CheckSeq(t, "answers", resp, "RDMA_READ_RESPONSE_ONLY/0", "RDMA_READ_RESPONSE_ONLY/0")
			tt.CheckEach(t, resp, tt.MSN(1))
		})
	})
}

// TestFlushAtomicWriteInitiatorDepth: ATOMIC WRITE counts against
// max_rd_atomic like READ and atomics (rxe check_init_depth), and so does
// FLUSH (softnic: the responder spends a resource on it): with a depth of
// 1, each waits for the answer to the one before.
func TestFlushAtomicWriteInitiatorDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		rec := n.Recorder()
		a, b := newPair(t, n, opts{timeout: 14, retry: 7, rnr: 7, qpAccess: qpFlush, access: mrFlush, maxRdAtomic: 1})
		n.Fabric().AddFilter(fabric.OnMatch(from(b), fabric.Delay(time.Millisecond)))
		v := []byte{9, 9, 9, 9, 9, 9, 9, 9}
		a.post(atomicWriteWR(b, 1, 0, v),
			flushWR(b, 2, 0, 8, wire.FlushGlobal, wire.FlushRange),
			atomicWriteWR(b, 3, 8, v),
			rdmaWR(a, b, 4, ibv.WRRDMARead, 0, 0, 8))
		got := a.waitWC(4)
		for i, op := range []ibv.WCOpcode{ibv.WCAtomicWrite, ibv.WCFlush, ibv.WCAtomicWrite, ibv.WCRDMARead} {
			wantWC(t, got[i], uint64(i+1), ibv.WCSuccess, op)
		}
		tt.CheckSeq(t, "depth 1", rec.Match(nil),
			"ATOMIC_WRITE/0!", "RDMA_READ_RESPONSE_ONLY/0",
			"FLUSH/1!", "RDMA_READ_RESPONSE_ONLY/1",
			"ATOMIC_WRITE/2!", "RDMA_READ_RESPONSE_ONLY/2",
			"RDMA_READ_REQUEST/3!", "RDMA_READ_RESPONSE_ONLY/3")
	})
}
