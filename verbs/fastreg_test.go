package verbs_test

// Fast registration through the verbs API (ib_alloc_mr, ib_map_mr_sg,
// IB_WR_REG_MR, LOCAL_INV, SEND_WITH_INV): the register / use /
// invalidate cycle with key-byte rotation, memory of several chunks used
// by remote WRITE and READ and by local SEND and receive across chunk
// boundaries, and the rules of rxe_reg_fast_mr and ib_map_mr_sg.

import (
	"bytes"
	"errors"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// pages returns n page-aligned chunks of pageSize bytes, each from its
// own allocation, so that no two are contiguous in memory; the last is
// cut to last bytes when last > 0.
func pages(n, pageSize, last int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 2*pageSize)
		off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & (pageSize - 1)
		out[i] = b[off : off+pageSize : off+pageSize]
	}
	if last > 0 {
		out[n-1] = out[n-1][:last]
	}
	return out
}

// concat returns the chunks' bytes in order.
func concat(chunks [][]byte) []byte {
	var out []byte
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}

const fastAccess = ibv.AccessLocalWrite | ibv.AccessRemoteWrite | ibv.AccessRemoteRead

// fastReg maps chunks into mr, rotates its key and registers it on s's QP
// with access, waiting for the REG_MR completion.
func fastReg(t testing.TB, s *mside, mr *verbs.MR, chunks [][]byte, access ibv.Access) {
	t.Helper()
	n, err := mr.MapSG(chunks, 4096)
	must(t, err)
	if n != len(chunks) {
		t.Fatalf("MapSG mapped %d of %d chunks", n, len(chunks))
	}
	old := mr.RKey()
	must(t, mr.UpdateFastRegKey(verbs.IncKey(old)))
	if k := mr.RKey(); k>>8 != old>>8 || k == old || mr.LKey() != k {
		t.Fatalf("UpdateFastRegKey: keys %#x/%#x (was %#x), want the same index with the next key byte", mr.LKey(), k, old)
	}
	mpost(t, s.qp, mr.RegWR(50, ibv.SendSignaled, access))
	wc := mone(t, s, 50, ibv.WCSuccess, ibv.WCRegMR)
	if wc.ByteLen != 0 {
		t.Errorf("REG_MR byte_len %d, want 0", wc.ByteLen)
	}
}

// TestFastRegCycle: a fast-reg MR grants nothing until registered; once
// registered over three discontiguous chunks, remote WRITEs and READs and
// local SENDs and receives across the chunk boundaries move the right
// bytes; LOCAL_INV frees it (nothing written afterwards); it can be
// mapped again and registered under the next key, the old key dead.
func TestFastRegCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		mr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 8)
		must(t, err)
		chunks := pages(3, 4096, 1000)

		// FREE: a WRITE with its key is refused.
		func() {
			a2, b2 := mlink(t, a, b, a.pd, b.pd, mopts{})
			_ = b2
			mpost(t, a2, mwrite(a, 1, 0, 8, mr.RKey(), 0x1000))
			mone(t, a, 1, ibv.WCRemAccessErr, ibv.WCRDMAWrite)
		}()

		fastReg(t, b, mr, chunks, fastAccess)
		if mr.Addr() != uint64(uintptr(unsafe.Pointer(&chunks[0][0]))) || mr.Len() != 2*4096+1000 {
			t.Errorf("MR after MapSG: addr %#x len %d, want the first chunk's address and %d", mr.Addr(), mr.Len(), 2*4096+1000)
		}
		// Remote WRITE across both boundaries, then READ it all back.
		fill(a.buf[:8192], 11)
		mpost(t, a.qp, mwrite(a, 2, 0, 6000, mr.RKey(), mr.Addr()+3000))
		mone(t, a, 2, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "WRITE across chunks", concat(chunks)[3000:9000], a.buf[:6000])
		mpost(t, a.qp, mread(a, 3, 16384, 2*4096+1000, mr.RKey(), mr.Addr()))
		mone(t, a, 3, ibv.WCSuccess, ibv.WCRDMARead)
		checkBytes(t, "READ of the whole MR", a.buf[16384:16384+2*4096+1000], concat(chunks))

		// Local access across a boundary: b sends from the fast MR, and
		// receives into it.
		postRecvMS(t, a, 60, 32768, 4096)
		mpost(t, b.qp, ibv.SendWR{WRID: 4, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{{Addr: mr.Addr() + 4000, Length: 300, LKey: mr.LKey()}}})
		mone(t, b, 4, ibv.WCSuccess, ibv.WCSend)
		mone(t, a, 60, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "SEND from across chunks", a.buf[32768:32768+300], concat(chunks)[4000:4300])
		must2(t)(b.qp.PostRecv(ibv.RecvWR{WRID: 61, SGList: []ibv.SGE{{Addr: mr.Addr() + 8000, Length: 500, LKey: mr.LKey()}}}))
		fill(a.buf[40000:40400], 77)
		mpost(t, a.qp, ibv.SendWR{WRID: 5, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{a.mr.SGE(40000, 400)}})
		mone(t, a, 5, ibv.WCSuccess, ibv.WCSend)
		mone(t, b, 61, ibv.WCSuccess, ibv.WCRecv)
		checkBytes(t, "receive into across chunks", concat(chunks)[8000:8400], a.buf[40000:40400])

		// LOCAL_INV: FREE again; a WRITE writes nothing.
		old := mr.RKey()
		mpost(t, b.qp, ibv.SendWR{WRID: 6, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: old})
		mone(t, b, 6, ibv.WCSuccess, ibv.WCLocalInv)
		snap := concat(chunks)
		fill(a.buf[:64], 1)
		mpost(t, a.qp, mwrite(a, 7, 0, 64, old, mr.Addr()))
		mone(t, a, 7, ibv.WCRemAccessErr, ibv.WCRDMAWrite)
		settle(time.Millisecond)
		if !bytes.Equal(concat(chunks), snap) {
			t.Errorf("WRITE after LOCAL_INV wrote: %s", firstDiff(concat(chunks), snap))
		}

		// Map and register again on a fresh pair: the old key is dead, the
		// new one works.
		a2, b2 := mlink(t, a, b, a.pd, b.pd, mopts{})
		chunks2 := pages(2, 4096, 0)
		bb := &mside{dev: b.dev, pd: b.pd, cq: b.cq, qp: b2, mr: b.mr, buf: b.buf}
		fastReg(t, bb, mr, chunks2, fastAccess)
		if mr.RKey() != verbs.IncKey(old) {
			t.Errorf("second registration key %#x, want %#x", mr.RKey(), verbs.IncKey(old))
		}
		fill(a.buf[:64], 2)
		mpost(t, a2, mwrite(a, 8, 0, 64, mr.RKey(), mr.Addr()+4090))
		mone(t, a, 8, ibv.WCSuccess, ibv.WCRDMAWrite)
		checkBytes(t, "WRITE after re-registration", concat(chunks2)[4090:4154], a.buf[:64])
		mpost(t, a2, mwrite(a, 9, 0, 8, old, mr.Addr()))
		mone(t, a, 9, ibv.WCRemAccessErr, ibv.WCRDMAWrite)
		must(t, mr.Dereg())
	})
}

// TestFastRegSendInv: a peer's SEND with Invalidate of a fast-reg MR's
// rkey frees it (IBV_WC_WITH_INV, the rkey in the completion); a second
// one of the now FREE region succeeds too (rxe invalidates a FREE MR
// without complaint); an unknown rkey is a class J error.
func TestFastRegSendInv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		mr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 4)
		must(t, err)
		chunks := pages(1, 4096, 0)
		fastReg(t, b, mr, chunks, fastAccess)
		rkey := mr.RKey()
		postRecvMS(t, b, 70, 0, 64)
		inv := func(wrid uint64, key uint32) {
			mpost(t, a.qp, ibv.SendWR{WRID: wrid, Opcode: ibv.WRSendWithInv, Flags: ibv.SendSignaled,
				SGList: []ibv.SGE{a.mr.SGE(0, 4)}, InvRKey: key})
			mone(t, a, wrid, ibv.WCSuccess, ibv.WCSend)
		}
		inv(1, rkey)
		wc := mone(t, b, 70, ibv.WCSuccess, ibv.WCRecv)
		if wc.Flags&ibv.WCWithInv == 0 || wc.Imm != rkey {
			t.Errorf("receive: %+v, want WITH_INV and rkey %#x", wc, rkey)
		}
		snap := bytes.Clone(chunks[0])
		mpost(t, a.qp, mwrite(a, 2, 0, 8, rkey, mr.Addr()))
		// The WRITE fails and a's QP goes to ERR; use a second pair.
		mone(t, a, 2, ibv.WCRemAccessErr, ibv.WCRDMAWrite)
		if !bytes.Equal(chunks[0], snap) {
			t.Errorf("WRITE after SEND_WITH_INV wrote")
		}
		a2, b2 := mlink(t, a, b, a.pd, b.pd, mopts{})
		must2(t)(b2.PostRecv(ibv.RecvWR{WRID: 80, SGList: []ibv.SGE{b.mr.SGE(8192, 64)}}))
		must2(t)(b2.PostRecv(ibv.RecvWR{WRID: 81, SGList: []ibv.SGE{b.mr.SGE(9000, 64)}}))
		mpost(t, a2, ibv.SendWR{WRID: 3, Opcode: ibv.WRSendWithInv, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 4)}, InvRKey: rkey})
		mone(t, a, 3, ibv.WCSuccess, ibv.WCSend)
		mone(t, b, 80, ibv.WCSuccess, ibv.WCRecv)
		mpost(t, a2, ibv.SendWR{WRID: 4, Opcode: ibv.WRSendWithInv, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 4)}, InvRKey: rkey ^ 0x55})
		mone(t, a, 4, ibv.WCSuccess, ibv.WCSend)
		mone(t, b, 81, ibv.WCRemInvReqErr, ibv.WCRecv)
		if s := b2.State(); s != ibv.QPStateErr {
			t.Errorf("QP after a failed SEND_WITH_INV: %v, want ERR", s)
		}
		evs, _ := b.dev.AsyncEvents()
		if !hasEvent(evs, ibv.EventQPFatal, b2.QPN()) {
			t.Errorf("async events %+v, want QP_FATAL for %#x", evs, b2.QPN())
		}
	})
}

// TestFastRegRules: the refusals of ib_alloc_mr, ib_map_mr_sg and
// rxe_reg_fast_mr. A refused REG_MR completes with LOC_QP_OP_ERR and
// moves the QP to ERR; the region stays as it was.
func TestFastRegRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		_, err := b.pd.AllocMR(verbs.MRTypeMemReg, 0)
		apiWantErr(t, "AllocMR of 0 pages", err, "", verbs.EINVAL)
		_, err = b.pd.AllocMR(verbs.MRTypeMemReg, b.dev.QueryDevice().MaxFastRegPageLen+1)
		apiWantErr(t, "AllocMR above max_fast_reg_page_list_len", err, "", verbs.EINVAL)
		_, err = b.pd.AllocMR(1, 4)
		apiWantErr(t, "AllocMR of type SG_GAPS", err, "MEM_REG", verbs.EOPNOTSUPP) // deliberately unsupported: TestUnsupported
		_, err = b.mr.MapSG(pages(1, 4096, 0), 4096)
		apiWantErr(t, "MapSG of an ordinary MR", err, "", verbs.EINVAL)
		apiWantErr(t, "UpdateFastRegKey of an ordinary MR", b.mr.UpdateFastRegKey(1), "fast-registration", verbs.EINVAL)

		mr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 2)
		must(t, err)
		_, err = mr.MapSG(pages(1, 4096, 0), 1000)
		apiWantErr(t, "MapSG with page size 1000", err, "", verbs.EINVAL)
		// A second element not starting on a page boundary ends the map.
		p := pages(2, 4096, 0)
		if n, err := mr.MapSG([][]byte{p[0], p[1][8:]}, 4096); err != nil || n != 1 {
			t.Errorf("MapSG of an unaligned second element: %d, %v; want 1 mapped", n, err)
		}
		// Three pages do not fit two.
		if n, err := mr.MapSG(pages(3, 4096, 0), 4096); err != nil || n != 2 {
			t.Errorf("MapSG of 3 pages into 2: %d, %v; want 2", n, err)
		}
		_, err = b.dev.MapMRSG(mr, pages(5, 4096, 0)[:1], nil, 4096)
		must(t, err)
		fastReg(t, b, mr, pages(1, 4096, 0), fastAccess)
		_, err = mr.MapSG(pages(1, 4096, 0), 4096)
		apiWantErr(t, "MapSG of a registered MR", err, "", verbs.EBUSY)

		type tc struct {
			name string
			wr   func(qp *verbs.QP) ibv.SendWR
			pd2  bool // post on a QP of another PD
		}
		tcs := []tc{
			{"REG_MR of a registered MR", func(*verbs.QP) ibv.SendWR { return mr.RegWR(51, ibv.SendSignaled, fastAccess) }, false},
			{"REG_MR of a QP of another PD", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				_, err = m.MapSG(pages(1, 4096, 0), 4096)
				must(t, err)
				return m.RegWR(51, ibv.SendSignaled, fastAccess)
			}, true},
			{"REG_MR changing the index", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				_, err = m.MapSG(pages(1, 4096, 0), 4096)
				must(t, err)
				w := m.RegWR(51, ibv.SendSignaled, fastAccess)
				w.Reg.Key += 0x100
				return w
			}, false},
			{"REG_MR longer than mapped", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				_, err = m.MapSG(pages(1, 4096, 100), 4096)
				must(t, err)
				w := m.RegWR(51, ibv.SendSignaled, fastAccess)
				w.Reg.Length = 200
				return w
			}, false},
			{"REG_MR of nothing mapped", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				return m.RegWR(51, ibv.SendSignaled, fastAccess)
			}, false},
			{"REG_MR with REMOTE_WRITE but not LOCAL_WRITE", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				_, err = m.MapSG(pages(1, 4096, 0), 4096)
				must(t, err)
				return m.RegWR(51, ibv.SendSignaled, ibv.AccessRemoteWrite)
			}, false},
			{"REG_MR of a deregistered MR", func(*verbs.QP) ibv.SendWR {
				m, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
				must(t, err)
				_, err = m.MapSG(pages(1, 4096, 0), 4096)
				must(t, err)
				w := m.RegWR(51, ibv.SendSignaled, fastAccess)
				must(t, m.Dereg())
				return w
			}, false},
			{"LOCAL_INV of an ordinary MR", func(*verbs.QP) ibv.SendWR {
				return ibv.SendWR{WRID: 51, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: b.mr.RKey()}
			}, false},
			{"LOCAL_INV of an unknown key", func(*verbs.QP) ibv.SendWR {
				return ibv.SendWR{WRID: 51, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: mr.RKey() ^ 0x80}
			}, false},
		}
		for _, c := range tcs {
			pd := b.pd
			if c.pd2 {
				pd, err = b.dev.AllocPD()
				must(t, err)
			}
			_, q := mlink(t, a, b, a.pd, pd, mopts{})
			w := c.wr(q)
			op := ibv.WCRegMR
			if w.Opcode == ibv.WRLocalInv {
				op = ibv.WCLocalInv
			}
			mpost(t, q, w)
			wc := waitWC(t, b.cq, 1)[0]
			if wc.WRID != 51 || wc.Status != ibv.WCLocQPOpErr || wc.Opcode != op {
				t.Errorf("%s: completion %+v, want LOC_QP_OP_ERR", c.name, wc)
			}
			if s := q.State(); s != ibv.QPStateErr {
				t.Errorf("%s: QP state %v, want ERR", c.name, s)
			}
		}
		// The first MR is still registered and usable.
		mpost(t, a.qp, mwrite(a, 9, 0, 8, mr.RKey(), mr.Addr()))
		mone(t, a, 9, ibv.WCSuccess, ibv.WCRDMAWrite)
	})
}

// TestFastRegChain: REG_MR, LOCAL_INV and REG_MR again, each under the
// next key, posted in one call, run in order (the second REG_MR finds the
// MR by itself, not by the key the first one gave it).
func TestFastRegChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		mr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
		must(t, err)
		chunk := pages(1, 4096, 0)
		_, err = mr.MapSG(chunk, 4096)
		must(t, err)
		must(t, mr.UpdateFastRegKey(verbs.IncKey(mr.RKey())))
		k1 := mr.RKey()
		r1 := mr.RegWR(1, ibv.SendSignaled, fastAccess)
		inv := ibv.SendWR{WRID: 2, Opcode: ibv.WRLocalInv, Flags: ibv.SendSignaled, InvRKey: k1}
		must(t, mr.UpdateFastRegKey(verbs.IncKey(k1)))
		k2 := mr.RKey()
		r2 := mr.RegWR(3, ibv.SendSignaled, ibv.AccessLocalWrite|ibv.AccessRemoteRead)
		mpost(t, b.qp, r1, inv, r2)
		got := waitWC(t, b.cq, 3)
		wantWC(t, got[0], 1, ibv.WCSuccess, ibv.WCRegMR)
		wantWC(t, got[1], 2, ibv.WCSuccess, ibv.WCLocalInv)
		wantWC(t, got[2], 3, ibv.WCSuccess, ibv.WCRegMR)
		copy(chunk[0], "chained")
		mpost(t, a.qp, mread(a, 4, 0, 7, k2, mr.Addr()))
		mone(t, a, 4, ibv.WCSuccess, ibv.WCRDMARead)
		if string(a.buf[:7]) != "chained" {
			t.Errorf("READ under the second key: %q", a.buf[:7])
		}
		// The second registration is read-only.
		mrefusedWrite(t, a, b, k2, mr.Addr(), ibv.WCRemAccessErr)
	})
}

// TestMapSGOffset: ib_map_mr_sg's sg_offset. An element larger than the
// region's pages is mapped in part, as ib_sg_to_pages maps it (up to the
// start of the last page set), and sg_offset says where it stopped; the
// next region carries on from there, and a READ through both registered
// regions returns the element's bytes in order. MapSG still refuses the
// element whole (ENOMEM), and an offset beyond the first element is
// EINVAL. (Before, there was no sg_offset: only the ENOMEM.)
func TestMapSGOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, b := mpair(t, f, mopts{})
		// One element of three contiguous pages.
		raw := make([]byte, 4*4096)
		off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & 4095
		elem := raw[off : off+3*4096]
		fill(elem, 9)
		mr1, err := b.pd.AllocMR(verbs.MRTypeMemReg, 2)
		must(t, err)
		mr2, err := b.pd.AllocMR(verbs.MRTypeMemReg, 2)
		must(t, err)
		if _, err := mr1.MapSG([][]byte{elem}, 4096); !errors.Is(err, verbs.ENOMEM) {
			t.Errorf("MapSG of 3 pages into 2: %v, want ENOMEM", err)
		}
		sgOff := uint32(3 * 4096)
		if _, err := mr1.MapSGOffset([][]byte{elem}, &sgOff, 4096); !errors.Is(err, verbs.EINVAL) {
			t.Errorf("MapSGOffset at the end of the element: %v, want EINVAL", err)
		}
		sgOff = 0
		n, err := b.dev.MapMRSG(mr1, [][]byte{elem}, &sgOff, 4096)
		must(t, err)
		if n != 0 || sgOff != 4096 || mr1.Addr() != addrOf(elem) || mr1.Len() != 4096 {
			t.Fatalf("first region: %d elements, stopped at %d, mapped %#x+%d; want 0, 4096, %#x+4096",
				n, sgOff, mr1.Addr(), mr1.Len(), addrOf(elem))
		}
		n, err = mr2.MapSGOffset([][]byte{elem}, &sgOff, 4096)
		must(t, err)
		if n != 1 || sgOff != 0 || mr2.Addr() != addrOf(elem)+4096 || mr2.Len() != 2*4096 {
			t.Fatalf("second region: %d elements, stopped at %d, mapped %#x+%d; want 1, 0, %#x+8192",
				n, sgOff, mr2.Addr(), mr2.Len(), addrOf(elem)+4096)
		}
		var got []byte
		for i, mr := range []*verbs.MR{mr1, mr2} {
			must(t, mr.UpdateFastRegKey(verbs.IncKey(mr.RKey())))
			mpost(t, b.qp, mr.RegWR(uint64(60+i), sig, fastAccess))
			mone(t, b, uint64(60+i), ibv.WCSuccess, ibv.WCRegMR)
			mpost(t, a.qp, ibv.SendWR{WRID: uint64(70 + i), Opcode: ibv.WRRDMARead, Flags: sig,
				SGList: []ibv.SGE{a.mr.SGE(0, int(mr.Len()))}, RemoteAddr: mr.Addr(), RKey: mr.RKey()})
			mone(t, a, uint64(70+i), ibv.WCSuccess, ibv.WCRDMARead)
			got = append(got, a.buf[:mr.Len()]...)
		}
		checkBytes(t, "the element read through both regions", got, elem)
	})
}
