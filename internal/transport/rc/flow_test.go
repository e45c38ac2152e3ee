package rc_test

// PSN wrap, PMTU segmentation and AckReq, fences, initiator depth,
// completion signaling, SQD and the ERR flush (IBTA 9.5, 9.7, 10.3.1,
// 10.7.3.1, 10.8.3; rxe_req.c; rxe-interop-facts.md §2.4-2.6).

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// PSNs are 24-bit and wrap (IBTA 9.7.1; rxe psn_compare): messages,
// a loss and its NAK, a READ and its re-issue, and an atomic, all across
// 0xFFFFFF → 0.
func TestRCPSNWrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		o := rcOpts
		o.sqPSN, o.rqPSN = 0xFFFFFD, 0xFFFFFE
		a, b := newPair(t, n, o)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, fabric.And(ops(a, wire.RCSendMiddle), fabric.PSNIs(1))))
		n.Fabric().AddFilter(fabric.DropNth(1, fabric.And(ops(a, wire.RCReadResponseMiddle), fabric.PSNIs(0))))

		// a→b: a six-packet SEND over the wrap, PSN 1 lost once.
		const size = 5*1024 + 10
		fill(a.buf[:size], 21)
		b.postRecv(recvWR(b, 1, 0, 8192))
		a.post(sendWR(a, 1, ibv.WRSend, 0, size))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND over the wrap", b.buf[:size], a.buf[:size])
		tt.CheckSeq(t, "a's requests", rec.Match(from(a)),
			"SEND_FIRST/16777213", "SEND_MIDDLE/16777214", "SEND_MIDDLE/16777215", "SEND_MIDDLE/0",
			"SEND_MIDDLE/1", "SEND_LAST/2!", "SEND_MIDDLE/1", "SEND_LAST/2!")
		tt.CheckSeq(t, "b's responses", rec.Match(from(b)), "ACKNOWLEDGE/1 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/2")

		// b→a: a five-packet READ over the wrap, the response at PSN 0
		// lost: the re-issued READ asks for PSN 0's PMTU alone.
		rec.Reset()
		const rn, roff, loff = 4*1024 + 500, 20000, 40000
		fill(a.buf[roff:roff+rn], 22)
		b.post(rdmaWR(b, a, 2, ibv.WRRDMARead, loff, roff, rn))
		wantWC(t, b.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMARead)
		checkBytes(t, "READ over the wrap", b.buf[loff:loff+rn], a.buf[roff:roff+rn])
		reqs := rec.Match(from(b))
		tt.CheckSeq(t, "b's requests", reqs, "RDMA_READ_REQUEST/16777214!", "RDMA_READ_REQUEST/0!")
		if len(reqs) == 2 {
			tt.Check(t, &reqs[1], tt.RETH(wire.RETHFields{VA: a.mr.Addr() + roff + 2048, RKey: a.mr.RKey(), DMALen: 1024}))
		}
		tt.CheckSeq(t, "a's responses", rec.Match(from(a)),
			"RDMA_READ_RESPONSE_FIRST/16777214", "RDMA_READ_RESPONSE_MIDDLE/16777215", "RDMA_READ_RESPONSE_MIDDLE/0",
			"RDMA_READ_RESPONSE_MIDDLE/1", "RDMA_READ_RESPONSE_LAST/2", "RDMA_READ_RESPONSE_LAST/0")

		// And on: an atomic and a WRITE after the wrap.
		rec.Reset()
		w := rdmaWR(b, a, 3, ibv.WRAtomicFetchAndAdd, 48000, 48000, 8)
		w.CompareAdd = 5
		b.post(w, rdmaWR(b, a, 4, ibv.WRRDMAWrite, 0, 50000, 1500))
		wcs := b.waitWC(2)
		wantWC(t, wcs[0], 3, ibv.WCSuccess, ibv.WCFetchAdd)
		wantWC(t, wcs[1], 4, ibv.WCSuccess, ibv.WCRDMAWrite)
		tt.CheckSeq(t, "b's last requests", rec.Match(from(b)), "FETCH_ADD/3!", "RDMA_WRITE_FIRST/4", "RDMA_WRITE_LAST/5!")
		if got, orig := u64(a.buf[48000:]), u64(b.buf[48000:]); got != 5 || orig != 0 {
			t.Errorf("fetch-add of 5 on 0 left %d and returned %d", got, orig)
		}
	})
}

// Segmentation at every PMTU: FIRST and MIDDLE carry exactly one PMTU,
// LAST the rest, a message of a whole number of PMTUs ends with a full
// LAST; the RETH rides on the WRITE's FIRST only; AckReq is on the last
// packet of each message; READ responses are cut the same way
// (rxe_req.c next_opcode_rc, rxe_resp.c check_length; IBTA C9-89..C9-92).
func TestRCSegmentation(t *testing.T) {
	for _, mtu := range []ibv.MTU{ibv.MTU256, ibv.MTU512, ibv.MTU1024, ibv.MTU2048, ibv.MTU4096} {
		t.Run(fmt.Sprint(mtu.Bytes()), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				p := mtu.Bytes()
				a, b := newPair(t, n, opts{mtu: mtu, timeout: 14, retry: 7, rnr: 7, bufSize: 1 << 15})
				rec := n.Recorder()
				type msg struct {
					op    ibv.WROpcode
					n     int
					sizes []int
				}
				msgs := []msg{
					{ibv.WRSend, 3*p + 17, []int{p, p, p, 17}},
					{ibv.WRSend, 2 * p, []int{p, p}},
					{ibv.WRSend, 0, []int{0}},
					{ibv.WRSend, p, []int{p}},
					{ibv.WRRDMAWrite, 2*p + 1, []int{p, p, 1}},
					{ibv.WRRDMAWrite, p - 3, []int{p - 3}},
					{ibv.WRRDMARead, 2*p + 3, []int{p, p, 3}},
					{ibv.WRRDMARead, 4 * p, []int{p, p, p, p}},
				}
				for i, m := range msgs {
					fill(a.buf[:m.n], i)
					fill(b.buf[:m.n], 100+i)
					rec.Reset()
					if m.op == ibv.WRSend {
						b.postRecv(recvWR(b, uint64(i), 0, 4*p+64))
					}
					a.post(rdmaWR(a, b, uint64(i), m.op, 0, 0, m.n))
					wantWC(t, a.waitWC(1)[0], uint64(i), ibv.WCSuccess, wcOpcodeOf(m.op))
					if m.op == ibv.WRSend {
						b.waitWC(1)
					}
					checkBytes(t, "data", a.buf[:m.n], b.buf[:m.n])

					data := rec.Match(fabric.And(fabric.MaskIs(wire.MaskPayload), func(p *fabric.Packet) bool {
						return !p.Wire.Is(wire.MaskAck)
					}))
					if m.op == ibv.WRRDMARead {
						reqs := rec.Match(ops(a, wire.RCReadRequest))
						if len(reqs) != 1 {
							t.Fatalf("message %d: READ requests %q", i, tt.Descs(reqs))
						}
						tt.Check(t, &reqs[0], tt.RETH(wire.RETHFields{VA: b.mr.Addr(), RKey: b.mr.RKey(), DMALen: uint32(m.n)}))
					}
					var sizes []int
					for j := range data {
						d := &data[j]
						sizes = append(sizes, len(d.Wire.Payload))
						first, last := j == 0, j == len(data)-1
						tt.Check(t, d, tt.Mask(wire.MaskStart, first), tt.Mask(wire.MaskEnd, last),
							tt.HasRETH(m.op == ibv.WRRDMAWrite && first), tt.Pad())
						if d.Wire.Is(wire.MaskRequest) {
							tt.Check(t, d, tt.AckReq(last))
						}
					}
					if !slices.Equal(sizes, m.sizes) {
						t.Errorf("message %d (%v of %d bytes): payloads %v, want %v", i, m.op, m.n, sizes, m.sizes)
					}
				}
			})
		})
	}
}

// In a long message AckReq is set on one packet in 65 as well as the
// last (rxe_req.c: noack_pkts > RXE_MAX_PKT_PER_ACK), so the window of
// rc.MaxUnackedPSNs unacknowledged PSNs keeps moving; the WRITE, longer
// than the window, arrives whole.
func TestRCAckReqPeriodic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, opts{mtu: ibv.MTU256, timeout: 14, retry: 7, rnr: 7, bufSize: 1 << 18})
		rec := n.Recorder()
		const pkts = rc.MaxUnackedPSNs + 72
		fill(a.buf[:pkts*256], 31)
		a.post(rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, pkts*256))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "written", b.buf[:pkts*256], a.buf[:pkts*256])
		reqs := rec.Match(from(a))
		if len(reqs) != pkts {
			t.Fatalf("%d packets, want %d", len(reqs), pkts)
		}
		var acked []wire.PSN
		for _, p := range reqs {
			if p.Wire.AckReq() {
				acked = append(acked, p.Wire.PSN())
			}
		}
		var want []wire.PSN // every 65th packet from the 65th, and the last
		for psn := 64; psn < pkts-1; psn += 65 {
			want = append(want, wire.PSN(psn))
		}
		want = append(want, pkts-1)
		if !slices.Equal(acked, want) {
			t.Errorf("AckReq on PSNs %v, want %v", acked, want)
		}
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("timeouts %d, want 0", got)
		}
	})
}

// IBV_SEND_FENCE holds a WR until every earlier READ and atomic has
// completed (IBTA 10.8.3.3; rxe_req.c req_next_wqe wait_fence); it does
// not wait for earlier SENDs and WRITEs, and unfenced WRs do not wait at
// all.
func TestRCFence(t *testing.T) {
	for _, c := range []struct {
		name   string
		first  ibv.WROpcode
		fence  bool
		waits  bool
		lastOf wire.Opcode // the response that completes the first WR
	}{
		{"READ then fenced SEND", ibv.WRRDMARead, true, true, wire.RCReadResponseLast},
		{"READ then SEND", ibv.WRRDMARead, false, false, wire.RCReadResponseLast},
		{"FETCH_ADD then fenced SEND", ibv.WRAtomicFetchAndAdd, true, true, wire.RCAtomicAck},
		{"WRITE then fenced SEND", ibv.WRRDMAWrite, true, false, wire.RCAck},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, rcOpts)
				rec := n.Recorder()
				// The recorder sees a datagram when it is sent, before the
				// fabric delays it: with both directions slowed down,
				// everything the requester sends in one pass is recorded
				// before the responder can answer any of it.
				n.Fabric().AddFilter(fabric.OnMatch(nil, fabric.Delay(time.Millisecond)))

				size := 8000
				if c.first == ibv.WRAtomicFetchAndAdd {
					size = 8
				}
				s := sendWR(a, 2, ibv.WRSend, 30000, 10)
				if c.fence {
					s.Flags |= ibv.SendFence
				}
				b.postRecv(recvWR(b, 1, 0, 64))
				a.post(rdmaWR(a, b, 1, c.first, 8192, 8192, size), s)
				wcs := a.waitWC(2)
				wantWC(t, wcs[0], 1, ibv.WCSuccess, wcOpcodeOf(c.first))
				wantWC(t, wcs[1], 2, ibv.WCSuccess, ibv.WCSend)

				all := rec.Match(nil)
				send := tt.Index(all, ops(a, wire.RCSendOnly))
				done := tt.Index(all, ops(b, c.lastOf))
				if send < 0 || done < 0 {
					t.Fatalf("packets %q", tt.Descs(all))
				}
				if waited := send > done; waited != c.waits {
					t.Errorf("SEND sent after the first WR's last response: %v, want %v\n%q", waited, c.waits, tt.Descs(all))
				}
			})
		})
	}
}

// max_rd_atomic bounds the READs and atomics on the wire at once (IBTA
// 9.4.4 initiator depth; rxe check_init_depth), rounded up to a power of
// two as rxe_qp_from_attr does; the WRs behind them wait, they are not
// refused.
func TestRCInitiatorDepth(t *testing.T) {
	for _, c := range []struct{ set, want uint8 }{{1, 1}, {2, 2}, {3, 4}, {8, 8}} {
		t.Run(fmt.Sprint(c.set), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, opts{timeout: 14, retry: 7, rnr: 7, maxRdAtomic: c.set})
				if got := a.query().MaxRdAtomic; got != c.want {
					t.Errorf("query max_rd_atomic %d, want %d", got, c.want)
				}
				rec := n.Recorder()
				// Requests are recorded when sent, before this delay: all
				// those of one pass precede any response in the record.
				n.Fabric().AddFilter(fabric.OnMatch(from(a), fabric.Delay(time.Millisecond)))
				var wrs []ibv.SendWR
				for i := range 12 {
					if i%3 == 2 {
						w := rdmaWR(a, b, uint64(i), ibv.WRAtomicFetchAndAdd, 40000+8*i, 60000, 8)
						w.CompareAdd = 1
						wrs = append(wrs, w)
						continue
					}
					wrs = append(wrs, rdmaWR(a, b, uint64(i), ibv.WRRDMARead, 3000*i, 3000*i, 2500))
				}
				// Plain SENDs in between are not limited.
				wrs = slices.Insert(wrs, 1, sendWR(a, 100, ibv.WRSend, 0, 10))
				b.postRecv(recvWR(b, 1, 0, 64))
				a.post(wrs...)
				a.waitWC(len(wrs))

				out, most := 0, 0
				for _, p := range rec.Match(nil) {
					switch {
					case p.Src == a.node.Addr() && (p.Wire.Opcode == wire.RCReadRequest || p.Wire.Is(wire.MaskAtomic)):
						out++
					case p.Src == b.node.Addr() && (p.Wire.Is(wire.MaskRead|wire.MaskEnd) || p.Wire.Opcode == wire.RCAtomicAck):
						out--
					}
					most = max(most, out)
				}
				if most != int(c.want) {
					t.Errorf("at most %d READs/atomics outstanding, want %d", most, c.want)
				}
				if got := u64(b.buf[60000:]); got != 4 {
					t.Errorf("counter %d after 4 fetch-adds", got)
				}
			})
		})
	}
}

// Only signaled WRs complete, unless the QP signals all (sq_sig_all);
// a WR that fails completes whether signaled or not, and so do the
// flushed ones after it (IBTA 10.7.3.1; rxe do_complete).
func TestRCSignaling(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		t.Run(fmt.Sprint("sq_sig_all=", sigAll), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, opts{timeout: 14, retry: 7, rnr: 7, sigAll: sigAll})
				var wrs []ibv.SendWR
				for i := range 6 {
					w := rdmaWR(a, b, uint64(i), []ibv.WROpcode{ibv.WRSend, ibv.WRRDMAWrite, ibv.WRRDMARead}[i%3], 1000*i, 1000*i, 500)
					if i != 1 && i != 4 {
						w.Flags = 0
					}
					if w.Opcode == ibv.WRSend {
						b.postRecv(recvWR(b, uint64(i), 0, 1000))
					}
					wrs = append(wrs, w)
				}
				a.post(wrs...)
				want := []uint64{1, 4}
				if sigAll {
					want = []uint64{0, 1, 2, 3, 4, 5}
				}
				wcs := a.waitWC(len(want))
				a.noWC(time.Second)
				var got []uint64
				for _, wc := range wcs {
					got = append(got, wc.WRID)
					if wc.Status != ibv.WCSuccess {
						t.Errorf("completion %+v", wc)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("completed WRs %v, want %v", got, want)
				}

				// An unsignaled WR that fails completes, and so do the
				// unsignaled WRs flushed behind it.
				bad := rdmaWR(a, b, 10, ibv.WRRDMAWrite, 0, 0, 100)
				bad.RKey ^= 0x77
				bad.Flags = 0
				next := sendWR(a, 11, ibv.WRSend, 0, 10)
				next.Flags = 0
				a.post(bad, next)
				wcs = a.waitWC(2)
				wantWC(t, wcs[0], 10, ibv.WCRemAccessErr, ibv.WCRDMAWrite)
				wantWC(t, wcs[1], 11, ibv.WCWRFlushErr, ibv.WCSend)
			})
		})
	}
}

// SQD (IBTA 10.3.1, 11.2.4.2): messages the requester started before the
// transition are finished, including a WRITE only partly on the wire
// when it came; nothing new starts, though WRs may be posted; the
// SQ-drained event comes once they are acknowledged when
// EnSQDAsyncNotify was set; back in RTS the queue moves on.
func TestRCSQD(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprint("notify=", notify), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, opts{mtu: ibv.MTU256, timeout: 14, retry: 7, rnr: 7, bufSize: 1 << 18})
				rec := n.Recorder()
				n.Fabric().AddFilter(fabric.OnMatch(from(b), fabric.Delay(time.Millisecond)))

				const pkts = rc.MaxUnackedPSNs + 72 // more than the window
				fill(a.buf[:pkts*256], 41)
				a.post(rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, pkts*256))
				n.Settle()
				if got := rec.Count(from(a)); got != rc.MaxUnackedPSNs {
					t.Fatalf("%d packets before the first ACK, want a window of %d", got, rc.MaxUnackedPSNs)
				}
				a.modify(ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: notify},
					ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify)
				if q := a.query(); q.State != ibv.QPStateSQD || !q.SQDraining {
					t.Errorf("after RTS->SQD with a WRITE in flight: state %v draining %v", q.State, q.SQDraining)
				}
				b.postRecv(recvWR(b, 1, 0, 64))
				a.post(sendWR(a, 2, ibv.WRSend, 0, 10))
				wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
				checkBytes(t, "written", b.buf[:pkts*256], a.buf[:pkts*256])
				a.noWC(10 * time.Millisecond)
				if got := rec.Count(ops(a, wire.RCSendOnly)); got != 0 {
					t.Errorf("the SEND posted in SQD went out %d times", got)
				}
				q := a.query()
				if q.State != ibv.QPStateSQD || q.SQDraining {
					t.Errorf("drained: state %v draining %v, want SQD false", q.State, q.SQDraining)
				}
				evs := a.takeEvents()
				if want := notify; slices.Contains(evs, ibv.EventSQDrained) != want || len(evs) > 1 {
					t.Errorf("events %v, want SQ drained %v only", evs, want)
				}

				a.modify(ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState)
				wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCSend)
				wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
			})
		})
	}
}

// A retry in SQD resends every message that had started, not only the
// first: go-back-N rewinds the later ones, and in SQD they must still go
// out again at once (they are in flight, not new), and the SQ is not
// drained before they complete.
func TestRCSQDRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropNth(1, fabric.And(ops(a, wire.RCSendMiddle), fabric.PSNIs(1))))
		// ACKs take 10ms, READ responses 30ms.
		n.Fabric().AddFilter(fabric.OnMatch(ops(b, wire.RCAck), fabric.Delay(10*time.Millisecond)))
		n.Fabric().AddFilter(fabric.OnMatch(from(b), fabric.Delay(30*time.Millisecond)))

		start := n.Now()
		fill(a.buf[:3000], 51)
		fill(b.buf[8192:8192+3000], 52)
		b.postRecv(recvWR(b, 1, 0, 4096))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 3000), rdmaWR(a, b, 2, ibv.WRRDMARead, 8192, 8192, 3000))
		n.Settle()
		a.modify(ibv.QPAttr{State: ibv.QPStateSQD, EnSQDAsyncNotify: true},
			ibv.QPAttrState|ibv.QPAttrEnSQDAsyncNotify)

		// t=10ms: the NAK of PSN 1 arrives, both WRs go out again;
		// t=20ms: the SEND is acknowledged; t=40ms: the READ answered.
		n.Run(25*time.Millisecond - n.Since(start))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCSend)
		if q := a.query(); !q.SQDraining {
			t.Errorf("SQ drained with the READ unanswered")
		}
		if evs := a.takeEvents(); len(evs) != 0 {
			t.Errorf("events %v with the READ unanswered", evs)
		}
		wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMARead)
		wantWC(t, b.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND", b.buf[:3000], a.buf[:3000])
		checkBytes(t, "READ", a.buf[8192:8192+3000], b.buf[8192:8192+3000])
		wantState(t, "requester", a, ibv.QPStateSQD)
		reqs := rec.Match(from(a))
		tt.CheckSeq(t, "requests", reqs,
			"SEND_FIRST/0", "SEND_MIDDLE/1", "SEND_LAST/2!", "RDMA_READ_REQUEST/3!",
			"SEND_MIDDLE/1", "SEND_LAST/2!", "RDMA_READ_REQUEST/3!")
		if len(reqs) == 7 {
			// On the NAK, which the responder sent once its reorder
			// window passed without the lost packet.
			tt.CheckEach(t, reqs[4:], tt.At(start.Add(10*time.Millisecond+rc.ReorderWindow)))
		}
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("timeouts %d, want 0", got)
		}
		if evs := a.takeEvents(); !slices.Equal(evs, []ibv.AsyncEventType{ibv.EventSQDrained}) {
			t.Errorf("events %v, want one SQ drained", evs)
		}
	})
}

// Moving a QP to ERR completes every outstanding send WR and every
// posted receive with WR_FLUSH_ERR, in order, signaled or not, and sends
// nothing more; WRs posted in ERR are flushed at once (IBTA 10.3.1,
// 10.8.3.3; rxe flush_send_queue).
func TestRCErrFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		n.Fabric().AddFilter(fabric.DropIf(from(b))) // nothing is ever acknowledged

		unsig := rdmaWR(a, b, 3, ibv.WRRDMARead, 8192, 0, 3000)
		unsig.Flags = 0
		a.postRecv(recvWR(a, 100, 0, 64), recvWR(a, 101, 64, 64))
		b.postRecv(recvWR(b, 200, 0, 4096), recvWR(b, 201, 4096, 64))
		a.post(sendWR(a, 1, ibv.WRSend, 0, 3000), rdmaWR(a, b, 2, ibv.WRRDMAWrite, 0, 0, 100), unsig,
			rdmaWR(a, b, 4, ibv.WRAtomicCmpAndSwp, 16384, 16384, 8))
		n.Run(time.Millisecond)
		sent := rec.Count(from(a))
		a.modify(ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		b.modify(ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState)
		wcs := a.waitWC(6)
		for i, want := range []struct {
			wrid uint64
			op   ibv.WCOpcode
		}{{1, ibv.WCSend}, {2, ibv.WCRDMAWrite}, {3, ibv.WCRDMARead}, {4, ibv.WCCompSwap}} {
			wantWC(t, wcs[i], want.wrid, ibv.WCWRFlushErr, want.op)
		}
		// Receives follow the sends here: the flush completes the SQ first.
		wantWC(t, wcs[4], 100, ibv.WCWRFlushErr, ibv.WCRecv)
		wantWC(t, wcs[5], 101, ibv.WCWRFlushErr, ibv.WCRecv)
		// b took the SEND (only its ACKs are lost); its other receive is
		// flushed.
		rwcs := b.waitWC(2)
		wantWC(t, rwcs[0], 200, ibv.WCSuccess, ibv.WCRecv)
		wantWC(t, rwcs[1], 201, ibv.WCWRFlushErr, ibv.WCRecv)

		a.post(sendWR(a, 5, ibv.WRSend, 0, 10))
		a.postRecv(recvWR(a, 102, 0, 64))
		wcs = a.waitWC(2)
		wantWC(t, wcs[0], 5, ibv.WCWRFlushErr, ibv.WCSend)
		wantWC(t, wcs[1], 102, ibv.WCWRFlushErr, ibv.WCRecv)
		a.noWC(10 * timeout14)
		if got := rec.Count(from(a)); got != sent {
			t.Errorf("%d packets sent after ERR", got-sent)
		}
	})
}

// A QP that went to ERR can be reset and connected again (IBTA 10.3.1:
// RESET clears everything): new PSNs, nothing left of the old
// connection's WQEs, timers, responder resources or sequence state.
func TestRCReuseAfterErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		o := rcOpts
		a, b := newPair(t, n, o)
		rec := n.Recorder()

		// Leave state behind: a READ and an atomic in the responder's
		// resources, a SEND whose ACK never comes, then a fatal error.
		readSetup(a, b, 1, 0, 0, 3000)
		w := rdmaWR(a, b, 2, ibv.WRAtomicFetchAndAdd, 8192, 8192, 8)
		w.CompareAdd = 1
		a.post(w)
		a.waitWC(2)
		drop := n.Fabric().AddFilter(fabric.DropIf(ops(b, wire.RCAck)))
		b.postRecv(recvWR(b, 3, 0, 64))
		a.post(sendWR(a, 3, ibv.WRSend, 0, 10))
		n.Run(time.Millisecond)
		bad := rdmaWR(a, b, 4, ibv.WRRDMAWrite, 0, 0, 10)
		bad.RKey ^= 1
		drop()
		a.post(bad)
		a.waitWCFor(2, 2*timeout14)
		b.pollAll()
		wantState(t, "a", a, ibv.QPStateErr)
		wantState(t, "b", b, ibv.QPStateErr)

		for _, e := range []*end{a, b} {
			e.modify(ibv.QPAttr{State: ibv.QPStateReset}, ibv.QPAttrState)
		}
		n.Run(10 * timeout14)
		if got := a.pollAll(); len(got) != 0 {
			t.Errorf("completions after RESET: %+v", got)
		}
		rec.Reset()
		connect(t, a, b.node.Addr(), b.qpn(), o, 5000, 9000)
		connect(t, b, a.node.Addr(), a.qpn(), o, 9000, 5000)

		fill(a.buf[:2500], 81)
		b.postRecv(recvWR(b, 10, 0, 4096))
		a.post(sendWR(a, 10, ibv.WRSend, 0, 2500))
		readSetup(a, b, 11, 8192, 4096, 2000)
		wcs := a.waitWC(2)
		wantWC(t, wcs[0], 10, ibv.WCSuccess, ibv.WCSend)
		wantWC(t, wcs[1], 11, ibv.WCSuccess, ibv.WCRDMARead)
		wantWC(t, b.waitWC(1)[0], 10, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND", b.buf[:2500], a.buf[:2500])
		checkBytes(t, "READ", a.buf[8192:8192+2000], b.buf[4096:4096+2000])
		tt.CheckSeq(t, "requests", rec.Match(from(a)),
			"SEND_FIRST/5000", "SEND_MIDDLE/5001", "SEND_LAST/5002!", "RDMA_READ_REQUEST/5003!")
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/5002",
			"RDMA_READ_RESPONSE_FIRST/5003", "RDMA_READ_RESPONSE_LAST/5004")
	})
}

// The window on the wire (rc.MaxUnackedPSNs, rxe's RXE_MAX_UNACKED_PSNS):
// with ACKs slow, the requester fills the window and then sends only as
// far as each ACK lets it, never more than the window beyond the last
// acknowledged PSN. When the ACKs are lost, the timeout's go-back-N sends
// rc.RetryUnackedPSNs packets from the oldest unacknowledged one, at the
// timer's deadline; the window then grows back as acknowledgements move,
// and the transfer completes.
func TestRCWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, opts{mtu: ibv.MTU256, timeout: 14, retry: 7, rnr: 7, bufSize: 1 << 19})
		rec := n.Recorder()
		const delay = time.Millisecond
		slow := n.Fabric().AddFilter(fabric.OnMatch(from(b), fabric.Delay(delay)))

		// window returns the most PSNs the requester had sent beyond the
		// last one acknowledged to it: the recorder sees an ACK when it
		// leaves, and the requester delay later; an ACK arriving at the
		// time of a request is taken first (the node reads, then runs).
		window := func(ps []tt.Packet) int {
			type event struct {
				at  time.Time
				ack bool
				psn wire.PSN
			}
			var evs []event
			for i := range ps {
				p := &ps[i]
				if p.Src == a.node.Addr() {
					evs = append(evs, event{p.At, false, p.Wire.PSN()})
				} else if p.Wire.Opcode == wire.RCAck {
					evs = append(evs, event{p.At.Add(delay), true, p.Wire.PSN()})
				}
			}
			slices.SortStableFunc(evs, func(x, y event) int {
				if c := x.at.Compare(y.at); c != 0 {
					return c
				}
				return cmp.Compare(boolInt(y.ack), boolInt(x.ack))
			})
			next, acked, most := wire.PSN(0), wire.PSN(0), 0
			for _, e := range evs {
				switch {
				case e.ack && e.psn.Next().After(acked):
					acked = e.psn.Next()
				case !e.ack && e.psn.Next().After(next):
					next = e.psn.Next()
				}
				most = max(most, int(next.Diff(acked)))
			}
			return most
		}
		const pkts = 3 * rc.MaxUnackedPSNs
		fill(a.buf[:pkts*256], 61)
		a.post(rdmaWR(a, b, 1, ibv.WRRDMAWrite, 0, 0, pkts*256))
		wantWC(t, a.waitWC(1)[0], 1, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "written", b.buf[:pkts*256], a.buf[:pkts*256])
		if got := window(rec.Match(nil)); got != rc.MaxUnackedPSNs {
			t.Errorf("at most %d PSNs unacknowledged, want the window, %d", got, rc.MaxUnackedPSNs)
		}
		if got := rec.Count(from(a)); got != pkts {
			t.Errorf("%d packets for %d PSNs: something was sent twice", got, pkts)
		}

		// Every ACK lost: a window, then one timeout later the retry's.
		slow()
		drop := n.Fabric().AddFilter(fabric.DropIf(ops(b, wire.RCAck)))
		rec.Reset()
		start := n.Now()
		a.post(rdmaWR(a, b, 2, ibv.WRRDMAWrite, 0, 0, pkts*256))
		n.Run(timeout14 + timeout14/2)
		first := wire.PSN(pkts)
		reqs := rec.Match(from(a))
		var retry []tt.Packet
		for _, p := range reqs[min(rc.MaxUnackedPSNs, len(reqs)):] {
			if p.At.Equal(start.Add(timeout14)) {
				retry = append(retry, p)
			}
		}
		if len(reqs) < rc.MaxUnackedPSNs || len(retry) != rc.RetryUnackedPSNs {
			t.Fatalf("%d requests, %d of them at the timeout, want the window %d and then the retry's %d",
				len(reqs), len(retry), rc.MaxUnackedPSNs, rc.RetryUnackedPSNs)
		}
		tt.Check(t, &retry[0], tt.Opcode(wire.RCWriteFirst), tt.PSN(first), tt.At(start.Add(timeout14)))
		tt.Check(t, &retry[len(retry)-1], tt.PSN(first.Add(rc.RetryUnackedPSNs-1)))
		tt.CheckEach(t, retry, tt.At(start.Add(timeout14)))
		drop()
		wantWC(t, a.waitWC(1)[0], 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		if got, early := a.ctr().Timeouts.Load(), a.ctr().EarlyRetries.Load(); got+early < 2 {
			t.Errorf("timeouts %d, early retries %d: a second go-back-N must resend what the lost ACKs left", got, early)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
