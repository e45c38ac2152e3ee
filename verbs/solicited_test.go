package verbs_test

// Solicited events end to end: the Solicited Event bit goes out on the
// last packet of a SEND or WRITE WITH IMMEDIATE posted with
// SendSolicited, and only there; a receive CQ armed with
// ReqNotify(true) notifies its channel for such a receive or for an
// error completion, one event per arming; ReqNotify(false) notifies for
// any completion.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// seEnd is one side of a solicited-event test: CQs on a channel.
type seEnd struct {
	dev      *verbs.Device
	pd       *verbs.PD
	mr       *verbs.MR
	ch       *verbs.CompChannel
	scq, rcq *verbs.CQ
	qp       *verbs.QP
}

func newSEEnd(t *testing.T, f *fabric.Fabric, addr string, typ ibv.QPType) *seEnd {
	t.Helper()
	e := &seEnd{dev: openDev(t, f, addr, 0)}
	var err error
	e.pd, err = e.dev.AllocPD()
	must(t, err)
	e.mr, err = e.pd.RegMR(make([]byte, 1<<16), ibv.AccessLocalWrite|ibv.AccessRemoteWrite)
	must(t, err)
	e.ch = e.dev.CreateCompChannel()
	e.scq, err = e.dev.CreateCQ(64, e.ch)
	must(t, err)
	e.rcq, err = e.dev.CreateCQ(64, e.ch)
	must(t, err)
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(t, err)
	return e
}

// newSEPair connects two seEnds with QPs of typ; for UD it returns the
// address handle from a to b.
func newSEPair(t *testing.T, f *fabric.Fabric, typ ibv.QPType) (a, b *seEnd, ah *verbs.AH) {
	t.Helper()
	a = newSEEnd(t, f, "10.0.0.1", typ)
	b = newSEEnd(t, f, "10.0.0.2", typ)
	if typ == ibv.QPTypeUD {
		udToRTS(t, a.qp, 5)
		udToRTS(t, b.qp, 5)
		var err error
		ah, err = a.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: b.dev.Addr()}})
		must(t, err)
		return a, b, ah
	}
	o := pairOpts{typ: typ, mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7}
	ea, eb := &end{dev: a.dev, qp: a.qp}, &end{dev: b.dev, qp: b.qp}
	connect(t, ea, eb, o, 0, 0)
	connect(t, eb, ea, o, 0, 0)
	return a, b, nil
}

// getCQEvent waits up to a second of fake time for an event on e's
// channel and acknowledges it; it returns nil when none came.
func (e *seEnd) getCQEvent(t *testing.T) *verbs.CQ {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := e.ch.GetEvent(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	must(t, err)
	must(t, c.AckEvents(1))
	return c
}

// wantCQEvent checks that exactly the events of want (nil: none) come.
func (e *seEnd) wantCQEvent(t *testing.T, what string, want *verbs.CQ) {
	t.Helper()
	if got := e.getCQEvent(t); got != want {
		t.Errorf("%s: event for CQ %p, want %p (receive CQ %p, send CQ %p)", what, got, want, e.rcq, e.scq)
	}
	if want != nil {
		if extra := e.getCQEvent(t); extra != nil {
			t.Errorf("%s: a second event for one arming", what)
		}
	}
}

// TestSolicitedEndToEnd sends every message kind that consumes a receive
// (SEND, SEND WITH IMM and, on connected QPs, WRITE WITH IMM), in one and
// in three packets, with and without SendSolicited, on RC, UC and UD, to
// a receive CQ armed solicited-only: the channel gets an event exactly
// for the solicited ones, and on the wire only the message's last packet
// carries the SE bit, and only when solicited.
func TestSolicitedEndToEnd(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b, ah := newSEPair(t, f, typ)
				rec := record(t, f)
				ops := []ibv.WROpcode{ibv.WRSend, ibv.WRSendWithImm}
				sizes := []int{100, 2500} // one packet, three at MTU 1024
				if typ == ibv.QPTypeUD {
					sizes = sizes[:1]
				} else {
					ops = append(ops, ibv.WRRDMAWriteWithImm)
				}
				id := uint64(0)
				for _, op := range ops {
					for _, n := range sizes {
						for _, sol := range []bool{false, true} {
							id++
							what := fmt.Sprintf("%v of %d bytes, solicited %v", op, n, sol)
							must(t, b.rcq.ReqNotify(true))
							must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: id, SGList: []ibv.SGE{b.mr.SGE(0, 4096)}}))
							rec.reset()
							wr := ibv.SendWR{WRID: id, Opcode: op, Imm: uint32(id), SGList: []ibv.SGE{a.mr.SGE(0, n)}}
							if sol {
								wr.Flags |= ibv.SendSolicited
							}
							if op == ibv.WRRDMAWriteWithImm {
								wr.RemoteAddr, wr.RKey = b.mr.Addr()+8192, b.mr.RKey()
							}
							if ah != nil {
								wr.AH, wr.RemoteQPN, wr.RemoteQKey = ah, b.qp.QPN(), 5
							}
							must2(t)(a.qp.PostSend(wr))
							wc := waitWC(t, b.rcq, 1)[0]
							if wc.Status != ibv.WCSuccess || wc.WRID != id {
								t.Fatalf("%s: receive completion %+v", what, wc)
							}
							var want *verbs.CQ
							if sol {
								want = b.rcq
							}
							b.wantCQEvent(t, what, want)
							checkSE(t, what, rec.match(fabric.And(fabric.From(a.dev.Addr()), fabric.MaskIs(wire.MaskRequest))),
								(n+1023)/1024, sol)
						}
					}
				}
				// The sender's CQs were never armed: no events there.
				a.wantCQEvent(t, "sender", nil)
			})
		})
	}
}

// checkSE checks a message's request packets: n of them, the SE bit on
// the last one exactly when solicited, on no other.
func checkSE(t *testing.T, what string, pkts []seen, n int, solicited bool) {
	t.Helper()
	if len(pkts) != n {
		t.Errorf("%s: %d request packets, want %d", what, len(pkts), n)
		return
	}
	for i := range pkts {
		want := solicited && i == n-1
		if got := pkts[i].Wire.SE(); got != want {
			t.Errorf("%s: packet %d of %d (%v) has SE %v, want %v", what, i+1, n, pkts[i].op(), got, want)
		}
	}
}

// TestSolicitedNotWrite: SendSolicited on an RDMA WRITE (no immediate) or
// a READ consumes no receive and sets no SE bit: the responder's CQ,
// armed solicited-only, gets nothing.
func TestSolicitedNotWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b, _ := newSEPair(t, f, ibv.QPTypeRC)
		rec := record(t, f)
		must(t, b.rcq.ReqNotify(true))
		must(t, b.scq.ReqNotify(true))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSolicited | ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 2500)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		waitWC(t, a.scq, 1)
		b.wantCQEvent(t, "solicited WRITE", nil)
		for _, p := range rec.match(fabric.From(a.dev.Addr())) {
			if p.Wire.SE() {
				t.Errorf("%v carries SE", p.op())
			}
		}
	})
}

// TestNotifyErrorsAndArming: a send CQ armed solicited-only gets no event
// for successful sends, even solicited ones, and one for a failed send;
// a receive CQ armed solicited-only gets one for a flushed receive; armed
// for any completion, one per arming however many completions come; a
// solicited-only request does not narrow one for any completion.
func TestNotifyErrorsAndArming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b, _ := newSEPair(t, f, ibv.QPTypeRC)
		send := func(id uint64, flags ibv.SendFlags) {
			t.Helper()
			must2(t)(a.qp.PostSend(ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: flags | ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 64)}}))
		}
		for i := range 8 {
			must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.mr.SGE(i*128, 128)}}))
		}

		must(t, a.scq.ReqNotify(true))
		send(1, ibv.SendSolicited)
		waitWC(t, a.scq, 1)
		waitWC(t, b.rcq, 1)
		a.wantCQEvent(t, "successful solicited send, sender's CQ", nil)
		b.wantCQEvent(t, "receiver's CQ not armed", nil)

		// One event per arming.
		must(t, b.rcq.ReqNotify(true))
		send(2, ibv.SendSolicited)
		send(3, ibv.SendSolicited)
		waitWC(t, b.rcq, 2)
		waitWC(t, a.scq, 2)
		b.wantCQEvent(t, "two solicited receives, one arming", b.rcq)
		must(t, b.rcq.ReqNotify(false))
		must(t, b.rcq.ReqNotify(true)) // stays armed for any (rxe_req_notify_cq)
		send(4, 0)
		waitWC(t, b.rcq, 1)
		waitWC(t, a.scq, 1)
		b.wantCQEvent(t, "armed for any, then solicited-only", b.rcq)

		// A failed send: a WRITE with a bad rkey.
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 64)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x80}))
		if wc := waitWC(t, a.scq, 1)[0]; wc.Status != ibv.WCRemAccessErr {
			t.Fatalf("WRITE with a bad rkey: %+v", wc)
		}
		a.wantCQEvent(t, "failed send, solicited-only", a.scq)

		// The receiver's QP went to ERR: its receives are flushed, and a
		// solicited-only request is met by the first flush.
		must(t, b.rcq.ReqNotify(true))
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 100}))
		if wc := waitWC(t, b.rcq, 5); wc[0].Status != ibv.WCWRFlushErr {
			t.Fatalf("receives after ERR: %+v", wc)
		}
		b.wantCQEvent(t, "flushed receive, solicited-only", b.rcq)
	})
}
