package verbs_test

// Soaks of every transport and operation over the soak's lossy fabric
// (soak_test.go: 10% loss, 10% reordering, 5% duplication, both ways),
// seeded by -soak.seed (logged):
//
//   - TestSoakRCAllOps: RC with every operation softnic carries: the RC
//     soak's SENDs, WRITEs (with and without immediate), READs and
//     atomics, plus SEND WITH INVALIDATE, ATOMIC WRITE and FLUSH.
//   - TestSoakUD: UD SENDs with and without immediate between four QPs:
//     every datagram received is intact and meant for its QP, and the
//     counts add up: what a device was delivered, it read, and what it
//     read it completed or counted as dropped.
//   - TestSoakSRQ: RC, UC and UD QPs sharing one SRQ: the RC messages
//     all arrive, once each and in order per QP; the UC and UD ones that
//     complete are intact.
//
// TestSoakUC (soak_test.go) covers UC SENDs and WRITEs with and without
// immediate data.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// soakAllOpcodes are TestSoakRCAllOps's operations, drawn uniformly.
var soakAllOpcodes = []ibv.WROpcode{
	ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm,
	ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite, ibv.WRFlush,
}

// allLane is an RC soak lane (soak_test.go) whose workload also has the
// operations the RC soak leaves out. Its responder's atom region holds
// the fetch-add counter at 0, the CAS word at 8 and the ATOMIC WRITE word
// at 16.
type allLane struct {
	*lane
	invKey uint32 // rkey of the responder's fast-reg MR: SEND_WITH_INV's
	atomW  uint64 // the ATOMIC WRITE word, as it must end
}

// TestSoakRCAllOps sends 6,000 work requests of every RC operation, 1 B
// to 256 KiB, on four QP pairs (two each way) over the lossy fabric, and
// checks each as TestSoakRC does; besides: a SEND WITH INVALIDATE's
// receive reports the invalidated rkey, a FLUSH completes with its
// length, and the ATOMIC WRITE word ends at the last value written.
func TestSoakRCAllOps(t *testing.T) {
	const (
		total = 6000
		lanes = 4
	)
	seed := seedFor(t)
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f := fabric.New(fabric.Config{Seed: int64(seed)})
		defer f.Close()
		f.SetImpairment(soakRCImpairment) // RC retries: see TestSoakRCRetryBudget

		rng := rand.New(rand.NewPCG(seed, 0xa11))
		src := make([]byte, 1<<20)
		for i := 0; i < len(src); i += 8 {
			binary.LittleEndian.PutUint64(src[i:], rng.Uint64())
		}
		inv := make([]byte, len(src))
		for i := range src {
			inv[i] = ^src[i]
		}
		devs := [2]*soakDev{
			newSoakDev(t, f, netip.MustParseAddr("10.0.0.1"), src),
			newSoakDev(t, f, netip.MustParseAddr("10.0.0.2"), src),
		}
		o := pairOpts{mtu: ibv.MTU4096, timeout: 14, retry: 7, rnr: 7}
		o.defaults()
		o.access |= ibv.AccessFlushGlobal
		ls := make([]*allLane, lanes)
		for i := range ls {
			a, b := devs[i%2], devs[1-i%2]
			l := &allLane{lane: &lane{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), src: src, inv: inv,
				mtu: o.mtu.Bytes(), maxSize: 256 << 10, window: 16, byOp: map[ibv.WROpcode]int{}}}
			l.req = newSoakSide(t, a, o, l.window*8)
			l.resp = newSoakSide(t, b, o, 24)
			reqPSN, respPSN := uint32(1<<24-1-l.rng.IntN(4096)), l.rng.Uint32()&(1<<24-1)
			connect(t, &end{dev: a.dev, qp: l.req.qp}, &end{dev: b.dev, qp: l.resp.qp}, o, reqPSN, respPSN)
			connect(t, &end{dev: b.dev, qp: l.resp.qp}, &end{dev: a.dev, qp: l.req.qp}, o, respPSN, reqPSN)
			must(t, l.resp.qp.Modify(&ibv.QPAttr{AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead |
				ibv.AccessRemoteAtomic | ibv.AccessFlushGlobal}, ibv.QPAttrAccessFlags))
			// The SEND_WITH_INVs' target: a fast-reg MR the responder
			// registers on its QP. The first invalidation frees it; rxe
			// (and softnic) invalidate a free MR again without complaint.
			fr, err := b.pd.AllocMR(verbs.MRTypeMemReg, 1)
			must(t, err)
			must2(t)(fr.MapSG(pages(1, 4096, 0), 4096))
			must(t, fr.UpdateFastRegKey(verbs.IncKey(fr.RKey())))
			must2(t)(l.resp.qp.PostSend(fr.RegWR(1<<63, ibv.SendSignaled, ibv.AccessLocalWrite|ibv.AccessRemoteWrite)))
			if wc := waitWC(t, l.resp.cq, 1)[0]; wc.Status != ibv.WCSuccess || wc.Opcode != ibv.WCRegMR {
				t.Fatalf("lane %d: REG_MR completion %+v", i, wc)
			}
			l.invKey = fr.RKey()
			ls[i] = l
		}

		var wg sync.WaitGroup
		errs := make([]error, lanes)
		for i, l := range ls {
			wg.Go(func() { errs[i] = l.run(total / lanes) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			return
		}
		byOp := map[ibv.WROpcode]int{}
		var volume int64
		for _, l := range ls {
			w := l.resp.atom.Buf()
			if got := binary.NativeEndian.Uint64(w); got != l.counter {
				t.Errorf("lane %d: counter %d, want the sum of the adds %d", l.id, got, l.counter)
			}
			if got := binary.NativeEndian.Uint64(w[8:]); got != l.cas {
				t.Errorf("lane %d: CAS word %#x, want the last swap %#x", l.id, got, l.cas)
			}
			if got := binary.NativeEndian.Uint64(w[16:]); got != l.atomW {
				t.Errorf("lane %d: ATOMIC WRITE word %#x, want the last value written %#x", l.id, got, l.atomW)
			}
			for op, n := range l.byOp {
				byOp[op] += n
			}
			volume += l.bytes
		}
		for _, op := range soakAllOpcodes {
			if byOp[op] == 0 {
				t.Errorf("no %v in %d messages", op, total)
			}
		}
		st := f.Stats()
		ca, cb := devs[0].dev.Counters(), devs[1].dev.Counters()
		t.Logf("%d messages, %.1f MiB of payload, by opcode %v", total, float64(volume)/(1<<20), byOp)
		t.Logf("fabric: sent %d, delivered %d, lost %d, reordered %d, duplicated %d",
			st.Sent.Packets, st.Delivered.Packets, st.DropImpairment.Packets, st.Reordered.Packets, st.Duplicated.Packets)
		t.Logf("retransmits %d, timeouts %d, duplicate requests %d, fake time %v",
			ca.Retransmits+cb.Retransmits, ca.Timeouts+cb.Timeouts,
			ca.DuplicateRequest+cb.DuplicateRequest, time.Since(t0))
	})
	t.Logf("wall time %v", time.Since(start).Round(time.Millisecond))
}

// run is lane.run with the lane's own post and complete.
func (l *allLane) run(n int) error {
	wc := make([]ibv.WorkCompletion, 32)
	progress := time.Now()
	for posted := 0; posted < n || len(l.ops) > 0; {
		for posted < n && len(l.ops) < l.window {
			ok, err := l.post()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			posted++
		}
		got := 0
		for _, s := range []*soakSide{l.req, l.resp} {
			k := s.cq.Poll(wc)
			for i := range wc[:k] {
				if err := l.complete(s, &wc[i]); err != nil {
					return err
				}
			}
			got += k
		}
		l.retire()
		if got > 0 {
			progress = time.Now()
			continue
		}
		if time.Since(progress) > time.Minute {
			return fmt.Errorf("lane %d: no completion for a minute of fake time; %d outstanding, oldest %+v; requester QP %v, responder QP %v",
				l.id, len(l.ops), *l.ops[0], l.req.qp.State(), l.resp.qp.State())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// post posts the lane's next work request, as lane.post does, from
// soakAllOpcodes.
func (l *allLane) post() (bool, error) {
	op := soakAllOpcodes[l.rng.IntN(len(soakAllOpcodes))]
	w := &soakOp{seq: l.nextSeq, op: op, bufOff: -1}
	wr := ibv.SendWR{WRID: w.seq, Opcode: op, Flags: ibv.SendSignaled}
	slot := int(w.seq%uint64(l.window)) * 8
	switch op {
	case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		w.n = 8
		wr.SGList = []ibv.SGE{l.req.atom.SGE(slot, 8)}
		wr.RKey = l.resp.atom.RKey()
		if op == ibv.WRAtomicFetchAndAdd {
			wr.RemoteAddr = l.resp.atom.Addr()
			wr.CompareAdd = l.rng.Uint64() >> l.rng.IntN(64)
			w.wantOrig = l.counter
			l.counter += wr.CompareAdd
		} else {
			wr.RemoteAddr = l.resp.atom.Addr() + 8
			w.wantOrig = l.cas
			wr.CompareAdd, wr.Swap = l.cas, l.rng.Uint64()
			if l.rng.IntN(4) == 0 {
				wr.CompareAdd = l.cas ^ (1 << l.rng.IntN(64))
				l.casFailed++
			} else {
				l.cas = wr.Swap
			}
		}
		binary.NativeEndian.PutUint64(l.req.atom.Buf()[slot:], ^w.wantOrig)
	case ibv.WRAtomicWrite:
		// The slot holds the value until the WR is retired.
		w.n = 8
		l.atomW = l.rng.Uint64()
		binary.NativeEndian.PutUint64(l.req.atom.Buf()[slot:], l.atomW)
		wr.SGList = []ibv.SGE{l.req.atom.SGE(slot, 8)}
		wr.RemoteAddr, wr.RKey = l.resp.atom.Addr()+16, l.resp.atom.RKey()
	case ibv.WRFlush:
		w.n = soakSize(l.rng, l.mtu, soakArena)
		wr.FlushType, wr.FlushLevel, wr.FlushLen = verbs.FlushGlobal, verbs.FlushRange, uint32(w.n)
		if l.rng.IntN(4) == 0 {
			wr.FlushLevel = verbs.FlushMR
		}
		wr.RemoteAddr = l.resp.arena.Addr() + uint64(l.rng.IntN(soakArena-w.n+1))
		wr.RKey = l.resp.arena.RKey()
	default:
		w.n = soakSize(l.rng, l.mtu, l.maxSize)
		w.srcOff = l.rng.IntN(len(l.src) - w.n + 1)
		w.buf = l.resp
		if op == ibv.WRRDMARead {
			w.buf = l.req
		}
		off, ok := w.buf.fifo.alloc(w.n)
		if !ok {
			return false, nil
		}
		w.bufOff = off
		copy(w.buf.arena.Buf()[off:off+w.n], l.inv[w.srcOff:])
		if op == ibv.WRRDMARead {
			wr.SGList = splitSGE(l.rng, l.req.arena, off, w.n)
			wr.RemoteAddr, wr.RKey = l.resp.d.src.Addr()+uint64(w.srcOff), l.resp.d.src.RKey()
		} else {
			wr.SGList = splitSGE(l.rng, l.req.d.src, w.srcOff, w.n)
			wr.RemoteAddr, wr.RKey = l.resp.arena.Addr()+uint64(off), l.resp.arena.RKey()
		}
		switch op {
		case ibv.WRSendWithImm, ibv.WRRDMAWriteWithImm:
			w.imm = l.rng.Uint32()
			wr.Imm = w.imm
		case ibv.WRSendWithInv:
			wr.InvRKey = l.invKey
		}
		w.needRecv = op == ibv.WRSend || op == ibv.WRSendWithImm || op == ibv.WRSendWithInv ||
			op == ibv.WRRDMAWriteWithImm
		if w.needRecv {
			rwr := ibv.RecvWR{WRID: w.seq}
			if op != ibv.WRRDMAWriteWithImm {
				rwr.SGList = splitSGE(l.rng, l.resp.arena, off, w.n)
			}
			if _, err := l.resp.qp.PostRecv(rwr); err != nil {
				return false, fmt.Errorf("lane %d: post receive %d: %w", l.id, w.seq, err)
			}
		}
		l.bytes += int64(w.n)
	}
	if _, err := l.req.qp.PostSend(wr); err != nil {
		return false, fmt.Errorf("lane %d: post %v %d: %w", l.id, op, w.seq, err)
	}
	l.nextSeq++
	l.byOp[op]++
	l.ops = append(l.ops, w)
	return true, nil
}

// complete checks a completion of an operation the RC soak has, with
// lane.complete, and of the others here.
func (l *allLane) complete(s *soakSide, wc *ibv.WorkCompletion) error {
	var w *soakOp
	for _, o := range l.ops {
		if s == l.req && !o.sent || s == l.resp && o.needRecv && !o.recvd {
			w = o
			break
		}
	}
	if w == nil || slices.Contains(soakOpcodes, w.op) {
		return l.lane.complete(s, wc)
	}
	side := "send"
	if s == l.resp {
		side = "receive"
	}
	if wc.Status != ibv.WCSuccess || wc.WRID != w.seq {
		return fmt.Errorf("lane %d: %s completion %+v, want WR %d (%v, %d bytes) to succeed", l.id, side, *wc, w.seq, w.op, w.n)
	}
	if s == l.resp { // SEND_WITH_INV
		w.recvd = true
		if wc.Opcode != ibv.WCRecv || wc.ByteLen != uint32(w.n) || wc.Flags&(ibv.WCWithInv|ibv.WCWithImm) != ibv.WCWithInv ||
			wc.Imm != l.invKey {
			return fmt.Errorf("lane %d: receive completion %+v for SEND_WITH_INV of %d bytes invalidating %#x", l.id, *wc, w.n, l.invKey)
		}
		return l.checkData(w)
	}
	w.sent = true
	want := map[ibv.WROpcode]ibv.WCOpcode{ibv.WRSendWithInv: ibv.WCSend, ibv.WRFlush: ibv.WCFlush,
		ibv.WRAtomicWrite: ibv.WCAtomicWrite}[w.op]
	if wc.Opcode != want || wc.ByteLen != uint32(w.n) {
		return fmt.Errorf("lane %d: send completion %+v for %v of %d bytes, want opcode %d", l.id, *wc, w.op, w.n, want)
	}
	return nil
}

// udSoakDev is a device of the UD soak: its fabric endpoint (for the
// delivered count), two UD QPs sharing a CQ, and their receive buffers.
type udSoakDev struct {
	ep   *fabric.Endpoint
	dev  *verbs.Device
	pd   *verbs.PD
	cq   *verbs.CQ
	qps  [2]*verbs.QP
	src  *verbs.MR // every message's payload comes from here, after its id
	hdr  *verbs.MR // the ids: one 8-byte slot per message, reused after udHdrs
	rbuf *verbs.MR // receive buffers: udRecvs per QP
	recv int       // receive completions
	sent int       // datagrams sent
}

const (
	udRecvs   = 128                      // receive buffers per UD QP
	udSlot    = udMaxSize + verbs.GRHLen // the GRH area, then the payload
	udMaxSize = 4096                     // the port MTU
	udQKey    = 0x5aac
	udHdrs    = 4096 // id slots, far more than a round
)

// udMsg is a UD soak message: its id (8 bytes, little-endian), then
// n-8 bytes of the source from srcOff.
type udMsg struct {
	n      int
	srcOff int
	imm    uint32
	withIm bool
	to     uint32 // destination QPN
	got    int    // times received
}

// TestSoakUD sends 8,192 UD SENDs, half with immediate data, of 8 B to
// the port MTU, between two QPs on each of two devices over the lossy
// fabric. Every receive completion must be intact (a message of the
// soak, for the QP it completed on, with its length, immediate and
// bytes), at most twice (the fabric duplicates a datagram once at most);
// every send completes successfully; and the counts add up per device:
// the datagrams the fabric delivered are the ones the NIC read, and those
// are its receive completions plus its counted drops.
func TestSoakUD(t *testing.T) {
	const (
		round = 64 // messages per sending QP and round
		total = 32 * 4 * round
	)
	seed := seedFor(t)
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: int64(seed)})
		defer f.Close()
		f.SetImpairment(soakImpairment)
		rng := rand.New(rand.NewPCG(seed, 0x0d))
		src := make([]byte, 1<<20)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		var devs [2]*udSoakDev
		for i := range devs {
			devs[i] = newUDSoakDev(t, f, netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)}), src)
		}
		ahs := [2]*verbs.AH{}
		for i, d := range devs {
			var err error
			ahs[i], err = d.pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1,
				GRH: ibv.GlobalRoute{DGID: devs[1-i].dev.Addr()}})
			must(t, err)
		}
		msgs := map[uint64]*udMsg{}
		byQPN := map[uint32]*udSoakDev{}
		for _, d := range devs {
			for _, qp := range d.qps {
				byQPN[qp.QPN()] = d
			}
		}
		wc := make([]ibv.WorkCompletion, 256)
		id := uint64(0)
		for sent := 0; sent < total; {
			// Each QP sends a round to random QPs of the other device.
			for di, d := range devs {
				for _, qp := range d.qps {
					for range round {
						// soakSize's edge sizes go past the port MTU: such a
						// message completes unsent (IBTA C10-93.1.1).
						m := &udMsg{n: min(max(8, soakSize(rng, udMaxSize, udMaxSize)), udMaxSize), withIm: rng.IntN(2) == 0,
							to: devs[1-di].qps[rng.IntN(2)].QPN()}
						m.srcOff = rng.IntN(len(src) - m.n + 9)
						id++
						h := int(id%udHdrs) * 8
						binary.LittleEndian.PutUint64(d.hdr.Buf()[h:], id)
						m.imm = uint32(id) * 2654435761
						msgs[id] = m
						sgl := append([]ibv.SGE{d.hdr.SGE(h, 8)}, splitSGE(rng, d.src, m.srcOff, m.n-8)...)
						wr := ibv.SendWR{WRID: id, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
							SGList: sgl, AH: ahs[di], RemoteQPN: m.to, RemoteQKey: udQKey}
						if m.withIm {
							wr.Opcode, wr.Imm = ibv.WRSendWithImm, m.imm
						}
						if _, err := qp.PostSend(wr); err != nil {
							t.Fatalf("post UD SEND %d: %v", id, err)
						}
						d.sent++
						sent++
					}
				}
			}
			// The round's datagrams land (reordering holds them back a
			// millisecond at most) and its sends complete.
			time.Sleep(5 * time.Millisecond)
			for _, d := range devs {
				if err := d.poll(t, wc, msgs, src); err != nil {
					t.Fatal(err)
				}
			}
		}
		settle(10 * time.Millisecond)
		distinct, dups := 0, 0
		for _, m := range msgs {
			if m.got > 0 {
				distinct++
			}
			if m.got > 1 {
				dups++
			}
		}
		for i, d := range devs {
			c := d.dev.Counters()
			st := d.ep.Stats()
			drops := c.DropMalformed + c.ICRCErr + c.DropAddr + c.DropPKey + c.DropNoQP +
				c.DropQueueFull + c.DropQKey + c.DropLength + c.DropNoRecvWQE + c.DropState
			if st.Delivered.Packets != c.RcvdPkts {
				t.Errorf("device %d: the fabric delivered %d datagrams, the NIC read %d", i, st.Delivered.Packets, c.RcvdPkts)
			}
			if got := uint64(d.recv) + drops; got != c.RcvdPkts {
				t.Errorf("device %d: read %d datagrams, completed %d and dropped %d (no WQE %d)",
					i, c.RcvdPkts, d.recv, drops, c.DropNoRecvWQE)
			}
			if st.Sent.Packets != uint64(d.sent) {
				t.Errorf("device %d: %d datagrams sent for %d SENDs", i, st.Sent.Packets, d.sent)
			}
			t.Logf("device %d: sent %d, delivered %d, received %d, dropped %d (no WQE %d, inbox full %d, too long %d)",
				i, d.sent, st.Delivered.Packets, d.recv, drops, c.DropNoRecvWQE, c.DropQueueFull, c.DropLength)
		}
		// A tenth is lost: most arrive.
		if distinct < total*3/4 {
			t.Errorf("%d of %d messages received", distinct, total)
		}
		t.Logf("%d messages, %d received (%d twice)", total, distinct, dups)
	})
	t.Logf("wall time %v", time.Since(start).Round(time.Millisecond))
}

func newUDSoakDev(t *testing.T, f *fabric.Fabric, addr netip.Addr, src []byte) *udSoakDev {
	t.Helper()
	ep, err := f.Attach(addr)
	must(t, err)
	dev, err := verbs.Open(verbs.Config{Link: ep})
	must(t, err)
	t.Cleanup(func() { dev.Close() })
	d := &udSoakDev{ep: ep, dev: dev}
	d.pd, err = dev.AllocPD()
	must(t, err)
	d.cq, err = dev.CreateCQ(4096, nil)
	must(t, err)
	d.src, err = d.pd.RegMR(bytes.Clone(src), 0)
	must(t, err)
	d.hdr, err = d.pd.RegMR(make([]byte, udHdrs*8), 0)
	must(t, err)
	d.rbuf, err = d.pd.RegMR(make([]byte, 2*udRecvs*udSlot), ibv.AccessLocalWrite)
	must(t, err)
	for q := range d.qps {
		d.qps[q], err = d.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: d.cq, RecvCQ: d.cq,
			Cap: ibv.QPCap{MaxSendWR: 256, MaxRecvWR: udRecvs, MaxSendSGE: 4, MaxRecvSGE: 1}})
		must(t, err)
		udToRTS(t, d.qps[q], udQKey)
		for k := range udRecvs {
			d.repost(t, q*udRecvs+k)
		}
	}
	return d
}

// repost posts receive buffer k (QP k/udRecvs) again; its WRID is k.
func (d *udSoakDev) repost(t *testing.T, k int) {
	t.Helper()
	must2(t)(d.qps[k/udRecvs].PostRecv(ibv.RecvWR{WRID: uint64(k), SGList: []ibv.SGE{d.rbuf.SGE(k*udSlot, udSlot)}}))
}

// poll takes the device's completions: sends must have succeeded,
// receives must be intact; each receive buffer is posted again.
func (d *udSoakDev) poll(t *testing.T, wc []ibv.WorkCompletion, msgs map[uint64]*udMsg, src []byte) error {
	for {
		k := d.cq.Poll(wc)
		if k == 0 {
			return nil
		}
		for _, c := range wc[:k] {
			if c.Opcode&ibv.WCRecv == 0 {
				if c.Status != ibv.WCSuccess {
					return fmt.Errorf("UD send completion %+v", c)
				}
				continue
			}
			if c.Status != ibv.WCSuccess {
				return fmt.Errorf("UD receive completion %+v", c)
			}
			d.recv++
			k := int(c.WRID)
			buf := d.rbuf.Buf()[k*udSlot : (k+1)*udSlot]
			id := binary.LittleEndian.Uint64(buf[verbs.GRHLen:])
			m := msgs[id]
			switch {
			case m == nil:
				return fmt.Errorf("UD receive %+v of unknown message %d", c, id)
			case c.QPNum != m.to || d.qps[k/udRecvs].QPN() != m.to:
				return fmt.Errorf("UD message %d for QP %#x completed on QP %#x (buffer %d)", id, m.to, c.QPNum, k)
			case int(c.ByteLen) != verbs.GRHLen+m.n || c.Flags&ibv.WCGRH == 0:
				return fmt.Errorf("UD message %d of %d bytes: completion %+v", id, m.n, c)
			case (c.Flags&ibv.WCWithImm != 0) != m.withIm || m.withIm && c.Imm != m.imm:
				return fmt.Errorf("UD message %d (imm %v %#x): completion %+v", id, m.withIm, m.imm, c)
			}
			if !bytes.Equal(buf[verbs.GRHLen+8:verbs.GRHLen+m.n], src[m.srcOff:m.srcOff+m.n-8]) {
				return fmt.Errorf("UD message %d of %d bytes arrived damaged", id, m.n)
			}
			m.got++
			if m.got > 2 {
				return fmt.Errorf("UD message %d received %d times", id, m.got)
			}
			d.repost(t, k)
		}
	}
}

// srqClient is one client QP of TestSoakSRQ and what it sent.
type srqClient struct {
	id     int
	typ    ibv.QPType
	qp     *verbs.QP // the client's QP
	server *verbs.QP // its peer on the SRQ
	cq     *verbs.CQ
	ah     *verbs.AH // UD
	sizes  []int     // per message sequence number
	next   int       // RC: the next sequence number to arrive
	got    []int     // times each message arrived
	posted int
	done   int // send completions
}

// TestSoakSRQ runs two RC, one UC and one UD client QP against four
// server QPs that share one SRQ of 24 WQEs, over the lossy fabric: 1,500
// messages from each client, SENDs with and without immediate, 8 B to
// 16 KiB (up to 16 KiB on RC and UC at MTU 1024; the port MTU on UD). The
// server takes every receive from the SRQ and posts its buffer back.
// Every RC message arrives exactly once, in order, intact; every UC and
// UD message that arrives is intact and arrives at most twice; every
// send completes successfully. The SRQ runs dry now and then (RC
// requesters then get RNR NAKs, UC and UD messages are dropped), and its
// limit event, re-armed each time it fires, fires at most once per
// arming.
func TestSoakSRQ(t *testing.T) {
	const (
		perClient = 1500
		srqWR     = 24 // less than the clients' windows: it runs dry
		slot      = 16<<10 + 64
		window    = 16
	)
	seed := seedFor(t)
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: int64(seed)})
		defer f.Close()
		f.SetImpairment(soakRCImpairment) // RC retries: see TestSoakRCRetryBudget
		rng := rand.New(rand.NewPCG(seed, 0x5e))
		src := make([]byte, 1<<20)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		s := newSRQServer(t, f, "10.0.0.100", srqWR, slot)
		cdev := openDev(t, f, "10.0.0.1", 0)
		cpd, err := cdev.AllocPD()
		must(t, err)
		csrc, err := cpd.RegMR(bytes.Clone(src), 0)
		must(t, err)
		// Each message starts with its client and sequence number, from
		// a slot of hdr (64 per client, reused once the message is
		// acknowledged), then n-8 bytes of the source.
		hdr, err := cpd.RegMR(make([]byte, 4*64*8), 0)
		must(t, err)
		o := pairOpts{mtu: ibv.MTU1024, timeout: 14, retry: 7, rnr: 7}
		var cs []*srqClient
		for i, typ := range []ibv.QPType{ibv.QPTypeRC, ibv.QPTypeRC, ibv.QPTypeUC, ibv.QPTypeUD} {
			c := &srqClient{id: i, typ: typ, got: make([]int, perClient)}
			c.cq, err = cdev.CreateCQ(256, nil)
			must(t, err)
			c.qp, err = cpd.CreateQP(verbs.QPInitAttr{Type: typ, SendCQ: c.cq, RecvCQ: c.cq,
				Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 4, MaxRecvSGE: 1}})
			must(t, err)
			c.server = s.qp(t, typ)
			if typ == ibv.QPTypeUD {
				udToRTS(t, c.qp, udQKey)
				udToRTS(t, c.server, udQKey)
				c.ah, err = cpd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: s.dev.Addr()}})
				must(t, err)
			} else {
				o.typ = typ
				ce, se := &end{dev: cdev, qp: c.qp}, &end{dev: s.dev, qp: c.server}
				connect(t, ce, se, o, 0, 0)
				connect(t, se, ce, o, 0, 0)
			}
			for range perClient {
				n := soakSize(rng, 1024, 16<<10)
				if typ == ibv.QPTypeUD {
					n = soakSize(rng, 1024, udMaxSize)
				}
				c.sizes = append(c.sizes, max(n, 8))
			}
			cs = append(cs, c)
		}
		clientOf := map[uint32]*srqClient{}
		for _, c := range cs {
			clientOf[c.server.QPN()] = c
		}
		// msgOff is where message (client, seq)'s payload after the header
		// starts in src.
		msgOff := func(c, seq, n int) int { return (c*7919 + seq*104729) % (len(src) - n + 9) }
		arm := func() { must(t, s.srq.Modify(&ibv.SRQAttr{SRQLimit: 8}, ibv.SRQAttrLimit)) }
		arm()
		armings, limits := 1, 0

		wc := make([]ibv.WorkCompletion, 64)
		progress := time.Now()
		for {
			busy := false
			for _, c := range cs {
				// RC keeps a window outstanding; UC and UD go in rounds of
				// a window, waiting for the round's sends to complete.
				for c.posted < perClient && c.posted-c.done < window {
					seq := c.posted
					n := c.sizes[seq]
					h := (c.id*64 + seq%64) * 8
					binary.LittleEndian.PutUint32(hdr.Buf()[h:], uint32(c.id))
					binary.LittleEndian.PutUint32(hdr.Buf()[h+4:], uint32(seq))
					wr := ibv.SendWR{WRID: uint64(seq), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
						SGList: append([]ibv.SGE{hdr.SGE(h, 8)}, splitSGE(rng, csrc, msgOff(c.id, seq, n), n-8)...)}
					if seq%2 == 1 {
						wr.Opcode, wr.Imm = ibv.WRSendWithImm, uint32(c.id<<24|seq)
					}
					if c.ah != nil {
						wr.AH, wr.RemoteQPN, wr.RemoteQKey = c.ah, c.server.QPN(), udQKey
					}
					if _, err := c.qp.PostSend(wr); err != nil {
						t.Fatalf("client %d: post %d: %v", c.id, seq, err)
					}
					c.posted++
				}
				for k := c.cq.Poll(wc); k > 0; k = c.cq.Poll(wc) {
					for _, w := range wc[:k] {
						if w.Status != ibv.WCSuccess || w.WRID != uint64(c.done) {
							t.Fatalf("client %d (%v): send completion %+v, want %d to succeed", c.id, c.typ, w, c.done)
						}
						c.done++
						busy = true
					}
				}
			}
			for k := s.cq.Poll(wc); k > 0; k = s.cq.Poll(wc) {
				busy = true
				for _, w := range wc[:k] {
					c := clientOf[w.QPNum]
					if c == nil || w.Status != ibv.WCSuccess {
						t.Fatalf("server completion %+v", w)
					}
					buf := s.buf[int(w.WRID)*slot:]
					if c.typ == ibv.QPTypeUD {
						buf = buf[verbs.GRHLen:]
					}
					id, seq := int(binary.LittleEndian.Uint32(buf)), int(binary.LittleEndian.Uint32(buf[4:]))
					if id != c.id || seq >= perClient {
						t.Fatalf("server QP %#x of client %d got message %d/%d: %+v", w.QPNum, c.id, id, seq, w)
					}
					n := c.sizes[seq]
					wantLen := n
					if c.typ == ibv.QPTypeUD {
						wantLen += verbs.GRHLen
					}
					withImm := seq%2 == 1
					if int(w.ByteLen) != wantLen || (w.Flags&ibv.WCWithImm != 0) != withImm || withImm && w.Imm != uint32(c.id<<24|seq) {
						t.Fatalf("client %d message %d of %d bytes: completion %+v", c.id, seq, n, w)
					}
					off := msgOff(c.id, seq, n)
					if !bytes.Equal(buf[8:n], src[off:off+n-8]) {
						t.Fatalf("client %d (%v) message %d of %d bytes arrived damaged", c.id, c.typ, seq, n)
					}
					c.got[seq]++
					if c.typ == ibv.QPTypeRC {
						if seq != c.next {
							t.Fatalf("RC client %d: message %d arrived, want %d", c.id, seq, c.next)
						}
						c.next++
					} else if c.got[seq] > 2 {
						t.Fatalf("%v client %d: message %d arrived %d times", c.typ, c.id, seq, c.got[seq])
					}
					s.repost(t, int(w.WRID))
				}
			}
			evs, _ := s.dev.AsyncEvents()
			for _, ev := range evs {
				if ev.Type == ibv.EventSRQLimitReached {
					limits++
					arm()
					armings++
				}
			}
			finished := true
			for _, c := range cs {
				finished = finished && c.done == perClient && (c.typ != ibv.QPTypeRC || c.next == perClient)
			}
			if finished {
				break
			}
			if busy {
				progress = time.Now()
			} else if time.Since(progress) > time.Minute {
				for _, c := range cs {
					t.Logf("client %d (%v): posted %d, completed %d, next %d; QPs %v/%v", c.id, c.typ, c.posted, c.done, c.next,
						c.qp.State(), c.server.State())
				}
				t.Fatalf("no progress for a minute of fake time")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if limits > armings {
			t.Errorf("%d SRQ limit events for %d armings", limits, armings)
		}
		for _, c := range cs {
			n := 0
			for _, g := range c.got {
				if g > 0 {
					n++
				}
			}
			if n == 0 {
				t.Errorf("%v client %d: nothing arrived", c.typ, c.id)
			}
			t.Logf("%v client %d: %d of %d messages arrived", c.typ, c.id, n, perClient)
		}
		ctr := s.dev.Counters()
		t.Logf("SRQ limit events %d; RNR NAKs sent %d; UD drops for want of a WQE %d",
			limits, ctr.SendRNRErr, ctr.DropNoRecvWQE)
	})
	t.Logf("wall time %v", time.Since(start).Round(time.Millisecond))
}
