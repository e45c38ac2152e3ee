package verbs_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
)

func TestRCBasicOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		a, b := newPair(t, f, pairOpts{timeout: 14, retry: 7, rnr: 7})

		// SEND of 5000 bytes (5 packets at MTU 1024).
		msg := a.buf[:5000]
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 100, SGList: []ibv.SGE{b.mr.SGE(0, 8192)}}))
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 5000)}}))
		wa := waitWC(t, a.cq, 1)
		wb := waitWC(t, b.cq, 1)
		if wa[0].Status != ibv.WCSuccess || wa[0].WRID != 1 || wa[0].Opcode != ibv.WCSend {
			t.Fatalf("send completion %+v", wa[0])
		}
		if wb[0].Status != ibv.WCSuccess || wb[0].WRID != 100 || wb[0].ByteLen != 5000 || wb[0].Opcode != ibv.WCRecv {
			t.Fatalf("recv completion %+v", wb[0])
		}
		if !bytes.Equal(b.buf[:5000], msg) {
			t.Fatal("received bytes differ")
		}

		// WRITE 3000 bytes into b at offset 10000.
		for i := range a.buf[20000:23000] {
			a.buf[20000+i] = byte(i ^ 0x5a)
		}
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(20000, 3000)}, RemoteAddr: b.mr.Addr() + 10000, RKey: b.mr.RKey()}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCRDMAWrite {
			t.Fatalf("write completion %+v", w)
		}
		if !bytes.Equal(b.buf[10000:13000], a.buf[20000:23000]) {
			t.Fatal("written bytes differ")
		}

		// READ them back into a at offset 30000.
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 3, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(30000, 3000)}, RemoteAddr: b.mr.Addr() + 10000, RKey: b.mr.RKey()}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCRDMARead || w.ByteLen != 3000 {
			t.Fatalf("read completion %+v", w)
		}
		if !bytes.Equal(a.buf[30000:33000], a.buf[20000:23000]) {
			t.Fatal("read bytes differ")
		}

		// Fetch-and-add and compare-and-swap on b's first 8 bytes.
		binary.NativeEndian.PutUint64(b.buf[40000:], 100)
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 4, Opcode: ibv.WRAtomicFetchAndAdd, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(40000, 8)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey(), CompareAdd: 5}))
		if w := waitWC(t, a.cq, 1)[0]; w.Status != ibv.WCSuccess || w.Opcode != ibv.WCFetchAdd {
			t.Fatalf("fetch-add completion %+v", w)
		}
		if got := binary.NativeEndian.Uint64(a.buf[40000:]); got != 100 {
			t.Fatalf("fetch-add returned %d, want 100", got)
		}
		must2(t)(a.qp.PostSend(ibv.SendWR{WRID: 5, Opcode: ibv.WRAtomicCmpAndSwp, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(40008, 8)}, RemoteAddr: b.mr.Addr() + 40000, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 7}))
		waitWC(t, a.cq, 1)
		if got, rem := binary.NativeEndian.Uint64(a.buf[40008:]), binary.NativeEndian.Uint64(b.buf[40000:]); got != 105 || rem != 7 {
			t.Fatalf("cmp-swap returned %d and left %d, want 105 and 7", got, rem)
		}
	})
}

func must2(t testing.TB) func(int, error) {
	return func(_ int, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
