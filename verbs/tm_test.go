package verbs_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// The tests of tag matching follow rdma-core's tests/test_tag_matching.py:
// a client RC QP sends tagged messages (TMH built by hand) to a QP on a
// tag-matching SRQ.

const (
	tmSlot   = 4096 // bytes per buffer on the server
	tmUnexp  = 8    // ordinary SRQ buffers, slots 0..7
	tmTagged = 8    // tagged buffer slots 8..15
)

type tmBed struct {
	srv    *end      // srv.qp is on the TM-SRQ; srv.cq its CQ
	srvSCQ *verbs.CQ // srv.qp's send CQ
	srq    *verbs.SRQ
	cli    *end
	unexpN int // ordinary buffers posted so far
	// cliRecv is a receive completion of the client's that sendRaw polled
	// with its SEND's.
	cliRecv *ibv.WorkCompletion
}

func newTMBed(t *testing.T, f *fabric.Fabric, maxTags uint32) *tmBed {
	t.Helper()
	return newTMBedRNR(t, f, maxTags, 7)
}

// newTMBedRNR is newTMBed with the client's rnr_retry (7: for ever).
func newTMBedRNR(t *testing.T, f *fabric.Fabric, maxTags uint32, rnr uint8) *tmBed {
	t.Helper()
	dev := openDev(t, f, "10.0.0.100", 0)
	srv := &end{dev: dev, buf: make([]byte, (tmUnexp+tmTagged)*tmSlot)}
	var err error
	srv.pd, err = dev.AllocPD()
	must(t, err)
	srv.cq, err = dev.CreateCQ(256, nil)
	must(t, err)
	srv.mr, err = srv.pd.RegMR(srv.buf, ibv.AccessLocalWrite)
	must(t, err)
	b := &tmBed{srv: srv}
	b.srq, err = srv.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: 64, MaxSGE: 1},
		Type: ibv.SRQTypeTM, CQ: srv.cq, TM: ibv.TMCap{MaxNumTags: maxTags, MaxOps: 16}})
	must(t, err)
	sendCQ, err := dev.CreateCQ(64, nil)
	must(t, err)
	b.srvSCQ = sendCQ
	srv.qp, err = srv.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: sendCQ, RecvCQ: sendCQ, SRQ: b.srq,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxSendSGE: 1}})
	must(t, err)
	o := pairOpts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: rnr}
	o.defaults()
	b.cli = newEnd(t, f, netip.MustParseAddr("10.0.0.1"), o)
	connect(t, b.cli, srv, o, 0, 0)
	connect(t, srv, b.cli, o, 0, 0)
	return b
}

// postUnexp posts n ordinary buffers for unexpected messages (WRID = slot).
func (b *tmBed) postUnexp(t *testing.T, n int) {
	t.Helper()
	for range n {
		i := b.unexpN % tmUnexp
		b.unexpN++
		must2(t)(b.srq.PostRecv(ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{b.srv.mr.SGE(i*tmSlot, tmSlot)}}))
	}
}

// addTag returns a WRTagAdd of tagged slot k (0..tmTagged-1) of size
// bytes, RecvWRID 100+k.
func (b *tmBed) addTag(k int, size int, tag, mask uint64, flags ibv.OpsFlags) ibv.OpsWR {
	return ibv.OpsWR{WRID: uint64(200 + k), Opcode: ibv.WRTagAdd, Flags: flags, RecvWRID: uint64(100 + k),
		SGList: []ibv.SGE{b.srv.mr.SGE((tmUnexp+k)*tmSlot, size)}, Tag: tag, Mask: mask}
}

func (b *tmBed) tagged(k, n int) []byte { return b.srv.buf[(tmUnexp+k)*tmSlot:][:n] }

// send sends a SEND of a TMH (op, tag, app_ctx = tag low 32 bits) and
// data of n bytes (byte i = seed+i), and waits for its completion.
func (b *tmBed) send(t *testing.T, op wire.TMOp, tag uint64, n int, seed byte) []byte {
	t.Helper()
	msg := b.cli.buf[:wire.TMHLen+n]
	wire.PutTMH(msg, op, uint32(tag), tag)
	for i := range n {
		msg[wire.TMHLen+i] = seed + byte(i)
	}
	return b.sendRaw(t, msg)
}

func (b *tmBed) sendRaw(t *testing.T, msg []byte) []byte {
	t.Helper()
	must2(t)(b.cli.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{b.cli.mr.SGE(0, len(msg))}}))
	for _, wc := range waitWC(t, b.cli.cq, 1) {
		switch {
		case wc.Opcode == ibv.WCRecv:
			b.cliRecv = &wc
		case wc.Status != ibv.WCSuccess:
			t.Fatalf("client SEND completed %v", wc.Status)
		}
	}
	return bytes.Clone(msg)
}

func (b *tmBed) ops(t *testing.T, ops ...ibv.OpsWR) []ibv.OpsWR {
	t.Helper()
	must2(t)(b.srq.PostOps(ops))
	return ops
}

func wantTMWC(t *testing.T, what string, got, want ibv.WorkCompletion) {
	t.Helper()
	want.QPNum, want.SrcQP = got.QPNum, got.SrcQP
	if got != want {
		t.Errorf("%s: completion\n got %+v\nwant %+v", what, got, want)
	}
}

func TestTMEagerMatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 1})
		defer f.Close()
		b := newTMBed(t, f, 4)
		ops := b.ops(t, b.addTag(0, 512, 0x1234, ^uint64(0), ibv.OpsSignaled))
		wantTMWC(t, "TAG_ADD", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 200, Opcode: ibv.WCTMAdd})
		if ops[0].Handle != 0 {
			t.Errorf("handle %d, want 0", ops[0].Handle)
		}
		msg := b.send(t, wire.TMEager, 0x1234, 300, 7)
		wantTMWC(t, "matched EAGER", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 100, Opcode: ibv.WCTMRecv,
			Flags: ibv.WCTMMatch | ibv.WCTMDataValid, ByteLen: 300, TMTag: 0x1234, TMPriv: 0x1234})
		if !bytes.Equal(b.tagged(0, 300), msg[wire.TMHLen:]) {
			t.Error("the tagged buffer does not hold the payload after the TMH")
		}
	})
}

func TestTMMultiPacketEager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 2})
		defer f.Close()
		b := newTMBed(t, f, 4)
		b.ops(t, b.addTag(1, tmSlot, 9, ^uint64(0), 0))
		msg := b.send(t, wire.TMEager, 9, 3000, 3) // 3016 bytes: three packets at MTU 1024
		got := waitWC(t, b.srv.cq, 2)
		wantTMWC(t, "first (MATCH)", got[0], ibv.WorkCompletion{WRID: 101, Opcode: ibv.WCTMRecv, Flags: ibv.WCTMMatch, TMTag: 9, TMPriv: 9})
		wantTMWC(t, "second (DATA_VALID)", got[1], ibv.WorkCompletion{WRID: 101, Opcode: ibv.WCTMRecv, Flags: ibv.WCTMDataValid,
			ByteLen: 3000, TMTag: 9, TMPriv: 9})
		if !bytes.Equal(b.tagged(1, 3000), msg[wire.TMHLen:]) {
			t.Error("the tagged buffer does not hold the payload after the TMH")
		}
	})
}

func TestTMUnexpectedThenSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 3})
		defer f.Close()
		b := newTMBed(t, f, 4)
		b.postUnexp(t, 4)
		// No tag yet: unexpected, whole into buffer 0, asking for a sync.
		msg := b.send(t, wire.TMEager, 5, 40, 1)
		wantTMWC(t, "unexpected", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 0, Opcode: ibv.WCRecv,
			Flags: ibv.WCTMSyncReq, ByteLen: wire.TMHLen + 40})
		if !bytes.Equal(b.srv.buf[:len(msg)], msg) {
			t.Error("the unexpected message is not in the SRQ buffer whole, TMH included")
		}
		// A tag added without a sync: matching stays off.
		b.ops(t, b.addTag(0, 512, 5, ^uint64(0), ibv.OpsSignaled))
		wantTMWC(t, "TAG_ADD unsynced", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 200, Opcode: ibv.WCTMAdd, Flags: ibv.WCTMSyncReq})
		b.send(t, wire.TMEager, 5, 40, 2)
		wantTMWC(t, "unexpected while unsynced", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 1, Opcode: ibv.WCRecv,
			Flags: ibv.WCTMSyncReq, ByteLen: wire.TMHLen + 40})
		// A stale count keeps it off; the right one (2) turns it on.
		b.ops(t, ibv.OpsWR{WRID: 300, Opcode: ibv.WRTagSync, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 1})
		wantTMWC(t, "stale sync", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 300, Opcode: ibv.WCTMSync, Flags: ibv.WCTMSyncReq})
		b.ops(t, ibv.OpsWR{WRID: 301, Opcode: ibv.WRTagSync, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 2})
		wantTMWC(t, "sync", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 301, Opcode: ibv.WCTMSync})
		msg = b.send(t, wire.TMEager, 5, 40, 3)
		wantTMWC(t, "matched after sync", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 100, Opcode: ibv.WCTMRecv,
			Flags: ibv.WCTMMatch | ibv.WCTMDataValid, ByteLen: 40, TMTag: 5, TMPriv: 5})
		if !bytes.Equal(b.tagged(0, 40), msg[wire.TMHLen:]) {
			t.Error("the tagged buffer does not hold the payload")
		}
	})
}

func TestTMNoTagAndShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 4})
		defer f.Close()
		b := newTMBed(t, f, 4)
		b.postUnexp(t, 4)
		b.ops(t, b.addTag(0, 512, 0, 0, 0)) // matches any tag
		// NO_TAG: an ordinary receive, whole, not unexpected.
		msg := b.send(t, wire.TMNoTag, 77, 20, 1)
		wantTMWC(t, "NO_TAG", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 0, Opcode: ibv.WCTMNoTag, ByteLen: wire.TMHLen + 20})
		if !bytes.Equal(b.srv.buf[:len(msg)], msg) {
			t.Error("the NO_TAG message is not in the SRQ buffer whole")
		}
		// Matching is still on.
		b.send(t, wire.TMEager, 1, 8, 2)
		wantTMWC(t, "EAGER after NO_TAG", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 100, Opcode: ibv.WCTMRecv,
			Flags: ibv.WCTMMatch | ibv.WCTMDataValid, ByteLen: 8, TMTag: 1, TMPriv: 1})
		// A message shorter than a TMH, and one with an unknown TMH
		// opcode: unexpected, whole.
		b.ops(t, b.addTag(1, 512, 0, 0, 0))
		b.sendRaw(t, []byte{3, 0, 0})
		wantTMWC(t, "short", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 1, Opcode: ibv.WCRecv, Flags: ibv.WCTMSyncReq, ByteLen: 3})
		b.ops(t, ibv.OpsWR{Opcode: ibv.WRTagSync, Flags: ibv.OpsTMSync, UnexpectedCnt: 1})
		b.send(t, wire.TMOp(9), 1, 8, 2)
		wantTMWC(t, "malformed", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 2, Opcode: ibv.WCRecv, Flags: ibv.WCTMSyncReq, ByteLen: 24})
	})
}

func TestTMMasksAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		b := newTMBed(t, f, 8)
		b.ops(t,
			b.addTag(0, 64, 0xab00, 0xff00, 0),     // 0xab??
			b.addTag(1, 64, 0xab12, ^uint64(0), 0), // exactly 0xab12
			b.addTag(2, 64, 0x0012, 0x00ff, 0))     // ????12
		for _, c := range []struct {
			tag  uint64
			wrid uint64
		}{
			{0xab12, 100}, // the earliest posted match, not the exact one
			{0xab12, 101},
			{0xcd12, 102},
		} {
			b.send(t, wire.TMEager, c.tag, 4, 0)
			if wc := waitWC(t, b.srv.cq, 1)[0]; wc.Opcode != ibv.WCTMRecv || wc.WRID != c.wrid {
				t.Errorf("tag %#x: %v wr_id %d, want TM_RECV wr_id %d", c.tag, wc.Opcode, wc.WRID, c.wrid)
			}
		}
	})
}

func TestTMDeleteConsumedAndLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 6})
		defer f.Close()
		b := newTMBed(t, f, 2)
		ops := b.ops(t, b.addTag(0, 64, 1, ^uint64(0), 0), b.addTag(1, 64, 2, ^uint64(0), 0))
		// The list is full: ENOMEM, at the op's index.
		bad, err := b.srq.PostOps([]ibv.OpsWR{{Opcode: ibv.WRTagSync}, b.addTag(2, 64, 3, ^uint64(0), 0)})
		if bad != 1 || !errors.Is(err, verbs.ENOMEM) {
			t.Errorf("third tag of 2: bad %d err %v, want 1 ENOMEM", bad, err)
		}
		b.send(t, wire.TMEager, 1, 4, 0)
		waitWC(t, b.srv.cq, 1)
		// Deleting the consumed tag fails with TM_ERR; the other goes.
		b.ops(t, ibv.OpsWR{WRID: 7, Opcode: ibv.WRTagDel, Handle: ops[0].Handle, Flags: ibv.OpsSignaled},
			ibv.OpsWR{WRID: 8, Opcode: ibv.WRTagDel, Handle: ops[1].Handle, Flags: ibv.OpsSignaled})
		got := waitWC(t, b.srv.cq, 2)
		wantTMWC(t, "DEL consumed", got[0], ibv.WorkCompletion{WRID: 7, Opcode: ibv.WCTMDel, Status: ibv.WCTMErr})
		wantTMWC(t, "DEL listed", got[1], ibv.WorkCompletion{WRID: 8, Opcode: ibv.WCTMDel})
		for _, c := range []struct {
			name string
			ops  []ibv.OpsWR
			want error
		}{
			{"bad handle", []ibv.OpsWR{{Opcode: ibv.WRTagDel, Handle: 2}}, verbs.EINVAL},
			{"too many SGEs", []ibv.OpsWR{{Opcode: ibv.WRTagAdd, SGList: []ibv.SGE{b.srv.mr.SGE(0, 8), b.srv.mr.SGE(8, 8)}}}, verbs.EINVAL},
			{"bad opcode", []ibv.OpsWR{{Opcode: 7}}, verbs.EINVAL},
			{"beyond max_ops", make([]ibv.OpsWR, 17), verbs.ENOMEM},
		} {
			for i := range c.ops {
				if c.ops[i].Opcode == 0 && c.ops[i].SGList == nil && c.name == "beyond max_ops" {
					c.ops[i].Opcode = ibv.WRTagSync
				}
			}
			if _, err := b.srq.PostOps(c.ops); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
	})
}

func TestTMTaggedBufferTooSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 7})
		defer f.Close()
		b := newTMBed(t, f, 2)
		ops := b.ops(t, b.addTag(0, 16, 4, ^uint64(0), 0))
		wire.PutTMH(b.cli.buf, wire.TMEager, 0, 4)
		must2(t)(b.cli.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{b.cli.mr.SGE(0, wire.TMHLen+32)}}))
		wc := waitWC(t, b.srv.cq, 1)[0]
		if wc.Status != ibv.WCLocLenErr || wc.Opcode != ibv.WCTMRecv || wc.WRID != 100 {
			t.Errorf("too small: %v %v wr_id %d, want LOC_LEN_ERR TM_RECV 100", wc.Status, wc.Opcode, wc.WRID)
		}
		// The tag is no longer the list's.
		b.ops(t, ibv.OpsWR{WRID: 9, Opcode: ibv.WRTagDel, Handle: ops[0].Handle})
		if wc := waitWC(t, b.srv.cq, 1)[0]; wc.Status != ibv.WCTMErr {
			t.Errorf("DEL of the failed tag: %v, want TM_ERR", wc.Status)
		}
	})
}

func TestTMRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 8})
		defer f.Close()
		dev := openDev(t, f, "10.0.0.9", 0)
		pd, err := dev.AllocPD()
		must(t, err)
		cq, err := dev.CreateCQ(16, nil)
		must(t, err)
		caps := dev.QueryDeviceEx().TMCaps
		if caps.Flags&ibv.TMCapRC == 0 || caps.MaxNumTags == 0 || caps.MaxOps == 0 || caps.MaxSGE != 1 || caps.MaxRndvHdrSize == 0 {
			t.Errorf("tm_caps %+v", caps)
		}
		rq := verbs.SRQInitAttr{MaxWR: 8, MaxSGE: 1}
		for _, c := range []struct {
			name string
			attr verbs.SRQInitAttrEx
			want error
		}{
			{"no CQ", verbs.SRQInitAttrEx{SRQInitAttr: rq, Type: ibv.SRQTypeTM, TM: ibv.TMCap{MaxNumTags: 1, MaxOps: 1}}, verbs.EINVAL},
			{"no tags", verbs.SRQInitAttrEx{SRQInitAttr: rq, Type: ibv.SRQTypeTM, CQ: cq, TM: ibv.TMCap{MaxOps: 1}}, verbs.EINVAL},
			{"too many tags", verbs.SRQInitAttrEx{SRQInitAttr: rq, Type: ibv.SRQTypeTM, CQ: cq, TM: ibv.TMCap{MaxNumTags: caps.MaxNumTags + 1, MaxOps: 1}}, verbs.EINVAL},
			{"XRC without a domain", verbs.SRQInitAttrEx{SRQInitAttr: rq, Type: ibv.SRQTypeXRC, CQ: cq}, verbs.EINVAL},
		} {
			if _, err := pd.CreateSRQEx(c.attr); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		basic, err := pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: rq})
		must(t, err)
		if _, err := basic.PostOps([]ibv.OpsWR{{Opcode: ibv.WRTagSync}}); !errors.Is(err, verbs.EOPNOTSUPP) {
			t.Errorf("ops on a basic SRQ: %v, want EOPNOTSUPP", err)
		}
		tmSRQ, err := pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: rq, Type: ibv.SRQTypeTM, CQ: cq, TM: ibv.TMCap{MaxNumTags: 4, MaxOps: 4}})
		must(t, err)
		for _, typ := range []ibv.QPType{ibv.QPTypeUD, ibv.QPTypeUC} {
			_, err := pd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, SRQ: tmSRQ, Cap: ibv.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
			if !errors.Is(err, verbs.EOPNOTSUPP) {
				t.Errorf("%v QP on a TM-SRQ: %v, want EOPNOTSUPP", typ, err)
			}
		}
		if err := cq.Destroy(); !errors.Is(err, verbs.EBUSY) {
			t.Errorf("destroying the TM-SRQ's CQ: %v, want EBUSY", err)
		}
		must(t, tmSRQ.Destroy())
		must(t, basic.Destroy())
		must(t, cq.Destroy())
	})
}

// A retransmitted SEND (its ACK lost) is a duplicate to the responder: it
// is acknowledged again and never matched a second time (IBTA C9-105).
func TestTMDuplicateDoesNotMatchTwice(t *testing.T) {
	for _, n := range []int{40, 3000} { // one packet, three packets
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{Seed: 9})
			defer f.Close()
			b := newTMBed(t, f, 4)
			b.ops(t, b.addTag(0, tmSlot, 3, ^uint64(0), 0), b.addTag(1, tmSlot, 3, ^uint64(0), 0))
			f.AddFilter(fabric.DropNth(1, func(p *fabric.Packet) bool {
				return fabric.From(b.srv.dev.Addr())(p) && fabric.OpcodeIs(wire.RCAck)(p)
			}))
			b.send(t, wire.TMEager, 3, n, 1)
			if dup := b.srv.dev.Counters().DuplicateRequest; dup == 0 {
				t.Fatalf("%d bytes: no duplicate request: the ACK was not lost", n)
			}
			got := waitWC(t, b.srv.cq, 1+min(1, n/1000))
			if last := got[len(got)-1]; last.WRID != 100 || last.Flags&ibv.WCTMDataValid == 0 {
				t.Errorf("%d bytes: %+v, want the data in tag 0 (wr_id 100)", n, last)
			}
			if k := b.srv.cq.Poll(make([]ibv.WorkCompletion, 4)); k != 0 {
				t.Errorf("%d bytes: %d more completions after the duplicate", n, k)
			}
			// The second tag is still listed: the next message takes it.
			b.send(t, wire.TMEager, 3, 8, 2)
			if wc := waitWC(t, b.srv.cq, 1)[0]; wc.WRID != 101 {
				t.Errorf("%d bytes: next message in wr_id %d, want 101", n, wc.WRID)
			}
		})
	}
}

// An unexpected message with no SRQ buffer is refused with an RNR NAK
// and counted once, when a buffer finally takes it.
func TestTMUnexpectedRNR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 10})
		defer f.Close()
		b := newTMBed(t, f, 4)
		wire.PutTMH(b.cli.buf, wire.TMEager, 0, 77)
		must2(t)(b.cli.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{b.cli.mr.SGE(0, wire.TMHLen+8)}}))
		synctest.Wait()
		if rnr := b.cli.dev.Counters().RcvdRNRErr; rnr == 0 {
			t.Fatal("no RNR NAK for an unexpected message on an empty SRQ")
		}
		if k := b.srv.cq.Poll(make([]ibv.WorkCompletion, 4)); k != 0 {
			t.Fatalf("%d completions before a buffer was posted", k)
		}
		b.postUnexp(t, 1)
		wantTMWC(t, "unexpected after RNR", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 0, Opcode: ibv.WCRecv,
			Flags: ibv.WCTMSyncReq, ByteLen: wire.TMHLen + 8})
		waitWC(t, b.cli.cq, 1)
		// Counted once: a sync with 1 turns matching back on.
		b.ops(t, ibv.OpsWR{WRID: 5, Opcode: ibv.WRTagSync, Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: 1})
		wantTMWC(t, "sync", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 5, Opcode: ibv.WCTMSync})
	})
}

// A matched message cut short by the QP's move to ERR is flushed, and its
// tag goes back to the list.
func TestTMFlushReleasesTag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 11})
		defer f.Close()
		b := newTMBed(t, f, 1)
		b.ops(t, b.addTag(0, tmSlot, 6, ^uint64(0), 0))
		f.AddFilter(fabric.DropIf(fabric.OpcodeIs(wire.RCSendLast)))
		msg := b.cli.buf[:wire.TMHLen+3000]
		wire.PutTMH(msg, wire.TMEager, 0, 6)
		must2(t)(b.cli.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRSend, SGList: []ibv.SGE{b.cli.mr.SGE(0, len(msg))}}))
		wantTMWC(t, "MATCH", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 100, Opcode: ibv.WCTMRecv, Flags: ibv.WCTMMatch, TMTag: 6})
		if _, err := b.srq.PostOps([]ibv.OpsWR{b.addTag(1, 64, 7, ^uint64(0), 0)}); !errors.Is(err, verbs.ENOMEM) {
			t.Fatalf("second tag while the first is consumed: %v, want ENOMEM", err)
		}
		must(t, b.srv.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState))
		if wc := waitWC(t, b.srv.cq, 1)[0]; wc.WRID != 100 || wc.Status != ibv.WCWRFlushErr {
			t.Errorf("flush: %+v, want wr_id 100 WR_FLUSH_ERR", wc)
		}
		b.ops(t, b.addTag(1, 64, 7, ^uint64(0), 0))
	})
}

// rndv sends a RNDV request for n bytes of the client's buffer at 8192
// (byte i = seed+i) with tag and 8 bytes of user data, and returns the
// data.
func (b *tmBed) rndv(t *testing.T, tag uint64, n int, seed byte) []byte {
	t.Helper()
	data := b.cli.buf[8192 : 8192+n]
	for i := range data {
		data[i] = seed + byte(i)
	}
	req := b.cli.buf[:wire.TMHLen+wire.RVHLen+8]
	wire.PutTMH(req, wire.TMRndv, 0xc0ffee, tag)
	wire.PutRVH(req[wire.TMHLen:], b.cli.mr.Addr()+8192, b.cli.mr.RKey(), uint32(n))
	copy(req[wire.TMHLen+wire.RVHLen:], "userdata")
	b.sendRaw(t, req)
	return bytes.Clone(data)
}

// A matched RNDV request: the responder READs the sender's data into the
// tagged buffer and SENDs a FIN back (tag_matching.md).
func TestTMRendezvous(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 12})
		defer f.Close()
		b := newTMBed(t, f, 4)
		must2(t)(b.cli.qp.PostRecv(ibv.RecvWR{WRID: 50, SGList: []ibv.SGE{b.cli.mr.SGE(4096, 64)}}))
		b.ops(t, b.addTag(0, tmSlot, 0x55, ^uint64(0), 0))
		data := b.rndv(t, 0x55, 3000, 9)
		wantTMWC(t, "RNDV", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 100, Opcode: ibv.WCTMRecv,
			Flags: ibv.WCTMMatch | ibv.WCTMDataValid, ByteLen: 3000, TMTag: 0x55, TMPriv: 0xc0ffee})
		if !bytes.Equal(b.tagged(0, 3000), data) {
			t.Error("the tagged buffer does not hold the sender's data")
		}
		fin := b.cliRecv
		if fin == nil {
			fin = &waitWC(t, b.cli.cq, 1)[0]
		}
		tmh, _ := wire.AsTMH(b.cli.buf[4096:])
		if fin.WRID != 50 || fin.Opcode != ibv.WCRecv || fin.ByteLen != wire.TMHLen || tmh.Op() != wire.TMFin || tmh.Tag() != 0x55 || tmh.AppCtx() != 0xc0ffee {
			t.Errorf("FIN: %+v, TMH %v tag %#x ctx %#x", fin, tmh.Op(), tmh.Tag(), tmh.AppCtx())
		}
		if k := b.srvSCQ.Poll(make([]ibv.WorkCompletion, 4)); k != 0 {
			t.Errorf("the rendezvous's READ and FIN gave %d send completions", k)
		}
		// The tag went back: four more fit.
		b.ops(t, b.addTag(0, 64, 1, 1, 0), b.addTag(1, 64, 1, 1, 0), b.addTag(2, 64, 1, 1, 0), b.addTag(3, 64, 1, 1, 0))
	})
}

// RNDV data larger than the tagged buffer: the request goes there and
// completes with TM_RNDV_INCOMPLETE; an unmatched RNDV is unexpected.
func TestTMRendezvousIncompleteAndUnexpected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 13})
		defer f.Close()
		b := newTMBed(t, f, 4)
		b.postUnexp(t, 1)
		b.ops(t, b.addTag(0, 1024, 0x66, ^uint64(0), 0))
		b.rndv(t, 0x66, 3000, 1)
		req := bytes.Clone(b.cli.buf[:wire.TMHLen+wire.RVHLen+8])
		wc := waitWC(t, b.srv.cq, 1)[0]
		wantTMWC(t, "too small", wc, ibv.WorkCompletion{WRID: 100, Status: ibv.WCTMRndvIncomplete, Opcode: ibv.WCTMRecv,
			Flags: ibv.WCTMMatch, ByteLen: uint32(len(req)), TMTag: 0x66, TMPriv: 0xc0ffee})
		if !bytes.Equal(b.tagged(0, len(req)), req) {
			t.Error("the tagged buffer does not hold the RNDV request")
		}
		b.rndv(t, 0x67, 3000, 1)
		req = bytes.Clone(b.cli.buf[:wire.TMHLen+wire.RVHLen+8])
		wantTMWC(t, "unmatched", waitWC(t, b.srv.cq, 1)[0], ibv.WorkCompletion{WRID: 0, Opcode: ibv.WCRecv,
			Flags: ibv.WCTMSyncReq, ByteLen: uint32(len(req))})
		if !bytes.Equal(b.srv.buf[:len(req)], req) {
			t.Error("the unexpected RNDV request is not in the SRQ buffer whole")
		}
	})
}

// FuzzTM runs a program the fuzzer writes against a tag-matching SRQ:
// list operations (adds with masks, deletes of any handle, syncs with any
// count), ordinary buffers, and SENDs with any TMH opcode, tag and length
// (short, multi-packet, RNDV with any RVH). Whatever the program, nothing
// may panic, every SEND must complete (successfully or not), and the
// devices must close cleanly (synctest fails on a goroutine left behind).
func FuzzTM(f *testing.F) {
	f.Add([]byte{0, 1, 3, 1, 3, 1, 9, 4, 2, 0, 3, 2, 40})
	f.Add([]byte{3, 3, 7, 250, 4, 0, 0, 0, 3, 1, 5, 30})
	f.Add([]byte{0, 5, 1, 0, 3, 9, 2, 3, 1, 1, 200, 2, 7, 3, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		synctest.Test(t, func(t *testing.T) {
			fab := fabric.New(fabric.Config{Seed: 1})
			defer fab.Close()
			b := newTMBedRNR(t, fab, 4, 2) // a message no buffer takes fails at last
			next := func() byte {
				if len(prog) == 0 {
					return 0
				}
				c := prog[0]
				prog = prog[1:]
				return c
			}
			for steps := 0; len(prog) > 0 && steps < 32; steps++ {
				switch next() % 5 {
				case 0:
					k := int(next() % tmTagged)
					b.srq.PostOps([]ibv.OpsWR{b.addTag(k, 64*int(next()%65), uint64(next()%4), []uint64{0, 1, 3, ^uint64(0)}[next()%4], ibv.OpsSignaled)})
				case 1:
					b.srq.PostOps([]ibv.OpsWR{{Opcode: ibv.WRTagDel, Handle: uint32(next() % 6), Flags: ibv.OpsSignaled}})
				case 2:
					b.srq.PostOps([]ibv.OpsWR{{Opcode: ibv.OpsOpcode(next() % 4), Flags: ibv.OpsTMSync | ibv.OpsSignaled, UnexpectedCnt: uint32(next() % 4)}})
				case 3:
					b.srq.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{b.srv.mr.SGE(0, tmSlot)}})
				case 4:
					n := int(next()) * 23 // up to 5865 bytes: up to six packets
					msg := b.cli.buf[:n]
					if n >= wire.TMHLen {
						wire.PutTMH(msg, wire.TMOp(next()%5), 0, uint64(next()%4))
					}
					if n >= wire.TMHLen+wire.RVHLen {
						wire.PutRVH(msg[wire.TMHLen:], b.cli.mr.Addr()+uint64(next())*64, b.cli.mr.RKey(), uint32(next())*31)
					}
					if _, err := b.cli.qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
						SGList: []ibv.SGE{b.cli.mr.SGE(0, n)}}); err != nil {
						return // the client QP is in ERR
					}
					for sent := false; !sent; {
						for _, wc := range waitWC(t, b.cli.cq, 1) {
							if wc.Status != ibv.WCSuccess {
								return // the client QP is in ERR
							}
							sent = sent || wc.Opcode == ibv.WCSend
						}
					}
				}
			}
			time.Sleep(time.Second)
			synctest.Wait()
			_ = pollAll(b.srv.cq)
		})
	})
}
