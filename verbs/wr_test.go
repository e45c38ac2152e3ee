package verbs_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The ibv_wr_* builder interface (QPEx): ibv_wr_post(3) semantics, with
// the rdma-core rxe provider's wr_* functions as the reference.

// wrAllRC is every builder an RC QP may enable.
const wrAllRC = verbs.SendOpsRDMAWrite | verbs.SendOpsRDMAWriteWithImm | verbs.SendOpsSend |
	verbs.SendOpsSendWithImm | verbs.SendOpsRDMARead | verbs.SendOpsAtomicCmpAndSwp |
	verbs.SendOpsAtomicFetchAdd | verbs.SendOpsLocalInv | verbs.SendOpsBindMW |
	verbs.SendOpsSendWithInv | verbs.SendOpsFlush | verbs.SendOpsAtomicWrite

// wrEnv is a connected RC pair whose requester a has the extended
// interface x, with a tap counting the packets a sends.
type wrEnv struct {
	f    *fabric.Fabric
	a, b *aEnd
	x    *verbs.QPEx
	sent atomic.Int64 // packets from a seen by the fabric
}

func newWrEnv(t *testing.T, ca apiCfg) *wrEnv {
	t.Helper()
	e := &wrEnv{f: fabric.New(fabric.Config{})}
	t.Cleanup(func() { e.f.Close() })
	if ca.ops == 0 {
		ca.ops = wrAllRC
	}
	e.a, e.b = apiPair(t, e.f, ca, apiCfg{typ: ca.typ})
	e.f.Tap(func(p fabric.Packet) {
		if p.Src == apiAddrA {
			e.sent.Add(1)
		}
	})
	var err error
	e.x, err = e.a.qp.Ex()
	must(t, err)
	return e
}

// postRecvs posts n receives of 1 KiB each on b, WRIDs 1000.. .
func (e *wrEnv) postRecvs(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		must2(t)(e.b.qp.PostRecv(ibv.RecvWR{WRID: uint64(1000 + i), SGList: []ibv.SGE{e.b.mr.SGE(i*1024, 1024)}}))
	}
}

// nothingPosted checks that since the batch the fabric saw no packet from
// a and neither side has a completion.
func (e *wrEnv) nothingPosted(t *testing.T, what string) {
	t.Helper()
	synctest.Wait()
	time.Sleep(time.Second) // any retransmission timer would fire by now
	if n := e.sent.Load(); n != 0 {
		t.Errorf("%s: %d packets sent, want none", what, n)
	}
	var wc [4]ibv.WorkCompletion
	for _, c := range []*verbs.CQ{e.a.scq, e.b.rcq} {
		if n := c.Poll(wc[:]); n != 0 {
			t.Errorf("%s: completions %+v, want none", what, wc[:n])
		}
	}
}

// TestWrBuildersPostAll: one batch with every builder the engine
// implements posts them all, in order, each with the WRID and flags it
// was built with.
func TestWrBuildersPostAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{})
		a, b, x := e.a, e.b, e.x
		e.postRecvs(t, 3)
		for i := range 64 {
			a.buf[i] = byte(i + 1)
		}
		copy(b.buf[8192:], "remote data for the READ")
		binary.NativeEndian.PutUint64(b.buf[16384:], 40)
		binary.NativeEndian.PutUint64(b.buf[16392:], 7)

		sig := ibv.SendSignaled
		x.WrStart()
		x.WRID, x.WRFlags = 1, sig
		x.WrSend()
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 10)
		x.WRID = 2
		x.WrSendImm(0x11223344)
		x.WrSetInlineData([]byte("imm"))
		x.WRID, x.WRFlags = 3, 0 // unsignaled: no completion
		x.WrRDMAWrite(b.mr.RKey(), b.mr.Addr()+4096)
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr(), 64)
		x.WRID, x.WRFlags = 4, sig
		x.WrRDMAWriteImm(b.mr.RKey(), b.mr.Addr()+5000, 0xcafe)
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr()+1, 5)
		x.WRID = 5
		x.WrRDMARead(b.mr.RKey(), b.mr.Addr()+8192)
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr()+1024, 24)
		x.WRID = 6
		x.WrAtomicFetchAdd(b.mr.RKey(), b.mr.Addr()+16384, 2)
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr()+2048, 8)
		x.WRID = 7
		x.WrAtomicCmpSwp(b.mr.RKey(), b.mr.Addr()+16392, 7, 99)
		x.WrSetSGE(a.mr.LKey(), a.mr.Addr()+2056, 8)
		x.WRID, x.WRFlags = 99, 0 // after the last builder: changes nothing
		must(t, x.WrComplete())

		want := []struct {
			id  uint64
			op  ibv.WCOpcode
			len uint32
		}{
			{1, ibv.WCSend, 10}, {2, ibv.WCSend, 3}, {4, ibv.WCRDMAWrite, 5},
			{5, ibv.WCRDMARead, 24}, {6, ibv.WCFetchAdd, 8}, {7, ibv.WCCompSwap, 8},
		}
		got := waitWC(t, a.scq, len(want))
		for i, w := range got {
			if w.WRID != want[i].id || w.Opcode != want[i].op || w.Status != ibv.WCSuccess || w.ByteLen != want[i].len {
				t.Errorf("send completion %d: %+v, want WRID %d opcode %d success %d bytes", i, w, want[i].id, want[i].op, want[i].len)
			}
		}
		rw := waitWC(t, b.rcq, 3)
		wantR := []ibv.WorkCompletion{
			{WRID: 1000, Opcode: ibv.WCRecv, ByteLen: 10},
			{WRID: 1001, Opcode: ibv.WCRecv, ByteLen: 3, Imm: 0x11223344, Flags: ibv.WCWithImm},
			{WRID: 1002, Opcode: ibv.WCRecvRDMAWithImm, ByteLen: 5, Imm: 0xcafe, Flags: ibv.WCWithImm},
		}
		for i, w := range rw {
			if w.WRID != wantR[i].WRID || w.Opcode != wantR[i].Opcode || w.ByteLen != wantR[i].ByteLen ||
				w.Imm != wantR[i].Imm || w.Flags&ibv.WCWithImm != wantR[i].Flags || w.Status != ibv.WCSuccess {
				t.Errorf("receive completion %d: %+v, want %+v", i, w, wantR[i])
			}
		}
		synctest.Wait()
		var more [4]ibv.WorkCompletion
		if n := a.scq.Poll(more[:]); n != 0 {
			t.Errorf("extra send completions %+v (WRID 3 is unsignaled)", more[:n])
		}
		for _, c := range []struct {
			name      string
			got, want []byte
		}{
			{"SEND", b.buf[:10], a.buf[:10]},
			{"SEND_IMM inline", b.buf[1024:1027], []byte("imm")},
			{"RDMA WRITE", b.buf[4096 : 4096+64], a.buf[:64]},
			{"RDMA WRITE_IMM", b.buf[5000:5005], a.buf[1:6]},
			{"RDMA READ", a.buf[1024 : 1024+24], []byte("remote data for the READ")},
		} {
			if !bytes.Equal(c.got, c.want) {
				t.Errorf("%s: got % x, want % x", c.name, c.got, c.want)
			}
		}
		if got, rem := binary.NativeEndian.Uint64(a.buf[2048:]), binary.NativeEndian.Uint64(b.buf[16384:]); got != 40 || rem != 42 {
			t.Errorf("FETCH_ADD returned %d and left %d, want 40 and 42", got, rem)
		}
		if got, rem := binary.NativeEndian.Uint64(a.buf[2056:]), binary.NativeEndian.Uint64(b.buf[16392:]); got != 7 || rem != 99 {
			t.Errorf("CMP_SWP returned %d and left %d, want 7 and 99", got, rem)
		}
	})
}

// TestWrAbort: WrAbort posts nothing; the QP takes the next batch and
// PostSend as usual.
func TestWrAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{})
		e.postRecvs(t, 2)
		x := e.x
		x.WrStart()
		x.WRID, x.WRFlags = 1, ibv.SendSignaled
		x.WrSend()
		x.WrSetInlineData([]byte("dropped"))
		x.WrRDMAWrite(e.b.mr.RKey(), e.b.mr.Addr())
		x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
		x.WrAbort()
		e.nothingPosted(t, "WrAbort")
		x.WrAbort() // without WrStart: nothing happens

		x.WrStart()
		x.WRID = 2
		x.WrSend()
		x.WrSetInlineData([]byte("kept"))
		must(t, x.WrComplete())
		must2(t)(e.a.qp.PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{e.a.mr.SGE(0, 1)}}))
		if w := waitWC(t, e.b.rcq, 1)[0]; w.ByteLen != 4 || string(e.b.buf[:4]) != "kept" {
			t.Errorf("receive after WrAbort: %+v %q, want the 4 bytes \"kept\"", w, e.b.buf[:4])
		}
		if w := waitWC(t, e.a.scq, 2); w[0].WRID != 2 || w[1].WRID != 3 {
			t.Errorf("send completions %+v, want WRIDs 2 and 3", w)
		}
		apiWantErr(t, "WrComplete without WrStart", x.WrComplete(), "ibv_wr_start", verbs.EINVAL)
	})
}

// TestWrErrorPostsNothing: an error in any builder or setter of a batch,
// or a WR the transport refuses, fails WrComplete and posts none of the
// batch's WRs, however many good ones come before it; the QP takes the
// next batch.
func TestWrErrorPostsNothing(t *testing.T) {
	type tc struct {
		name  string
		ops   verbs.SendOpsFlags // 0: all RC builders
		build func(e *wrEnv)
		text  string
		want  []error
	}
	sges := func(e *wrEnv, n int) []ibv.SGE {
		s := make([]ibv.SGE, n)
		for i := range s {
			s[i] = e.a.mr.SGE(i*8, 8)
		}
		return s
	}
	tcs := []tc{
		{"too many SGEs", 0, func(e *wrEnv) {
			e.x.WrRDMAWrite(e.b.mr.RKey(), e.b.mr.Addr())
			e.x.WrSetSGEList(sges(e, 5))
		}, "max_send_sge", []error{verbs.ENOSPC, verbs.EINVAL}},
		{"inline too long", 0, func(e *wrEnv) {
			e.x.WrSend()
			e.x.WrSetInlineData(make([]byte, 65))
		}, "max_inline_data", []error{verbs.ENOSPC, verbs.EINVAL}},
		{"inline list too long", 0, func(e *wrEnv) {
			e.x.WrSend()
			e.x.WrSetInlineDataList([][]byte{make([]byte, 40), make([]byte, 25)})
		}, "max_inline_data", []error{verbs.ENOSPC}},
		{"builder not enabled", verbs.SendOpsSend, func(e *wrEnv) {
			e.x.WrRDMAWrite(e.b.mr.RKey(), e.b.mr.Addr())
			e.x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
		}, "RDMA_WRITE not in the QP's send_ops_flags", []error{verbs.EOPNOTSUPP}},
		{"READ not enabled", verbs.SendOpsSend, func(e *wrEnv) {
			e.x.WrRDMARead(e.b.mr.RKey(), e.b.mr.Addr())
		}, "send_ops_flags", []error{verbs.EOPNOTSUPP}},
		{"atomic unaligned", 0, func(e *wrEnv) {
			e.x.WrSend()
			e.x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
			e.x.WrAtomicFetchAdd(e.b.mr.RKey(), e.b.mr.Addr()+4, 1) // unaligned: the transport refuses it
			e.x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
		}, "aligned", []error{verbs.EINVAL}},
		{"atomic local buffer too short", 0, func(e *wrEnv) {
			e.x.WrAtomicCmpSwp(e.b.mr.RKey(), e.b.mr.Addr(), 1, 2)
			e.x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 4)
		}, "8-byte", []error{verbs.EINVAL}},
		{"inline READ", 0, func(e *wrEnv) {
			e.x.WrRDMARead(e.b.mr.RKey(), e.b.mr.Addr())
			e.x.WrSetInlineData([]byte("12345678"))
		}, "INLINE", []error{verbs.EINVAL}},
		{"FLUSH of placement type 0", 0, func(e *wrEnv) { e.x.WrFlush(e.b.mr.RKey(), e.b.mr.Addr(), 64, 0, 0) }, "placement type", []error{verbs.EINVAL}},
		{"ATOMIC_WRITE unaligned", 0, func(e *wrEnv) {
			e.x.WrAtomicWrite(e.b.mr.RKey(), e.b.mr.Addr()+4, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
		}, "aligned", []error{verbs.EINVAL}},
		{"ATOMIC_WRITE not enabled", verbs.SendOpsSend, func(e *wrEnv) {
			e.x.WrAtomicWrite(e.b.mr.RKey(), e.b.mr.Addr(), [8]byte{})
		}, "send_ops_flags", []error{verbs.EOPNOTSUPP}},
	}
	for _, c := range tcs {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ops := c.ops
				if ops == 0 {
					ops = wrAllRC
				}
				e := newWrEnv(t, apiCfg{ops: ops})
				e.postRecvs(t, 4)
				x := e.x
				x.WrStart()
				x.WRID, x.WRFlags = 1, ibv.SendSignaled
				x.WrSend() // a good WR before the bad one
				x.WrSetInlineData([]byte("good"))
				x.WRID = 2
				c.build(e)
				x.WRID = 3
				x.WrSend() // and one after it
				x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
				apiWantErr(t, "WrComplete", x.WrComplete(), c.text, c.want...)
				e.nothingPosted(t, c.name)

				// The failed batch released the QP.
				x.WrStart()
				x.WRID, x.WRFlags = 4, ibv.SendSignaled
				x.WrSend()
				x.WrSetInlineData([]byte("next"))
				must(t, x.WrComplete())
				if w := waitWC(t, e.a.scq, 1)[0]; w.WRID != 4 || w.Status != ibv.WCSuccess {
					t.Errorf("batch after the failed one: %+v, want WRID 4 success", w)
				}
				if w := waitWC(t, e.b.rcq, 1)[0]; w.WRID != 1000 || string(e.b.buf[:4]) != "next" {
					t.Errorf("receive after the failed batch: %+v %q, want WRID 1000 \"next\"", w, e.b.buf[:4])
				}
			})
		})
	}
}

// TestWrSetterFirst: a setter before any builder fails the batch.
func TestWrSetterFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{})
		e.postRecvs(t, 1)
		e.x.WrStart()
		e.x.WrSetInlineData([]byte("orphan"))
		e.x.WrSend()
		e.x.WrSetInlineData([]byte("x"))
		apiWantErr(t, "WrComplete", e.x.WrComplete(), "before a builder", verbs.EINVAL)
		e.nothingPosted(t, "setter before a builder")
	})
}

// TestWrFullQueue: a batch the send queue cannot hold entirely is refused
// at WrComplete with ENOSPC (also ENOMEM) and none of it is posted; one
// that fits is posted.
func TestWrFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		x := e.x
		batch := func(n int) error {
			x.WrStart()
			for i := range n {
				x.WRID, x.WRFlags = uint64(i+1), ibv.SendSignaled
				x.WrRDMAWrite(e.b.mr.RKey(), e.b.mr.Addr()+uint64(i*8))
				x.WrSetSGE(e.a.mr.LKey(), e.a.mr.Addr(), 8)
			}
			return x.WrComplete()
		}
		apiWantErr(t, "WrComplete of 5 WRs into a queue of 4", batch(5), "", verbs.ENOSPC, verbs.ENOMEM)
		e.nothingPosted(t, "full queue")
		must(t, batch(4))
		if w := waitWC(t, e.a.scq, 4); w[3].WRID != 4 {
			t.Errorf("completions %+v, want WRIDs 1..4", w)
		}

		// With 3 of 4 slots taken (nothing is acknowledged: a's packets
		// are dropped), a batch of 2 does not fit.
		e.f.AddFilter(fabric.DropIf(fabric.From(apiAddrA)))
		must(t, batch(3))
		synctest.Wait()
		sent := e.sent.Load()
		apiWantErr(t, "WrComplete of 2 WRs with room for 1", batch(2), "room for 1", verbs.ENOSPC)
		synctest.Wait()
		if n := e.sent.Load(); n != sent {
			t.Errorf("refused batch sent %d packets", n-sent)
		}
		must(t, batch(1))
	})
}

// TestWrInlineCopiedAtSetter: inline data is copied when the setter runs
// (ibv_wr_set_inline_data); changing the caller's buffer afterwards does
// not change what is sent. A list is sent concatenated.
func TestWrInlineCopiedAtSetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{})
		e.postRecvs(t, 3)
		x := e.x
		one := []byte("hello")
		l1, l2, l3 := []byte("ab"), []byte{}, []byte("cdefg")
		sge := []ibv.SGE{e.a.mr.SGE(0, 3)}
		copy(e.a.buf, "xyz")
		x.WrStart()
		x.WRFlags = ibv.SendSignaled
		x.WrSend()
		x.WrSetInlineData(one)
		x.WrSend()
		x.WrSetInlineDataList([][]byte{l1, l2, l3})
		x.WrSend()
		x.WrSetSGEList(sge)
		copy(one, "HELLO")
		copy(l1, "AB")
		copy(l3, "CDEFG")
		sge[0].Length = 1000 // the SGE list was copied too
		must(t, x.WrComplete())
		got := waitWC(t, e.b.rcq, 3)
		for i, want := range []string{"hello", "abcdefg", "xyz"} {
			if int(got[i].ByteLen) != len(want) || string(e.b.buf[i*1024:i*1024+len(want)]) != want {
				t.Errorf("message %d: %d bytes %q, want %q", i, got[i].ByteLen, e.b.buf[i*1024:i*1024+len(want)], want)
			}
		}
	})
}

// TestWrSGEListSums: the message length is the sum of every SGE's length,
// each SGE taken from its own place (rxe's wr_set_sge_list once summed
// the first element's length num_sge times).
func TestWrSGEListSums(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newWrEnv(t, apiCfg{})
		e.postRecvs(t, 1)
		a, b, x := e.a, e.b, e.x
		for i := range a.buf[:4096] {
			a.buf[i] = byte(i * 7)
		}
		list := []ibv.SGE{a.mr.SGE(10, 10), a.mr.SGE(1000, 300), a.mr.SGE(3000, 7), a.mr.SGE(50, 1)}
		var want []byte
		for _, s := range list {
			off := int(s.Addr - a.mr.Addr())
			want = append(want, a.buf[off:off+int(s.Length)]...)
		}
		x.WrStart()
		x.WRID, x.WRFlags = 1, ibv.SendSignaled
		x.WrSend()
		x.WrSetSGEList(list)
		x.WRID = 2
		x.WrRDMAWrite(b.mr.RKey(), b.mr.Addr()+8192)
		x.WrSetSGEList(list)
		must(t, x.WrComplete())
		sw := waitWC(t, a.scq, 2)
		rw := waitWC(t, b.rcq, 1)
		if rw[0].ByteLen != uint32(len(want)) || !bytes.Equal(b.buf[:len(want)], want) {
			t.Errorf("SEND of SGEs 10+300+7+1: received %d bytes, want %d (%s)", rw[0].ByteLen, len(want),
				firstDiff(b.buf[:len(want)], want))
		}
		if !bytes.Equal(b.buf[8192:8192+len(want)], want) {
			t.Errorf("WRITE of SGEs 10+300+7+1: %s", firstDiff(b.buf[8192:8192+len(want)], want))
		}
		for i, w := range sw {
			if w.ByteLen != uint32(len(want)) {
				t.Errorf("send completion %d: byte_len %d, want %d", i, w.ByteLen, len(want))
			}
		}
	})
}

func firstDiff(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d: got %#x, want %#x", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d bytes, want %d", len(got), len(want))
	}
	return "equal"
}

// TestWrEx: Ex on a QP created without SendOpsFlags is EOPNOTSUPP; a UC
// QP takes the builders UC supports.
func TestWrEx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := apiPair(t, f, apiCfg{typ: ibv.QPTypeUC, ops: verbs.SendOpsSend | verbs.SendOpsRDMAWriteWithImm},
			apiCfg{typ: ibv.QPTypeUC})
		_, err := b.qp.Ex()
		apiWantErr(t, "Ex of a QP without send_ops_flags", err, "send_ops_flags", verbs.EOPNOTSUPP)
		x, err := a.qp.Ex()
		must(t, err)
		if x2, _ := a.qp.Ex(); x2 != x {
			t.Errorf("Ex returned a different QPEx the second time")
		}
		for i := range 2 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(i*64, 64)}}))
		}
		x.WrStart()
		x.WRFlags = ibv.SendSignaled
		x.WrSend()
		x.WrSetInlineData([]byte("uc"))
		x.WrRDMAWriteImm(b.mr.RKey(), b.mr.Addr()+4096, 5)
		x.WrSetInlineData([]byte("w"))
		must(t, x.WrComplete())
		waitWC(t, a.scq, 2)
		got := waitWC(t, b.rcq, 2)
		if string(b.buf[:2]) != "uc" || b.buf[4096] != 'w' || got[1].Imm != 5 {
			t.Errorf("UC batch: got %q, %q and %+v", b.buf[:2], b.buf[4096:4097], got[1])
		}
	})
}
