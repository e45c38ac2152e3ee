package verbs_test

// The opcode × QP-type table of ibv_post_send(3) and ibv_wr_post(3): every
// send work-request opcode on RC, UC and UD QPs, posted with PostSend and
// with the QPEx builders. Where the table marks the pair, the operation
// runs end to end on the fabric and its data is checked; where it does
// not, the post is refused (EINVAL, or EOPNOTSUPP for a builder the QP
// type cannot enable) and nothing is sent. softnic departs from the man
// pages' tables in one cell, as rxe does: SEND_WITH_INV on UC (IBTA
// defines no UC opcode for it) is refused. TSO on UD is refused here
// because the table's QPs have no max_tso_header; tso_test.go sends it.
// Inline data is tested at the end.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// opEnv is one cell's connection: a sends, b receives or is the target.
type opEnv struct {
	a, b    *mside
	typ     ibv.QPType
	builder bool // post with the QPEx builders
	ah      *verbs.AH
	mw      *verbs.MW // the window a BIND_MW builder binds
}

// ud fills in w's UD destination on a UD connection.
func (e *opEnv) ud(w ibv.SendWR) ibv.SendWR {
	if e.typ == ibv.QPTypeUD {
		w.AH, w.RemoteQPN, w.RemoteQKey = e.ah, e.b.qp.QPN(), 0x1111
	}
	return w
}

// submit posts w on a's QP, with PostSend or with the builder of its
// opcode (whose arguments come from w's fields).
func (e *opEnv) submit(w ibv.SendWR) error {
	w = e.ud(w)
	if !e.builder {
		n, err := e.a.qp.PostSend(w)
		if err == nil && n != 1 {
			return fmt.Errorf("posted %d", n)
		}
		return err
	}
	x, err := e.a.qp.Ex()
	if err != nil {
		return err
	}
	x.WrStart()
	x.WRID, x.WRFlags = w.WRID, w.Flags
	switch w.Opcode {
	case ibv.WRSend:
		x.WrSend()
	case ibv.WRSendWithImm:
		x.WrSendImm(w.Imm)
	case ibv.WRSendWithInv:
		x.WrSendInv(w.InvRKey)
	case ibv.WRRDMAWrite:
		x.WrRDMAWrite(w.RKey, w.RemoteAddr)
	case ibv.WRRDMAWriteWithImm:
		x.WrRDMAWriteImm(w.RKey, w.RemoteAddr, w.Imm)
	case ibv.WRRDMARead:
		x.WrRDMARead(w.RKey, w.RemoteAddr)
	case ibv.WRAtomicCmpAndSwp:
		x.WrAtomicCmpSwp(w.RKey, w.RemoteAddr, w.CompareAdd, w.Swap)
	case ibv.WRAtomicFetchAndAdd:
		x.WrAtomicFetchAdd(w.RKey, w.RemoteAddr, w.CompareAdd)
	case ibv.WRLocalInv:
		x.WrLocalInv(w.InvRKey)
	case ibv.WRBindMW:
		b := w.Bind
		x.WrBindMW(e.mw, b.NewRKey, verbs.MWBindInfo{MR: e.a.mr, Addr: b.Addr, Length: b.Length, Access: b.Access})
	case ibv.WRFlush:
		x.WrFlush(w.RKey, w.RemoteAddr, w.FlushLen, w.FlushType, w.FlushLevel)
	case ibv.WRAtomicWrite:
		var v [8]byte
		copy(v[:], w.InlineData)
		x.WrAtomicWrite(w.RKey, w.RemoteAddr, v)
	default:
		x.WrAbort()
		return fmt.Errorf("no builder for %v", w.Opcode)
	}
	if w.Opcode != ibv.WRAtomicWrite {
		switch {
		case w.Flags&ibv.SendInline != 0:
			x.WrSetInlineData(w.InlineData)
		case len(w.SGList) > 0:
			x.WrSetSGEList(w.SGList)
		}
	}
	if e.typ == ibv.QPTypeUD {
		x.WrSetUDAddr(w.AH, w.RemoteQPN, w.RemoteQKey)
	}
	return x.WrComplete()
}

func (e *opEnv) must(t *testing.T, w ibv.SendWR) {
	t.Helper()
	if err := e.submit(w); err != nil {
		t.Fatalf("post %v: %v", w.Opcode, err)
	}
}

// recvAt returns where b's receive buffer (posted at off) holds the
// message: UD puts a 40-byte GRH first.
func (e *opEnv) recvAt(off int) int {
	if e.typ == ibv.QPTypeUD {
		return off + 40
	}
	return off
}

// waitPlaced gives a UC WRITE, which completes at send time, time to land.
func (e *opEnv) waitPlaced() { settle(time.Millisecond) }

// opCell is one opcode of the table.
type opCell struct {
	name       string
	op         ibv.WROpcode
	rc, uc, ud bool // the table's X marks, as softnic implements them
	builder    verbs.SendOpsFlags
	run        func(t *testing.T, e *opEnv)
}

var sig = ibv.SendSignaled

func opCells() []opCell {
	rw := ibv.AccessRemoteWrite | ibv.AccessRemoteRead
	return []opCell{
		{"SEND", ibv.WRSend, true, true, true, verbs.SendOpsSend, func(t *testing.T, e *opEnv) {
			postRecvMS(t, e.b, 1, 0, 256)
			fill(e.a.buf[:100], 1)
			e.must(t, ibv.SendWR{WRID: 10, Opcode: ibv.WRSend, Flags: sig, SGList: []ibv.SGE{e.a.mr.SGE(0, 100)}})
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCSend)
			wc := mone(t, e.b, 1, ibv.WCSuccess, ibv.WCRecv)
			checkBytes(t, "SEND", e.b.buf[e.recvAt(0):e.recvAt(0)+100], e.a.buf[:100])
			if int(wc.ByteLen) != e.recvAt(100) {
				t.Errorf("byte_len %d", wc.ByteLen)
			}
		}},
		{"SEND_WITH_IMM", ibv.WRSendWithImm, true, true, true, verbs.SendOpsSendWithImm, func(t *testing.T, e *opEnv) {
			postRecvMS(t, e.b, 1, 0, 256)
			fill(e.a.buf[:10], 2)
			e.must(t, ibv.SendWR{WRID: 10, Opcode: ibv.WRSendWithImm, Flags: sig, Imm: 0xabcd, SGList: []ibv.SGE{e.a.mr.SGE(0, 10)}})
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCSend)
			wc := mone(t, e.b, 1, ibv.WCSuccess, ibv.WCRecv)
			checkBytes(t, "SEND_WITH_IMM", e.b.buf[e.recvAt(0):e.recvAt(0)+10], e.a.buf[:10])
			if wc.Flags&ibv.WCWithImm == 0 || wc.Imm != 0xabcd {
				t.Errorf("receive %+v, want immediate 0xabcd", wc)
			}
		}},
		{"RDMA_WRITE", ibv.WRRDMAWrite, true, true, false, verbs.SendOpsRDMAWrite, func(t *testing.T, e *opEnv) {
			fill(e.a.buf[:100], 3)
			e.must(t, mwrite(e.a, 10, 0, 100, e.b.mr.RKey(), e.b.mr.Addr()+1000))
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCRDMAWrite)
			e.waitPlaced()
			checkBytes(t, "RDMA_WRITE", e.b.buf[1000:1100], e.a.buf[:100])
		}},
		{"RDMA_WRITE_WITH_IMM", ibv.WRRDMAWriteWithImm, true, true, false, verbs.SendOpsRDMAWriteWithImm, func(t *testing.T, e *opEnv) {
			postRecvMS(t, e.b, 1, 0, 8)
			fill(e.a.buf[:100], 4)
			w := mwrite(e.a, 10, 0, 100, e.b.mr.RKey(), e.b.mr.Addr()+1000)
			w.Opcode, w.Imm = ibv.WRRDMAWriteWithImm, 77
			e.must(t, w)
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCRDMAWrite)
			wc := mone(t, e.b, 1, ibv.WCSuccess, ibv.WCRecvRDMAWithImm)
			checkBytes(t, "RDMA_WRITE_WITH_IMM", e.b.buf[1000:1100], e.a.buf[:100])
			if wc.Imm != 77 || wc.ByteLen != 100 {
				t.Errorf("receive %+v, want immediate 77 and 100 bytes", wc)
			}
		}},
		{"RDMA_READ", ibv.WRRDMARead, true, false, false, verbs.SendOpsRDMARead, func(t *testing.T, e *opEnv) {
			fill(e.b.buf[2000:2100], 5)
			e.must(t, mread(e.a, 10, 3000, 100, e.b.mr.RKey(), e.b.mr.Addr()+2000))
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCRDMARead)
			checkBytes(t, "RDMA_READ", e.a.buf[3000:3100], e.b.buf[2000:2100])
		}},
		{"ATOMIC_CMP_AND_SWP", ibv.WRAtomicCmpAndSwp, true, false, false, verbs.SendOpsAtomicCmpAndSwp, func(t *testing.T, e *opEnv) {
			binary.NativeEndian.PutUint64(e.b.buf[4096:], 5)
			w := mread(e.a, 10, 0, 8, e.b.mr.RKey(), e.b.mr.Addr()+4096)
			w.Opcode, w.CompareAdd, w.Swap = ibv.WRAtomicCmpAndSwp, 5, 9
			e.must(t, w)
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCCompSwap)
			if o, n := binary.NativeEndian.Uint64(e.a.buf), binary.NativeEndian.Uint64(e.b.buf[4096:]); o != 5 || n != 9 {
				t.Errorf("CMP_AND_SWP returned %d and left %d, want 5 and 9", o, n)
			}
		}},
		{"ATOMIC_FETCH_AND_ADD", ibv.WRAtomicFetchAndAdd, true, false, false, verbs.SendOpsAtomicFetchAdd, func(t *testing.T, e *opEnv) {
			binary.NativeEndian.PutUint64(e.b.buf[4096:], 5)
			w := mread(e.a, 10, 0, 8, e.b.mr.RKey(), e.b.mr.Addr()+4096)
			w.Opcode, w.CompareAdd = ibv.WRAtomicFetchAndAdd, 3
			e.must(t, w)
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCFetchAdd)
			if o, n := binary.NativeEndian.Uint64(e.a.buf), binary.NativeEndian.Uint64(e.b.buf[4096:]); o != 5 || n != 8 {
				t.Errorf("FETCH_AND_ADD returned %d and left %d, want 5 and 8", o, n)
			}
		}},
		{"LOCAL_INV", ibv.WRLocalInv, true, true, false, verbs.SendOpsLocalInv, func(t *testing.T, e *opEnv) {
			// A type-2 window over a's MR, bound on a's QP: b WRITEs
			// through it, a invalidates it, b's next WRITE places nothing.
			mw := mallocMW(t, e.a, verbs.MWType2)
			rkey := mbind2(t, e.a, e.a.qp, mw, e.a.mr, 8192, 256, rw)
			fill(e.b.buf[:64], 6)
			mpost(t, e.b.qp, mwrite(e.b, 11, 0, 64, rkey, e.a.mr.Addr()+8192))
			mone(t, e.b, 11, ibv.WCSuccess, ibv.WCRDMAWrite)
			e.waitPlaced()
			checkBytes(t, "WRITE through the window", e.a.buf[8192:8256], e.b.buf[:64])
			e.must(t, ibv.SendWR{WRID: 10, Opcode: ibv.WRLocalInv, Flags: sig, InvRKey: rkey})
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCLocalInv)
			fill(e.b.buf[:64], 7)
			mpost(t, e.b.qp, mwrite(e.b, 12, 0, 64, rkey, e.a.mr.Addr()+8192))
			want := ibv.WCRemAccessErr
			if e.typ == ibv.QPTypeUC {
				want = ibv.WCSuccess // UC: dropped at the responder, unknown to the requester
			}
			mone(t, e.b, 12, want, ibv.WCRDMAWrite)
			e.waitPlaced()
			if e.a.buf[8192] == e.b.buf[0] {
				t.Errorf("WRITE after LOCAL_INV placed data")
			}
		}},
		{"BIND_MW", ibv.WRBindMW, true, true, false, verbs.SendOpsBindMW, func(t *testing.T, e *opEnv) {
			e.mw = mallocMW(t, e.a, verbs.MWType2)
			rkey := verbs.IncKey(e.mw.RKey())
			e.must(t, verbs.BindMWWR(10, sig, e.mw, rkey, verbs.MWBindInfo{MR: e.a.mr, Addr: e.a.mr.Addr() + 8192, Length: 256, Access: rw}))
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCBindMW)
			if e.mw.RKey() != rkey {
				t.Errorf("MW.RKey %#x after the bind, want %#x", e.mw.RKey(), rkey)
			}
			fill(e.b.buf[:64], 8)
			mpost(t, e.b.qp, mwrite(e.b, 11, 0, 64, rkey, e.a.mr.Addr()+8192+64))
			mone(t, e.b, 11, ibv.WCSuccess, ibv.WCRDMAWrite)
			e.waitPlaced()
			checkBytes(t, "WRITE through the new window", e.a.buf[8192+64:8192+128], e.b.buf[:64])
		}},
		{"SEND_WITH_INV", ibv.WRSendWithInv, true, false, false, verbs.SendOpsSendWithInv, func(t *testing.T, e *opEnv) {
			mw := mallocMW(t, e.b, verbs.MWType2)
			rkey := mbind2(t, e.b, e.b.qp, mw, e.b.mr, 8192, 256, rw)
			postRecvMS(t, e.b, 1, 0, 64)
			copy(e.a.buf, "with invalidate")
			e.must(t, ibv.SendWR{WRID: 10, Opcode: ibv.WRSendWithInv, Flags: sig, InvRKey: rkey, SGList: []ibv.SGE{e.a.mr.SGE(0, 15)}})
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCSend)
			wc := mone(t, e.b, 1, ibv.WCSuccess, ibv.WCRecv)
			if wc.Flags&ibv.WCWithInv == 0 || wc.Imm != rkey || string(e.b.buf[:15]) != "with invalidate" {
				t.Errorf("receive %+v %q, want IBV_WC_WITH_INV of %#x", wc, e.b.buf[:15], rkey)
			}
			mrefusedWrite(t, e.a, e.b, rkey, e.b.mr.Addr()+8192, ibv.WCRemAccessErr)
		}},
		{"FLUSH", ibv.WRFlush, true, false, false, verbs.SendOpsFlush, func(t *testing.T, e *opEnv) {
			fill(e.a.buf[:64], 9)
			e.must(t, mwrite(e.a, 9, 0, 64, e.b.mr.RKey(), e.b.mr.Addr()))
			e.must(t, mflush(10, e.b.mr.RKey(), e.b.mr.Addr(), 64, verbs.FlushGlobal, verbs.FlushRange))
			got := waitWC(t, e.a.cq, 2)
			wantWC(t, got[0], 9, ibv.WCSuccess, ibv.WCRDMAWrite)
			wantWC(t, got[1], 10, ibv.WCSuccess, ibv.WCFlush)
			checkBytes(t, "flushed WRITE", e.b.buf[:64], e.a.buf[:64])
		}},
		{"ATOMIC_WRITE", ibv.WRAtomicWrite, true, false, false, verbs.SendOpsAtomicWrite, func(t *testing.T, e *opEnv) {
			v := []byte("8 bytes!")
			e.must(t, matomicWrite(10, e.b.mr.RKey(), e.b.mr.Addr()+4096, v))
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCAtomicWrite)
			checkBytes(t, "ATOMIC_WRITE", e.b.buf[4096:4104], v)
		}},
		{"REG_MR", ibv.WRRegMR, true, true, false, 0, func(t *testing.T, e *opEnv) {
			mr, err := e.a.pd.AllocMR(verbs.MRTypeMemReg, 2)
			must(t, err)
			chunks := pages(2, 4096, 0)
			_, err = mr.MapSG(chunks, 4096)
			must(t, err)
			must(t, mr.UpdateFastRegKey(verbs.IncKey(mr.RKey())))
			e.must(t, mr.RegWR(10, sig, fastAccess))
			mone(t, e.a, 10, ibv.WCSuccess, ibv.WCRegMR)
			fill(e.b.buf[:64], 10)
			mpost(t, e.b.qp, mwrite(e.b, 11, 0, 64, mr.RKey(), mr.Addr()+4064))
			mone(t, e.b, 11, ibv.WCSuccess, ibv.WCRDMAWrite)
			e.waitPlaced()
			checkBytes(t, "WRITE into the registered MR", concat(chunks)[4064:4128], e.b.buf[:64])
		}},
		{"TSO", ibv.WROpcode(10), false, false, false, verbs.SendOpsTSO, nil},
		{"DRIVER1", ibv.WROpcode(11), false, false, false, 0, nil},
	}
}

// opWR is a plausible WR of op for the refusal checks.
func opWR(e *opEnv, op ibv.WROpcode) ibv.SendWR {
	w := ibv.SendWR{WRID: 20, Opcode: op, Flags: sig, SGList: []ibv.SGE{e.a.mr.SGE(0, 8)},
		RKey: e.b.mr.RKey(), RemoteAddr: e.b.mr.Addr(), InvRKey: e.b.mr.RKey(), FlushType: verbs.FlushGlobal, FlushLen: 8}
	switch op {
	case ibv.WRBindMW:
		w = verbs.BindMWWR(20, sig, e.mw, verbs.IncKey(e.mw.RKey()), verbs.MWBindInfo{MR: e.a.mr, Addr: e.a.mr.Addr(), Length: 64, Access: ibv.AccessRemoteRead})
	case ibv.WRAtomicWrite:
		w.SGList, w.Flags, w.InlineData = nil, sig|ibv.SendInline, make([]byte, 8)
	case ibv.WRFlush, ibv.WRLocalInv:
		w.SGList = nil
	}
	return w
}

// sendOps is what the QP types may enable at creation (the rxe provider's
// sets, with LOCAL_INV added on UC as mlx5 and the man page table have,
// SEND_WITH_INV taken off UC, which has no such opcode, and TSO on UD,
// which rxe has not).
var sendOps = map[ibv.QPType]verbs.SendOpsFlags{
	ibv.QPTypeRC: wrAllRC,
	ibv.QPTypeUC: verbs.SendOpsRDMAWrite | verbs.SendOpsRDMAWriteWithImm | verbs.SendOpsSend | verbs.SendOpsSendWithImm |
		verbs.SendOpsLocalInv | verbs.SendOpsBindMW,
	ibv.QPTypeUD: verbs.SendOpsSend | verbs.SendOpsSendWithImm | verbs.SendOpsTSO,
}

// TestOpcodeTable runs every cell of the table with PostSend
// (ibv_post_send) and with the builders (ibv_wr_post).
func TestOpcodeTable(t *testing.T) {
	types := []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD}
	for _, builder := range []bool{false, true} {
		mode := "post_send"
		if builder {
			mode = "wr_post"
		}
		for _, c := range opCells() {
			for _, typ := range types {
				ok := map[ibv.QPType]bool{ibv.QPTypeRC: c.rc, ibv.QPTypeUC: c.uc, ibv.QPTypeUD: c.ud}[typ]
				if builder && (c.op == ibv.WRRegMR || c.op == ibv.WROpcode(10) || c.op == ibv.WROpcode(11)) {
					continue // no ibv_wr_* builder (kernel-only, TSO, driver opcode); TestOpcodeBuilderFlags covers TSO
				}
				t.Run(fmt.Sprintf("%s/%s/%v", mode, c.name, typ), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						f := fabric.New(fabric.Config{})
						defer f.Close()
						o := mopts{typ: typ, mrAccess: mrFlush}
						if typ == ibv.QPTypeRC {
							o.qpAccess = qpFlush
						}
						if builder {
							o.ops = sendOps[typ]
						}
						a, b := mpair(t, f, o)
						e := &opEnv{a: a, b: b, typ: typ, builder: builder}
						if typ == ibv.QPTypeUD {
							var err error
							e.ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
								GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), HopLimit: 64}})
							must(t, err)
						}
						if ok {
							c.run(t, e)
							return
						}
						e.mw = mallocMW(t, a, verbs.MWType2)
						sent := a.dev.Counters().SentPkts
						err := e.submit(opWR(e, c.op))
						if err == nil || !(errors.Is(err, verbs.EINVAL) || errors.Is(err, verbs.EOPNOTSUPP)) {
							t.Fatalf("%v on %v: got %v, want EINVAL or EOPNOTSUPP", c.name, typ, err)
						}
						settle(time.Millisecond)
						if n := a.dev.Counters().SentPkts - sent; n != 0 {
							t.Errorf("refused %v sent %d packets", c.name, n)
						}
						noWC(t, a.cq, time.Millisecond)
						noWC(t, b.cq, 0)
						if s := a.qp.State(); s != ibv.QPStateRTS {
							t.Errorf("QP state after the refusal: %v, want RTS", s)
						}
						// The QP still works.
						cells := opCells()
						cells[0].run(t, e)
					})
				})
			}
		}
	}
}

// TestOpcodeBuilderFlags: CreateQP takes the send_ops_flags the QP type
// can carry and refuses the others with EOPNOTSUPP (rxe provider
// check_qp_init_attr).
func TestOpcodeBuilderFlags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		dev := apiOpen(t, f, mAddrA)
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(16, nil)
		must(t, err)
		for typ, allowed := range sendOps {
			for bit := verbs.SendOpsFlags(1); bit <= verbs.SendOpsAtomicWrite; bit <<= 1 {
				qp, err := pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, SendOpsFlags: bit,
					Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
				if allowed&bit != 0 {
					if err != nil {
						t.Errorf("%v with send_ops_flags %#x: %v", typ, uint64(bit), err)
						continue
					}
					must(t, qp.Destroy())
				} else if !errors.Is(err, verbs.EOPNOTSUPP) {
					t.Errorf("%v with send_ops_flags %#x: got %v, want EOPNOTSUPP", typ, uint64(bit), err)
				}
			}
		}
	})
}

// TestInlineData: IBV_SEND_INLINE data, given as bytes or gathered from
// SGEs at post time, is sent up to max_inline_data on every QP type and
// refused above it (EINVAL from PostSend, ENOSPC from the builder
// setter); ATOMIC WRITE's 8 bytes do not count against the limit.
func TestInlineData(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				const max = 48
				a, b := mpair(t, f, mopts{typ: typ, maxInline: max, ops: sendOps[typ] & (verbs.SendOpsSend | verbs.SendOpsRDMAWrite)})
				e := &opEnv{a: a, b: b, typ: typ}
				if typ == ibv.QPTypeUD {
					var err error
					e.ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr(), HopLimit: 64}})
					must(t, err)
				}
				if _, ic := a.qp.Query(); ic.Cap.MaxInlineData != max {
					t.Errorf("max_inline_data %d, want %d", ic.Cap.MaxInlineData, max)
				}
				// Bytes: exactly max.
				postRecvMS(t, b, 1, 0, 256)
				data := pattern(max, 21)
				e.must(t, ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline, InlineData: data})
				mone(t, a, 1, ibv.WCSuccess, ibv.WCSend)
				mone(t, b, 1, ibv.WCSuccess, ibv.WCRecv)
				checkBytes(t, "inline bytes", b.buf[e.recvAt(0):e.recvAt(0)+max], data)
				// SGEs: gathered at post, so changing them afterwards changes
				// nothing.
				postRecvMS(t, b, 2, 1024, 256)
				fill(a.buf[:max], 22)
				want := pattern(max, 22)
				_, err := a.qp.PostSend(e.ud(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline,
					SGList: []ibv.SGE{a.mr.SGE(0, 20), a.mr.SGE(20, max-20)}}))
				must(t, err)
				fill(a.buf[:max], 23)
				mone(t, a, 2, ibv.WCSuccess, ibv.WCSend)
				mone(t, b, 2, ibv.WCSuccess, ibv.WCRecv)
				checkBytes(t, "inline SGEs", b.buf[e.recvAt(1024):e.recvAt(1024)+max], want)
				// One byte more: refused, both ways, and by the builder.
				for _, w := range []ibv.SendWR{
					{WRID: 3, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline, InlineData: make([]byte, max+1)},
					{WRID: 3, Opcode: ibv.WRSend, Flags: sig | ibv.SendInline, SGList: []ibv.SGE{a.mr.SGE(0, max+1)}},
				} {
					n, err := a.qp.PostSend(e.ud(w))
					apiWantErr(t, "inline over max_inline_data", err, "max_inline_data", verbs.EINVAL)
					if n != 0 {
						t.Errorf("posted %d", n)
					}
				}
				x, err := a.qp.Ex()
				must(t, err)
				x.WrStart()
				x.WrSend()
				x.WrSetInlineData(make([]byte, max+1))
				if typ == ibv.QPTypeUD {
					x.WrSetUDAddr(e.ah, b.qp.QPN(), 0x1111)
				}
				apiWantErr(t, "builder inline over max_inline_data", x.WrComplete(), "max_inline_data", verbs.ENOSPC)
				noWC(t, a.cq, time.Millisecond)
				if typ == ibv.QPTypeUD {
					return
				}
				// WRITE inline.
				e.must(t, ibv.SendWR{WRID: 4, Opcode: ibv.WRRDMAWrite, Flags: sig | ibv.SendInline, InlineData: data,
					RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr() + 4096})
				mone(t, a, 4, ibv.WCSuccess, ibv.WCRDMAWrite)
				e.waitPlaced()
				checkBytes(t, "inline WRITE", b.buf[4096:4096+max], data)
			})
		})
	}
	t.Run("ATOMIC_WRITE", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			a, b := mpair(t, f, mopts{maxInline: 4, ops: verbs.SendOpsAtomicWrite})
			v := []byte("abcdefgh")
			mpost(t, a.qp, matomicWrite(1, b.mr.RKey(), b.mr.Addr(), v))
			mone(t, a, 1, ibv.WCSuccess, ibv.WCAtomicWrite)
			x, err := a.qp.Ex()
			must(t, err)
			x.WrStart()
			x.WRID, x.WRFlags = 2, sig
			x.WrAtomicWrite(b.mr.RKey(), b.mr.Addr()+8, [8]byte{'1', '2', '3', '4', '5', '6', '7', '8'})
			must(t, x.WrComplete())
			mone(t, a, 2, ibv.WCSuccess, ibv.WCAtomicWrite)
			checkBytes(t, "ATOMIC_WRITEs over max_inline_data 4", b.buf[:16], []byte("abcdefgh12345678"))
		})
	})
}
