package rc_test

// Responder errors and the NAKs that report them (IBTA 9.7.5.2, 9.9.2
// classes A-C; rxe_resp.c RESPST_ERR_*; rxe_comp.c check_ack): the
// requester completes the WR with the matching status and both QPs end in
// ERR; nothing reaches the responder's memory.

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport/rc"
	tt "github.com/softnic/softnic/internal/transport/transporttest"
	"github.com/softnic/softnic/wire"
)

// nakCase is a request the responder refuses.
type nakCase struct {
	// setup prepares b and returns the WR a posts.
	setup func(t *testing.T, a, b *end) ibv.SendWR
	// syn is the NAK the responder sends, st the requester's completion.
	syn wire.Syndrome
	st  ibv.WCStatus
	// ev is the responder's affiliated asynchronous event (IBTA 11.6.3).
	ev ibv.AsyncEventType
}

// runNak posts c's WR followed by a SEND, and checks the NAK, both
// completions, both QP states, the responder's flushed receive, that the
// responder's memory is untouched and, for a READ or atomic, that the
// requester's is too.
func runNak(t *testing.T, c nakCase) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		wr := c.setup(t, a, b)
		fill(a.buf, 11)
		fill(b.buf, 12)
		beforeA, beforeB := bytes.Clone(a.buf), bytes.Clone(b.buf)

		b.postRecv(recvWR(b, 77, 0, 4096))
		a.post(wr, sendWR(a, 2, ibv.WRSend, 0, 100))
		wcs := a.waitWC(2)
		wantWC(t, wcs[0], wr.WRID, c.st, wcOpcodeOf(wr.Opcode))
		wantWC(t, wcs[1], 2, ibv.WCWRFlushErr, ibv.WCSend)
		rwc := b.waitWC(1)
		wantWC(t, rwc[0], 77, ibv.WCWRFlushErr, ibv.WCRecv)
		a.noWC(2 * timeout14)
		b.noWC(0)

		resps := rec.Match(from(b))
		tt.CheckSeq(t, "responses", resps, fmt.Sprintf("ACKNOWLEDGE/0 %v", c.syn))
		if len(resps) == 1 {
			tt.Check(t, &resps[0], tt.DestQP(a.qpn()), tt.Syndrome(c.syn), tt.MSN(0))
		}
		wantState(t, "requester", a, ibv.QPStateErr)
		wantState(t, "responder", b, ibv.QPStateErr)
		wantEvents(t, "responder", b, c.ev, ibv.EventQPFatal)
		checkBytes(t, "responder memory", b.buf, beforeB)
		checkBytes(t, "requester memory", a.buf, beforeA)
		if got := a.ctr().Timeouts.Load(); got != 0 {
			t.Errorf("requester timeouts %d, want 0", got)
		}
	})
}

// Requests the QP's access flags do not allow: Invalid Request
// (C9-93; rxe check_op_valid → RESPST_ERR_UNSUPPORTED_OPCODE → NAK 0x61,
// class C).
func TestRCNakQPAccess(t *testing.T) {
	all := ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	for _, c := range []struct {
		name   string
		op     ibv.WROpcode
		n      int
		revoke ibv.Access
	}{
		{"WRITE", ibv.WRRDMAWrite, 3000, ibv.AccessRemoteWrite},
		{"WRITE_WITH_IMM", ibv.WRRDMAWriteWithImm, 10, ibv.AccessRemoteWrite},
		{"READ", ibv.WRRDMARead, 3000, ibv.AccessRemoteRead},
		{"FETCH_ADD", ibv.WRAtomicFetchAndAdd, 8, ibv.AccessRemoteAtomic},
		{"CMP_SWAP", ibv.WRAtomicCmpAndSwp, 8, ibv.AccessRemoteAtomic},
	} {
		t.Run(c.name, func(t *testing.T) {
			runNak(t, nakCase{
				setup: func(t *testing.T, a, b *end) ibv.SendWR {
					b.modify(ibv.QPAttr{AccessFlags: all &^ c.revoke}, ibv.QPAttrAccessFlags)
					return rdmaWR(a, b, 1, c.op, 8192, 16384, c.n)
				},
				syn: wire.NakInvalidRequest, st: ibv.WCRemInvReqErr, ev: ibv.EventQPReqErr,
			})
		})
	}
}

// rkeys and ranges the responder's memory table refuses: Remote Access
// Error (C9-88.. ; rxe check_rkey → RESPST_ERR_RKEY_VIOLATION → NAK 0x62,
// class C), checked for a multi-packet WRITE, a READ and an atomic.
func TestRCNakRemoteAccess(t *testing.T) {
	const all = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic
	cases := []struct {
		name string
		// where returns the remote address and rkey to use for n bytes.
		where func(t *testing.T, b *end, n int) (uint64, uint32)
	}{
		{"bad rkey index", func(t *testing.T, b *end, n int) (uint64, uint32) {
			return b.mr.Addr(), b.mr.RKey() + 0x1000
		}},
		{"key byte mismatch", func(t *testing.T, b *end, n int) (uint64, uint32) {
			return b.mr.Addr(), b.mr.RKey() ^ 0x5a
		}},
		{"past the end", func(t *testing.T, b *end, n int) (uint64, uint32) {
			return b.mr.Addr() + b.mr.Len() - uint64(n) + 8, b.mr.RKey()
		}},
		{"before the start", func(t *testing.T, b *end, n int) (uint64, uint32) {
			return b.mr.Addr() - 8, b.mr.RKey()
		}},
		{"other PD", func(t *testing.T, b *end, n int) (uint64, uint32) {
			pd, err := b.tbl.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			mr, err := b.tbl.RegMR(pd, make([]byte, 8192), 0x2000_0000, true, all)
			if err != nil {
				t.Fatal(err)
			}
			return mr.Addr(), mr.RKey()
		}},
		{"MR without the right", func(t *testing.T, b *end, n int) (uint64, uint32) {
			mr, err := b.tbl.RegMR(b.pd, make([]byte, 8192), 0x2000_0000, true, ibv.AccessLocalWrite|ibv.AccessMWBind)
			if err != nil {
				t.Fatal(err)
			}
			return mr.Addr(), mr.RKey()
		}},
		{"deregistered MR", func(t *testing.T, b *end, n int) (uint64, uint32) {
			mr, err := b.tbl.RegMR(b.pd, make([]byte, 8192), 0x2000_0000, true, all)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.tbl.DeregMR(mr); err != nil {
				t.Fatal(err)
			}
			return mr.Addr(), mr.RKey()
		}},
	}
	for _, c := range cases {
		for _, op := range []struct {
			name string
			op   ibv.WROpcode
			n    int
		}{
			{"WRITE", ibv.WRRDMAWrite, 2500},
			{"READ", ibv.WRRDMARead, 2500},
			{"FETCH_ADD", ibv.WRAtomicFetchAndAdd, 8},
		} {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				runNak(t, nakCase{
					setup: func(t *testing.T, a, b *end) ibv.SendWR {
						addr, rkey := c.where(t, b, op.n)
						w := sendWR(a, 1, op.op, 8192, op.n)
						w.RemoteAddr, w.RKey = addr&^7, rkey
						return w
					},
					syn: wire.NakRemoteAccess, st: ibv.WCRemAccessErr, ev: ibv.EventQPAccessErr,
				})
			})
		}
	}
}

// A receive WQE whose SGE the memory table refuses: Remote Operational
// Error to the requester (NAK 0x63; rxe RESPST_ERR_MALFORMED_WQE, class
// A), a local protection error on the receive, both QPs in ERR and the
// receives behind it flushed.
func TestRCNakRemoteOp(t *testing.T) {
	for _, c := range []struct {
		name string
		sge  func(b *end) ibv.SGE
	}{
		{"bad lkey", func(b *end) ibv.SGE { s := b.sge(0, 4096); s.LKey ^= 0x33; return s }},
		{"outside the MR", func(b *end) ibv.SGE { return b.sge(len(b.buf)-100, 4096) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				a, b := newPair(t, n, rcOpts)
				rec := n.Recorder()
				fill(a.buf, 13)
				before := bytes.Clone(b.buf)

				b.postRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{c.sge(b)}}, recvWR(b, 2, 0, 4096))
				a.post(sendWR(a, 10, ibv.WRSend, 0, 2000), sendWR(a, 11, ibv.WRSend, 0, 10))
				wcs := a.waitWC(2)
				wantWC(t, wcs[0], 10, ibv.WCRemOpErr, ibv.WCSend)
				wantWC(t, wcs[1], 11, ibv.WCWRFlushErr, ibv.WCSend)
				rwcs := b.waitWC(2)
				wantWC(t, rwcs[0], 1, ibv.WCLocProtErr, ibv.WCRecv)
				wantWC(t, rwcs[1], 2, ibv.WCWRFlushErr, ibv.WCRecv)
				tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/0 NAK_REM_OP_ERR")
				wantState(t, "requester", a, ibv.QPStateErr)
				wantState(t, "responder", b, ibv.QPStateErr)
				checkBytes(t, "responder memory", b.buf, before)
				if got := b.ctr().RemoteOpErr.Load(); got != 1 {
					t.Errorf("responder remote op errors %d, want 1", got)
				}
			})
		})
	}
}

// A SEND longer than the receive buffer: Invalid Request to the requester
// (rxe RESPST_ERR_LENGTH, class C) and a local length error on the
// receive.
func TestRCNakReceiveTooShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		b.postRecv(recvWR(b, 1, 0, 1500))
		a.post(sendWR(a, 10, ibv.WRSend, 0, 3000))
		wantWC(t, a.waitWC(1)[0], 10, ibv.WCRemInvReqErr, ibv.WCSend)
		wantWC(t, b.waitWC(1)[0], 1, ibv.WCLocLenErr, ibv.WCRecv)
		tt.CheckSeq(t, "NAKs", rec.Match(tt.IsNAK), "ACKNOWLEDGE/1 NAK_INVALID_REQ")
		wantState(t, "requester", a, ibv.QPStateErr)
		wantState(t, "responder", b, ibv.QPStateErr)
	})
}

// rawCase is a request a requester of package rc would refuse to build,
// sent by a raw peer.
type rawCase struct {
	name    string
	h       wire.Headers
	payload []byte
	syn     wire.Syndrome
}

// Requests only a broken or hostile requester sends, straight from a raw
// endpoint: each is NAKed with the class C syndrome rxe uses, at the
// request's PSN, and the responder QP goes to ERR with its memory
// untouched.
func TestRCNakRawRequests(t *testing.T) {
	const mtu = 1024
	reth := func(op wire.Opcode, va uint64, rkey, n uint32) wire.Headers {
		return wire.Headers{BTH: wire.BTHFields{Opcode: op, AckReq: true},
			RETH: wire.RETHFields{VA: va, RKey: rkey, DMALen: n}}
	}
	atomic := func(op wire.Opcode, va uint64, rkey uint32) wire.Headers {
		return wire.Headers{BTH: wire.BTHFields{Opcode: op, AckReq: true},
			AtomicETH: wire.AtomicETHFields{VA: va, RKey: rkey, SwapAdd: 1}}
	}
	cases := func(addr uint64, rkey uint32) []rawCase {
		return []rawCase{
			// IBTA C9-128 / rxe RESPST_ERR_MISALIGNED_ATOMIC.
			{"misaligned FETCH_ADD", atomic(wire.RCFetchAdd, addr+4, rkey), nil, wire.NakInvalidRequest},
			{"misaligned CMP_SWAP", atomic(wire.RCCompareSwap, addr+12, rkey), nil, wire.NakInvalidRequest},
			// rxe check_length: RETH length above 2^31 is invalid...
			{"READ of 2^31+1 bytes", reth(wire.RCReadRequest, addr, rkey, 1<<31+1), nil, wire.NakInvalidRequest},
			{"WRITE of 2^32-1 bytes", reth(wire.RCWriteFirst, addr, rkey, 1<<32-1), make([]byte, mtu), wire.NakInvalidRequest},
			// ...2^31 itself passes it and fails the range check.
			{"READ of 2^31 bytes", reth(wire.RCReadRequest, addr, rkey, 1<<31), nil, wire.NakRemoteAccess},
			// rxe check_op_seq: RESPST_ERR_MISSING_OPCODE_FIRST.
			{"SEND_MIDDLE first", wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendMiddle}}, make([]byte, mtu), wire.NakInvalidRequest},
			{"WRITE_LAST first", wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteLast, AckReq: true}}, make([]byte, 8), wire.NakInvalidRequest},
			// rxe check_length: FIRST must carry exactly one PMTU...
			{"short SEND_FIRST", wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendFirst}}, make([]byte, mtu-4), wire.NakInvalidRequest},
			// ...and ONLY at most one.
			{"long WRITE_ONLY", reth(wire.RCWriteOnly, addr, rkey, mtu+4), make([]byte, mtu+4), wire.NakInvalidRequest},
			// rxe check_rkey: the payload must match the RETH length.
			{"WRITE_ONLY longer than its RETH", reth(wire.RCWriteOnly, addr, rkey, 16), make([]byte, 32), wire.NakInvalidRequest},
			{"WRITE_ONLY shorter than its RETH", reth(wire.RCWriteOnly, addr, rkey, 64), make([]byte, 32), wire.NakInvalidRequest},
		}
	}
	names := cases(0, 0)
	for i := range names {
		t.Run(names[i].name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := tt.NewNet(t, 1)
				b, raw := newRawPeer(t, n, opts{}, 0)
				rec := n.Recorder()
				c := cases(b.mr.Addr(), b.mr.RKey())[i]
				fill(b.buf, 3)
				before := bytes.Clone(b.buf)
				raw.send(c.h, c.payload)
				n.Run(time.Millisecond)
				resps := rec.Match(from(b))
				tt.CheckSeq(t, "responses", resps, fmt.Sprintf("ACKNOWLEDGE/0 %v", c.syn))
				if len(resps) == 1 {
					tt.Check(t, &resps[0], tt.DestQP(raw.qpn), tt.Syndrome(c.syn))
				}
				wantState(t, "responder", b, ibv.QPStateErr)
				checkBytes(t, "responder memory", b.buf, before)
			})
		})
	}
}

// The responder NAKs a PSN gap once, with the PSN it expects, when the
// gap has not closed within the reorder window, stays silent on further
// out-of-sequence packets (rxe sent_psn_nak), and NAKs a new gap once
// the expected PSN arrived. The requests beyond each gap are held, and
// executed in order once it closes (reorder.go).
func TestRCNakSequenceOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		b, raw := newRawPeer(t, n, opts{}, 100)
		rec := n.Recorder()
		for i := range 6 {
			b.postRecv(recvWR(b, uint64(i), i*64, 64))
		}
		for _, psn := range []wire.PSN{102, 103, 105, 100, 104, 101} {
			raw.sendOnly(psn, []byte{byte(psn)})
			n.Run(4 * rc.ReorderWindow)
		}
		tt.CheckSeq(t, "responses", rec.Match(from(b)),
			"ACKNOWLEDGE/100 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/100", "ACKNOWLEDGE/101 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/105")
		for i, wc := range b.waitWC(6) {
			wantWC(t, wc, uint64(i), ibv.WCSuccess, ibv.WCRecv)
			if got := b.buf[i*64]; got != byte(100+i) {
				t.Errorf("receive %d holds the SEND of PSN %d, want %d", i, got, 100+i)
			}
		}
		if got := b.ctr().OutOfSequence.Load(); got != 4 {
			t.Errorf("out_of_sequence %d, want 4", got)
		}
		if got := b.ctr().HeldRequests.Load(); got != 4 {
			t.Errorf("held_requests %d, want 4", got)
		}
		wantState(t, "responder", b, ibv.QPStateRTS)
	})
}

// A request overtaken by the next one on the way is no loss: the
// responder holds the one that came first for the reorder window, the
// missing one comes within it, and both execute in order with no NAK
// and no go-back-N (rxe NAKs the first and drops it, and the requester
// sends both again; reorder.go).
func TestRCReorderedRequestNoNAK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		a, b := newPair(t, n, rcOpts)
		rec := n.Recorder()
		// The second WRITE MIDDLE waits until the next packet passed it.
		n.Fabric().AddFilter(fabric.OnNth(2, ops(a, wire.RCWriteMiddle), fabric.Reorder))

		writeChecked(t, a, b, 3)
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/6")
		if got := a.ctr().Retransmits.Load(); got != 0 {
			t.Errorf("go-back-N retries %d, want 0", got)
		}
		if got := b.ctr().HeldRequests.Load(); got != 1 {
			t.Errorf("held_requests %d, want 1", got)
		}
	})
}

// An RNR NAK drops what the responder held behind the gap: the requester
// goes back to the NAKed PSN and sends it all again (reorder.go), so
// nothing held is executed twice or out of the order it is sent again in.
func TestRCRNRDropsHeldRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		b, raw := newRawPeer(t, n, opts{}, 100)
		rec := n.Recorder()
		send := func(psn wire.PSN) {
			raw.sendOnly(psn, []byte{byte(psn)})
			n.Settle()
		}
		send(101)
		send(102)
		send(100) // no receive posted: RNR NAK
		b.postRecv(recvWR(b, 0, 0, 64), recvWR(b, 1, 64, 64), recvWR(b, 2, 128, 64))
		send(100)
		n.Run(4 * rc.ReorderWindow)
		tt.CheckSeq(t, "responses", rec.Match(from(b)), "ACKNOWLEDGE/100 RNR_NAK(timer=12)", "ACKNOWLEDGE/100")
		wantWC(t, b.waitWC(1)[0], 0, ibv.WCSuccess, ibv.WCRecv)
		b.noWC(time.Millisecond)
		send(101)
		send(102)
		for i, wc := range b.waitWC(2) {
			wantWC(t, wc, uint64(i+1), ibv.WCSuccess, ibv.WCRecv)
			if got := b.buf[(i+1)*64]; got != byte(101+i) {
				t.Errorf("receive %d holds the SEND of PSN %d, want %d", i+1, got, 101+i)
			}
		}
	})
}

// A PSN sequence NAK drops the READs the responder held behind the gap
// and keeps the rest: the requester's go-back-N asks each READ again, and
// one executed from the hold would be answered twice, once now and once
// for its copy, a duplicate the responder must answer (C9-105); a WRITE
// held is executed once, its copy acknowledged as a duplicate.
func TestRCSequenceNAKDropsHeldReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := tt.NewNet(t, 1)
		b, raw := newRawPeer(t, n, opts{}, 100)
		rec := n.Recorder()
		b.postRecv(recvWR(b, 0, 0, 64))
		fill(b.buf[4096:8192], 5)
		write := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteOnly, PSN: 101},
			RETH: wire.RETHFields{VA: b.mr.Addr() + 1024, RKey: b.mr.RKey(), DMALen: 4}}
		read := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadRequest, PSN: 102},
			RETH: wire.RETHFields{VA: b.mr.Addr() + 4096, RKey: b.mr.RKey(), DMALen: 2048}}
		send := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PSN: 100, AckReq: true}}
		raw.send(write, []byte("abcd"))
		raw.send(read, nil) // its answer takes PSNs 102 and 103 at path MTU 1024
		n.Run(4 * rc.ReorderWindow)
		// The go-back-N, once the NAK came.
		raw.send(send, []byte("x"))
		raw.send(write, []byte("abcd"))
		raw.send(read, nil)
		n.Run(time.Millisecond)
		tt.CheckSeq(t, "responses", rec.Match(from(b)),
			"ACKNOWLEDGE/100 NAK_PSN_SEQ_ERR", "ACKNOWLEDGE/101",
			"RDMA_READ_RESPONSE_FIRST/102", "RDMA_READ_RESPONSE_LAST/103")
		if got := string(b.buf[1024:1028]); got != "abcd" {
			t.Errorf("WRITE wrote %q, want abcd", got)
		}
		wantWC(t, b.waitWC(1)[0], 0, ibv.WCSuccess, ibv.WCRecv)
		if got := b.ctr().DuplicateRequest.Load(); got != 1 {
			t.Errorf("duplicate_request %d, want 1 (the WRITE's copy)", got)
		}
	})
}
