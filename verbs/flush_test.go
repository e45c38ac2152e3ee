package verbs_test

// FLUSH and ATOMIC WRITE (IBA 1.5 Annex A19) end to end: the packets and
// their zero-length RDMA READ RESPONSE answers, the access rules of the
// QP and the region, and the responder resources that answer duplicates
// without executing them again, under loss, duplication and a late
// replay.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

const (
	qpFlush = ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic | ibv.AccessFlushGlobal
	mrFlush = mAllMR | ibv.AccessFlushGlobal
)

// mflush is a signaled FLUSH.
func mflush(wrid uint64, rkey uint32, addr uint64, n uint32, typ, level uint8) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRFlush, Flags: ibv.SendSignaled, RKey: rkey, RemoteAddr: addr,
		FlushLen: n, FlushType: typ, FlushLevel: level}
}

// matomicWrite is a signaled ATOMIC WRITE of v (as 8 inline bytes).
func matomicWrite(wrid uint64, rkey uint32, addr uint64, v []byte) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: ibv.WRAtomicWrite, Flags: ibv.SendSignaled | ibv.SendInline,
		RKey: rkey, RemoteAddr: addr, InlineData: v}
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
	pers := uint8(verbs.FlushPersistent)
	tcs := []tc{
		{"global range", qpFlush, mrFlush, verbs.FlushGlobal, verbs.FlushRange, 100, 4000, false, ibv.WCSuccess},
		{"global whole MR", qpFlush, mrFlush, verbs.FlushGlobal, verbs.FlushMR, -1 << 20, 0, false, ibv.WCSuccess},
		{"global empty range at the end", qpFlush, mrFlush, verbs.FlushGlobal, verbs.FlushRange, 1 << 16, 0, false, ibv.WCSuccess},
		{"QP without FLUSH_GLOBAL", qpFlush &^ ibv.AccessFlushGlobal, mrFlush, verbs.FlushGlobal, verbs.FlushRange, 0, 64, false, ibv.WCRemInvReqErr},
		{"QP without FLUSH_PERSISTENT", qpFlush, mrFlush, pers, verbs.FlushRange, 0, 64, false, ibv.WCRemInvReqErr},
		{"MR without FLUSH_GLOBAL", qpFlush, mAllMR, verbs.FlushGlobal, verbs.FlushRange, 0, 64, false, ibv.WCRemAccessErr},
		{"MR without FLUSH_PERSISTENT", qpFlush | ibv.AccessFlushPersistent, mrFlush, pers, verbs.FlushRange, 0, 64, false, ibv.WCRemAccessErr},
		{"range past the MR", qpFlush, mrFlush, verbs.FlushGlobal, verbs.FlushRange, 1<<16 - 32, 64, false, ibv.WCRemAccessErr},
		{"whole MR under a bad key", qpFlush, mrFlush, verbs.FlushGlobal, verbs.FlushMR, 0, 0, true, ibv.WCRemAccessErr},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				rec := record(t, f)
				a, b := mpair(t, f, mopts{qpAccess: c.qpAcc, mrAccess: c.mrAcc})
				rkey := b.mr.RKey()
				if c.badKey {
					rkey ^= 0x80
				}
				// A WRITE first, so the FLUSH's MSN is the second message.
				mpost(t, a.qp, mwrite(a, 1, 0, 8, b.mr.RKey(), b.mr.Addr()))
				mone(t, a, 1, ibv.WCSuccess, ibv.WCRDMAWrite)
				mpost(t, a.qp, mflush(2, rkey, uint64(int64(b.mr.Addr())+c.off), c.n, c.typ, c.level))
				wc := mone(t, a, 2, c.want, ibv.WCFlush)
				if c.want != ibv.WCSuccess {
					wantState(t, "requester", &end{qp: a.qp}, ibv.QPStateErr)
					return
				}
				if wc.ByteLen != c.n {
					t.Errorf("FLUSH byte_len %d, want %d", wc.ByteLen, c.n)
				}
				noWC(t, b.cq, time.Millisecond) // no receive consumed at the responder
				req := rec.match(ops(&end{dev: a.dev}, wire.RCFlush))
				resp := rec.match(ops(&end{dev: b.dev}, wire.RCReadResponseOnly))
				if len(req) != 1 || len(resp) != 1 {
					t.Fatalf("%d FLUSH requests and %d responses, want 1 and 1", len(req), len(resp))
				}
				p := &req[0].Wire
				if ft := p.FETH(); ft.PlacementType() != c.typ || ft.Selectivity() != c.level {
					t.Errorf("FETH type %d level %d, want %d %d", ft.PlacementType(), ft.Selectivity(), c.typ, c.level)
				}
				if r := p.RETH(); r.RKey() != rkey || r.DMALen() != c.n || r.VA() != uint64(int64(b.mr.Addr())+c.off) {
					t.Errorf("RETH %#x/%d/%#x", r.VA(), r.DMALen(), r.RKey())
				}
				if len(p.Payload) != 0 || !p.AckReq() {
					t.Errorf("FLUSH: payload %d, AckReq %v; want none and set", len(p.Payload), p.AckReq())
				}
				r := &resp[0].Wire
				if r.PSN() != p.PSN() || len(r.Payload) != 0 || r.AETH().MSN() != 2 || !r.AETH().Syndrome().IsACK() {
					t.Errorf("response PSN %d payload %d MSN %d %v; want PSN %d, empty, MSN 2, ACK",
						r.PSN(), len(r.Payload), r.AETH().MSN(), r.AETH().Syndrome(), p.PSN())
				}
			})
		})
	}
}

// TestFlushPersistentMR: ordinary memory cannot be registered for
// persistent flushes (rxe refuses FLUSH_PERSISTENT on pages that are not
// pmem), and the device says so by not reporting FLUSH_PERSISTENT.
func TestFlushPersistentMR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		_, b := mpair(t, f, mopts{})
		_, err := b.pd.RegMR(make([]byte, 64), ibv.AccessLocalWrite|ibv.AccessFlushPersistent)
		apiWantErr(t, "RegMR with FLUSH_PERSISTENT", err, "persistent", verbs.EINVAL)
		caps := b.dev.QueryDevice().DeviceCapFlags
		for _, c := range []struct {
			name string
			bit  uint64
			want bool
		}{
			{"MEM_WINDOW", 1 << 17, true}, {"MEM_MGT_EXTENSIONS", 1 << 21, true},
			{"MEM_WINDOW_TYPE_2B", 1 << 24, true}, {"FLUSH_GLOBAL", 1 << 38, true},
			{"FLUSH_PERSISTENT", 1 << 39, false}, {"ATOMIC_WRITE", 1 << 40, true},
			{"MEM_WINDOW_TYPE_2A", 1 << 23, false}, {"XRC", 1 << 20, true},
		} {
			if got := caps&c.bit != 0; got != c.want {
				t.Errorf("device_cap_flags %#x: %s %v, want %v", caps, c.name, got, c.want)
			}
		}
	})
}

// TestAtomicWrite: ATOMIC WRITE stores its 8 bytes as sent (rxe stores
// the payload's u64 unchanged), from inline data, an SGE or the builder;
// the packet is RETH with DMA length 8 plus 8 bytes, answered by an empty
// READ RESPONSE ONLY. A QP without REMOTE_WRITE refuses it as an invalid
// request, a region without REMOTE_WRITE with an access error.
func TestAtomicWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		rec := record(t, f)
		a, b := mpair(t, f, mopts{ops: verbs.SendOpsAtomicWrite | verbs.SendOpsSend})
		v1 := []byte{1, 2, 3, 4, 5, 6, 7, 8}
		mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr()+64, v1))
		wc := mone(t, a, 1, ibv.WCSuccess, ibv.WCAtomicWrite)
		if wc.ByteLen != 8 {
			t.Errorf("ATOMIC_WRITE byte_len %d, want 8", wc.ByteLen)
		}
		checkBytes(t, "inline ATOMIC_WRITE", b.buf[64:72], v1)
		copy(a.buf[200:], "SGE-data")
		mpost(t, a.qp, ibv.SendWR{WRID: 2, Opcode: ibv.WRAtomicWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(200, 4), a.mr.SGE(204, 4)}, RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr() + 72})
		mone(t, a, 2, ibv.WCSuccess, ibv.WCAtomicWrite)
		checkBytes(t, "ATOMIC_WRITE from two SGEs", b.buf[72:80], []byte("SGE-data"))
		x, err := a.qp.Ex()
		must(t, err)
		x.WrStart()
		x.WRID, x.WRFlags = 3, ibv.SendSignaled
		x.WrAtomicWrite(b.mr.RKey(), b.mr.Addr()+80, [8]byte{'b', 'u', 'i', 'l', 'd', 'e', 'r', '!'})
		must(t, x.WrComplete())
		mone(t, a, 3, ibv.WCSuccess, ibv.WCAtomicWrite)
		checkBytes(t, "builder ATOMIC_WRITE", b.buf[80:88], []byte("builder!"))

		req := rec.match(ops(&end{dev: a.dev}, wire.RCAtomicWrite))
		resp := rec.match(ops(&end{dev: b.dev}, wire.RCReadResponseOnly))
		if len(req) != 3 || len(resp) != 3 {
			t.Fatalf("%d ATOMIC_WRITE requests, %d responses; want 3 and 3", len(req), len(resp))
		}
		for i := range req {
			p, r := &req[i].Wire, &resp[i].Wire
			if p.RETH().DMALen() != 8 || len(p.Payload) != 8 || r.PSN() != p.PSN() || len(r.Payload) != 0 {
				t.Errorf("ATOMIC_WRITE %d: DMA length %d, payload %d, response PSN %d (request %d) payload %d",
					i, p.RETH().DMALen(), len(p.Payload), r.PSN(), p.PSN(), len(r.Payload))
			}
		}

		// Refusals, each on a fresh pair.
		for _, c := range []struct {
			name         string
			qpAcc, mrAcc ibv.Access
			want         ibv.WCStatus
		}{
			{"QP without REMOTE_WRITE", ibv.AccessRemoteRead | ibv.AccessRemoteAtomic, mAllMR, ibv.WCRemInvReqErr},
			{"MR without REMOTE_WRITE", 0, ibv.AccessLocalWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic, ibv.WCRemAccessErr},
		} {
			f2 := fabric.New(fabric.Config{})
			a, b := mpair(t, f2, mopts{qpAccess: c.qpAcc, mrAccess: c.mrAcc})
			fill(b.buf, 5)
			before := append([]byte(nil), b.buf...)
			mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr(), v1))
			mone(t, a, 1, c.want, ibv.WCAtomicWrite)
			settle(time.Millisecond)
			checkBytes(t, c.name+": target", b.buf, before)
			f2.Close()
		}
	})
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
				f := fabric.New(fabric.Config{})
				defer f.Close()
				rec := record(t, f)
				b, raw := newRawPeer(t, f, pairOpts{}, 100)
				fill(b.buf, 9)
				before := append([]byte(nil), b.buf...)
				var h wire.Headers
				h.BTH.Opcode, h.BTH.PSN, h.BTH.AckReq = wire.RCAtomicWrite, 100, true
				h.RETH = wire.RETHFields{VA: b.mr.Addr() + 64 + c.off, RKey: b.mr.RKey(), DMALen: c.n}
				raw.send(t, h, []byte{1, 2, 3, 4, 5, 6, 7, 8})
				settle(time.Millisecond)
				naks := rec.match(fabric.And(from(b), isNak))
				if len(naks) != 1 || naks[0].syn() != wire.NakInvalidRequest {
					t.Errorf("responses %q, want one Invalid Request NAK", descs(rec.match(from(b))))
				}
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
			f := fabric.New(fabric.Config{})
			defer f.Close()
			rec := record(t, f)
			a, b := mpair(t, f, mopts{})
			// The answer to the ATOMIC WRITE is lost: the WRITE's ACK then
			// shows the requester it must go back and send both again.
			f.AddFilter(fabric.DropNth(1, ops(&end{dev: b.dev}, wire.RCReadResponseOnly)))
			copy(a.buf[8:], v2)
			mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr(), v1), mwrite(a, 2, 8, 8, b.mr.RKey(), b.mr.Addr()))
			got := waitWC(t, a.cq, 2)
			wantWC(t, got[0], 1, ibv.WCSuccess, ibv.WCAtomicWrite)
			wantWC(t, got[1], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
			if n := rec.count(ops(&end{dev: a.dev}, wire.RCAtomicWrite)); n != 2 {
				t.Errorf("ATOMIC_WRITE sent %d times, want 2 (one retransmission)", n)
			}
			if n := b.dev.Counters().DuplicateRequest; n < 2 {
				t.Errorf("responder saw %d duplicates, want the ATOMIC_WRITE and the WRITE", n)
			}
			checkBytes(t, "after the retransmitted ATOMIC_WRITE", b.buf[:8], v2)
		})
	})
	t.Run("late copy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			rec := record(t, f)
			a, b := mpair(t, f, mopts{})
			mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr(), v1))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCAtomicWrite)
			copy(a.buf[8:], v2)
			mpost(t, a.qp, mwrite(a, 2, 8, 8, b.mr.RKey(), b.mr.Addr()))
			mone(t, a, 2, ibv.WCSuccess, ibv.WCRDMAWrite)
			checkBytes(t, "before the late copy", b.buf[:8], v2)
			// The network delivers the ATOMIC_WRITE once more, late.
			aw := rec.match(ops(&end{dev: a.dev}, wire.RCAtomicWrite))
			if len(aw) != 1 {
				t.Fatalf("%d ATOMIC_WRITE packets recorded", len(aw))
			}
			dropped := a.dev.Counters().DropResponse
			if _, err := a.ep.WriteBatch([]link.Datagram{{Encap: aw[0].Encap, Buf: aw[0].Data}}); err != nil {
				t.Fatal(err)
			}
			settle(time.Millisecond)
			checkBytes(t, "after the late copy", b.buf[:8], v2)
			resp := rec.match(ops(&end{dev: b.dev}, wire.RCReadResponseOnly))
			if len(resp) != 2 || resp[1].psn() != aw[0].psn() {
				t.Errorf("responses %q, want the replayed answer at PSN %d", descs(resp), aw[0].psn())
			}
			if a.dev.Counters().DropResponse != dropped+1 {
				t.Errorf("the requester did not drop the stale answer")
			}
			noWC(t, a.cq, time.Millisecond)
			// The connection goes on.
			mpost(t, a.qp, matomicWrite(3, b.mr.RKey(), b.mr.Addr(), v1))
			mone(t, a, 3, ibv.WCSuccess, ibv.WCAtomicWrite)
			checkBytes(t, "a new ATOMIC_WRITE", b.buf[:8], v1)
		})
	})
}

// TestFlushDuplicates: a duplicated FLUSH is answered twice from one
// execution (the replayed answer carries the same MSN), and a FLUSH whose
// answer is lost is sent again and answered from its resource.
func TestFlushDuplicates(t *testing.T) {
	t.Run("duplicated", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			rec := record(t, f)
			a, b := mpair(t, f, mopts{qpAccess: qpFlush, mrAccess: mrFlush})
			f.AddFilter(fabric.OnMatch(ops(&end{dev: a.dev}, wire.RCFlush), fabric.Duplicate))
			mpost(t, a.qp, mflush(1, b.mr.RKey(), b.mr.Addr(), 64, verbs.FlushGlobal, verbs.FlushRange))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCFlush)
			noWC(t, a.cq, time.Millisecond)
			resp := rec.match(ops(&end{dev: b.dev}, wire.RCReadResponseOnly))
			if len(resp) != 2 || resp[0].psn() != resp[1].psn() || resp[0].Wire.AETH().MSN() != resp[1].Wire.AETH().MSN() {
				t.Fatalf("answers %q, want two with the same PSN and MSN", descs(resp))
			}
			if got := b.dev.Counters().DuplicateRequest; got != 1 {
				t.Errorf("duplicate_request %d, want 1", got)
			}
		})
	})
	t.Run("answer lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			rec := record(t, f)
			a, b := mpair(t, f, mopts{qpAccess: qpFlush, mrAccess: mrFlush})
			f.AddFilter(fabric.DropNth(1, ops(&end{dev: b.dev}, wire.RCReadResponseOnly)))
			mpost(t, a.qp, mflush(1, b.mr.RKey(), 0, 0, verbs.FlushGlobal, verbs.FlushMR))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCFlush)
			if n := rec.count(ops(&end{dev: a.dev}, wire.RCFlush)); n != 2 {
				t.Errorf("FLUSH sent %d times, want 2", n)
			}
			resp := rec.match(ops(&end{dev: b.dev}, wire.RCReadResponseOnly))
			if len(resp) != 2 || resp[1].Wire.AETH().MSN() != 1 {
				t.Errorf("answers %q (MSN of the replay %d), want two, MSN 1", descs(resp), resp[len(resp)-1].Wire.AETH().MSN())
			}
		})
	})
}

// TestInitiatorDepth: ATOMIC WRITE counts against max_rd_atomic like READ
// and atomics (rxe check_init_depth), and so does FLUSH (softnic: the
// responder spends a resource on it): with a depth of 1, each waits for
// the answer to the one before.
func TestInitiatorDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		rec := record(t, f)
		a, b := mpair(t, f, mopts{qpAccess: qpFlush, mrAccess: mrFlush, maxRdAtomic: 1})
		f.AddFilter(fabric.OnMatch(from(&end{dev: b.dev}), fabric.Delay(time.Millisecond)))
		v := []byte{9, 9, 9, 9, 9, 9, 9, 9}
		mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr(), v),
			mflush(2, b.mr.RKey(), b.mr.Addr(), 8, verbs.FlushGlobal, verbs.FlushRange),
			matomicWrite(3, b.mr.RKey(), b.mr.Addr()+8, v),
			mread(a, 4, 0, 8, b.mr.RKey(), b.mr.Addr()))
		got := waitWC(t, a.cq, 4)
		for i, op := range []ibv.WCOpcode{ibv.WCAtomicWrite, ibv.WCFlush, ibv.WCAtomicWrite, ibv.WCRDMARead} {
			wantWC(t, got[i], uint64(i+1), ibv.WCSuccess, op)
		}
		checkSeq(t, "depth 1", rec.match(nil),
			"ATOMIC_WRITE/0!", "RDMA_READ_RESPONSE_ONLY/0",
			"FLUSH/1!", "RDMA_READ_RESPONSE_ONLY/1",
			"ATOMIC_WRITE/2!", "RDMA_READ_RESPONSE_ONLY/2",
			"RDMA_READ_REQUEST/3!", "RDMA_READ_RESPONSE_ONLY/3")
	})
}
