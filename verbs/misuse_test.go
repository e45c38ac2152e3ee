package verbs_test

// API misuse found from outside: inline data from SGEs that cannot be
// read, objects of another device, two devices on one link, nil
// arguments, PostSend inside a WrStart batch, error texts and what holds
// a busy object.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/verbs"
)

// TestInlineGather: a send posted with IBV_SEND_INLINE and SGEs is copied
// at post time on every QP type: an SGE spanning two chunks of a
// fast-registration MR carries the chunks' bytes; an SGE with a bad lkey
// or outside its MR is refused by PostSend (EINVAL, bad_wr at it, nothing
// posted before it undone), with no packet and no completion.
func TestInlineGather(t *testing.T) {
	for _, typ := range []verbs.QPType{verbs.QPTypeRC, verbs.QPTypeUC, verbs.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fabric.New(fabric.Config{})
				defer f.Close()
				a, b := mpair(t, f, mopts{typ: typ})
				e := &opEnv{a: a, b: b, typ: typ}
				if typ == verbs.QPTypeUD {
					var err error
					e.ah, err = a.pd.CreateAH(verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: b.dev.Addr()}})
					must(t, err)
				}
				// A fast-registration MR over two discontiguous pages,
				// registered through an RC QP of a's PD (UD QPs take no
				// REG_MR).
				qa, _ := mlink(t, a, b, a.pd, b.pd, mopts{})
				fr, err := a.pd.AllocMR(verbs.MRTypeMemReg, 2)
				must(t, err)
				chunks := pages(2, 4096, 0)
				fill(chunks[0], 31)
				fill(chunks[1], 32)
				fastReg(t, &mside{dev: a.dev, pd: a.pd, cq: a.cq, qp: qa}, fr, chunks, fastAccess)

				postRecvMS(t, b, 1, 0, 256)
				span := verbs.SGE{Addr: fr.Addr() + 4096 - 20, Length: 40, LKey: fr.LKey()}
				want := append(append([]byte{}, chunks[0][4096-20:]...), chunks[1][:20]...)
				e.must(t, verbs.SendWR{WRID: 1, Opcode: verbs.WRSend, Flags: sig | verbs.SendInline,
					SGList: []verbs.SGE{a.mr.SGE(100, 8), span}})
				want = append(append([]byte{}, a.buf[100:108]...), want...)
				mone(t, a, 1, verbs.WCSuccess, verbs.WCSend)
				wc := mone(t, b, 1, verbs.WCSuccess, verbs.WCRecv)
				if int(wc.ByteLen) != e.recvAt(len(want)) {
					t.Errorf("byte_len %d, want %d", wc.ByteLen, e.recvAt(len(want)))
				}
				checkBytes(t, "inline SGEs across fast-reg chunks", b.buf[e.recvAt(0):e.recvAt(len(want))], want)

				for _, tc := range []struct {
					name string
					sge  verbs.SGE
					text string
				}{
					{"bad lkey", verbs.SGE{Addr: a.mr.Addr(), Length: 16, LKey: a.mr.LKey() ^ 0xff}, "inline data: SGE 1"},
					{"out of the MR", a.mr.SGE(len(a.buf)-8, 16), "inline data: SGE 1"},
					{"out of the fast-reg MR", verbs.SGE{Addr: fr.Addr() + 8192 - 8, Length: 16, LKey: fr.LKey()}, "inline data: SGE 1"},
				} {
					sent := a.dev.Counters().SentPkts.Load()
					good := e.ud(verbs.SendWR{WRID: 2, Opcode: verbs.WRSend, Flags: sig | verbs.SendInline, InlineData: []byte("ok")})
					bad := e.ud(verbs.SendWR{WRID: 3, Opcode: verbs.WRSend, Flags: sig | verbs.SendInline,
						SGList: []verbs.SGE{a.mr.SGE(0, 4), tc.sge}})
					postRecvMS(t, b, 2, 0, 256)
					n, err := a.qp.PostSend(good, bad)
					apiWantErr(t, tc.name, err, tc.text, verbs.EINVAL)
					if n != 1 {
						t.Errorf("%s: posted %d, want 1 (bad_wr is the second)", tc.name, n)
					}
					mone(t, a, 2, verbs.WCSuccess, verbs.WCSend)
					mone(t, b, 2, verbs.WCSuccess, verbs.WCRecv)
					noWC(t, a.cq, time.Millisecond)
					if got := a.dev.Counters().SentPkts.Load() - sent; got != 1 {
						t.Errorf("%s: %d packets sent, want 1 (the good WR's)", tc.name, got)
					}
				}
			})
		})
	}
}
