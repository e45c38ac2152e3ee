package verbs_test

// FLUSH and ATOMIC WRITE (IBA 1.5 Annex A19) through the API: the
// persistent-memory capability, and ATOMIC WRITE from inline data, SGEs
// and the builder. Their wire rules (the packets and answers, access,
// duplicates and replays, the initiator depth) are tested beside the
// transport, in internal/transport/rc.

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
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
