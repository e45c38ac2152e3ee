package verbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// TestSoakTM sends 10,000 tagged messages (1,000 with -short) of 1 B to
// 1 MiB (soakSize) from three RC QPs on two devices into one tag-matching
// SRQ, over the soak's lossy fabric (soak_test.go: 10% loss, 10%
// reordering, 5% duplication, both ways). Messages below tmRndvMin bytes
// go eager (TMH, data); the others as rendezvous requests (TMH, RVH naming
// the data in the sender's registered buffer, user data). Most messages
// have a tagged buffer posted for them before they are sent, the buffers
// of several messages posted in random order, with random masks (some
// matching any tag of their lane and size class); the others have none
// and arrive unexpected, and the test is the software matcher: it reads
// the TMH from the SRQ buffer, counts the message, copies eager data or
// RDMA READs the rendezvous data itself and SENDs the FIN, and syncs with
// ibv.OpsTMSync and its count. Some large messages' buffers are too
// small for a rendezvous: it completes TM_RNDV_INCOMPLETE with the
// request in the buffer, and software does that rendezvous too. Tagged
// buffers whose message went elsewhere are deleted, some at once, some
// later, all at the end.
//
// A message's tag holds its lane and size class (every mask keeps them),
// so only the messages of one QP, which arrive in order, compete for a
// tagged buffer, and a buffer is large enough for any EAGER message it
// can match. Ordinary SRQ buffers are taken in posting order, so an
// unexpected message's buffer tells how many were counted before it. The test checks every completion's status, opcode, flags,
// wr_id, tag, app_ctx and length, and every byte placed: each message
// completes exactly once; a matched one in the earliest posted buffer
// that matched it when it arrived (ibv_post_srq_ops(3): "TMH.tag &
// entry.mask == entry.tag", MPI order), and only while software had
// synced every unexpected message before it; an unexpected one whole,
// TMH included, and never while a buffer that matched it was listed and
// software was in sync; a rendezvous's buffer once its data is there;
// the sender gets exactly one FIN per rendezvous, with its tag and
// app_ctx, and reuses the buffer (poisoned) only then (and tmQuiet
// later). Deleting a buffer fails
// (TM_ERR) only if a message took it.
//
// The seed (-soak.seed, logged) fixes every lane's messages and their
// buffers; when the buffers are posted, which message meets which fault
// and so which arrive unexpected depend on timing too.
func TestSoakTM(t *testing.T) {
	total := 10000
	if testing.Short() {
		total = 1000
	}
	seed := seedFor(t)
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f := fabric.New(fabric.Config{Seed: int64(seed)})
		defer f.Close()
		f.SetImpairment(soakRCImpairment) // RC retries: see TestSoakRCRetryBudget
		s := newTMSoak(t, f, seed, total)
		if err := s.run(); err != nil {
			t.Error(err)
			s.logState(t)
			return
		}
		st := f.Stats()
		ca, cb, cc := s.rcv.dev.Counters(), s.snd[0].dev.Counters(), s.snd[1].dev.Counters()
		t.Logf("%d messages, %.1f MiB of payload: %d eager (%d multi-packet), %d rendezvous; %d matched, %d unexpected (%d rendezvous); %d TAG_ADDs, %d TAG_DELs (%d TM_ERR), %d syncs",
			total, float64(s.bytes)/(1<<20), s.count.eager, s.count.multi, s.count.rndv, s.count.matched, s.count.unexp, s.count.unexpRndv,
			s.count.adds, s.count.dels, s.count.delErr, s.count.syncs)
		t.Logf("matches in a buffer posted for another message %d; rendezvous too large for their buffer (TM_RNDV_INCOMPLETE) %d; unexpected while a matching buffer was listed (matching off) %d",
			s.count.stolen, s.count.swRndv, s.count.unexpOff)
		t.Logf("fabric: sent %d, delivered %d, lost %d, reordered %d, duplicated %d",
			st.Sent.Packets, st.Delivered.Packets, st.DropImpairment.Packets, st.Reordered.Packets, st.Duplicated.Packets)
		t.Logf("retransmits %d, timeouts %d, RNR NAKs received %d, duplicate requests %d, fake time %v",
			ca.Retransmits+cb.Retransmits+cc.Retransmits, ca.Timeouts+cb.Timeouts+cc.Timeouts,
			ca.RcvdRNRErr+cb.RcvdRNRErr+cc.RcvdRNRErr, ca.DuplicateRequest+cb.DuplicateRequest+cc.DuplicateRequest,
			time.Since(t0))
	})
	t.Logf("wall time %v", time.Since(start).Round(time.Millisecond))
}

const (
	tmRndvMin   = 8 << 10 // messages of this size and larger go as rendezvous
	tmLanes     = 3       // QP pairs into the TM-SRQ: two from 10.0.0.1, one from 10.0.0.3
	tmWindow    = 16      // messages a lane has outstanding
	tmPlan      = 8       // messages a lane has drawn ahead, for their buffers to be posted in any order
	tmSRQBufs   = 12      // ordinary SRQ buffers: too few at times, so unexpected messages meet RNR NAKs
	tmSRQSlot   = 16 << 10
	tmFinSlot   = 64
	tmUserMax   = 32                   // rendezvous user data: 0..tmUserMax bytes
	tmRecvArena = 96 << 20             // tagged buffers and software's destinations
	tmSendArena = 48 << 20             // per sending device
	tmClasses   = 6                    // size classes: capacity 1, 16, 256, 4 KiB, 64 KiB, 1 MiB
	tmOpsKind   = 60                   // list operations' WRIDs carry their kind at this bit
	tmTagClass  = 48                   // a tag's size class is at this bit, its lane at tmTagLane
	tmTagLane   = 56                   //
	tmTagFixed  = uint64(0xffff) << 48 // every mask keeps the lane and class
)

// tmClass returns the size class of n bytes: the smallest c with
// n <= 1<<(4c).
func tmClass(n int) int { return (bits.Len(uint(n-1)) + 3) / 4 }

func tmClassCap(c int) int { return 1 << (4 * c) }

// tmPool hands out buffers of a registered region by size class, each
// of the class's capacity and extra bytes: a bump allocator and a free
// list per class.
type tmPool struct {
	mr    *verbs.MR
	extra int
	bump  int
	free  [tmClasses][]int
}

func (p *tmPool) alloc(c int) (int, bool) {
	if l := len(p.free[c]); l > 0 {
		off := p.free[c][l-1]
		p.free[c] = p.free[c][:l-1]
		return off, true
	}
	if p.bump+tmClassCap(c)+p.extra > len(p.mr.Buf()) {
		return 0, false
	}
	off := p.bump
	p.bump += tmClassCap(c) + p.extra
	return off, true
}

func (p *tmPool) release(c, off int) { p.free[c] = append(p.free[c], off) }

// tmMsg is one tagged message and everything the test saw of it.
type tmMsg struct {
	lane   *tmLane
	seq    int    // in its lane: the order it is sent and arrives in
	id     uint32 // app_ctx: lane<<24 | seq
	n      int    // data length
	srcOff int    // data: src[srcOff:srcOff+n]
	tag    uint64
	rndv   bool
	user   int       // rendezvous user data length (from src after the data)
	entry  *tmEntry  // the tagged buffer posted for it (nil: it is meant to arrive unexpected)
	sbuf   int       // offset of its buffer in the lane's sender pool
	sclass int       // that buffer's class
	dst    int       // software's destination in the receiver pool, for an unexpected message or a software rendezvous (-1: none)
	ticks  [3]int64  // posted (sent), resolved (first completion), polled unexpected
	synced uint32    // software's sync count when the message was sent
	buf    uint64    // unexpected: the SRQ buffer (its WRID, the order buffers are taken in)
	how    tmOutcome // what became of it at the receiver
	in     *tmEntry  // matched: the buffer it went to
	partly bool      // a multi-packet EAGER whose MATCH completion came, DATA_VALID not yet
	swRndv bool      // a rendezvous software does: unexpected, or larger than its tagged buffer
	sent   bool      // the sender's SEND completed
	fin    bool      // rendezvous: the sender has its FIN
	done   bool      // the receiver has the data, checked (and, a software rendezvous, its FIN went)
	wireN  int       // the SEND's length
	sfreed bool      // the sender's buffer given back (sent, and FIN'd if a rendezvous)
	quiet  time.Time // rendezvous: when its buffer may be reused (tmQuiet after the FIN)
	freed  bool      // finished: the receiver's buffers given back too
}

const (
	tickSent = iota
	tickResolved
	tickPolled
)

type tmOutcome uint8

const (
	tmPending tmOutcome = iota
	tmInTagged
	tmUnexpectedMsg
)

// tmEntry is one tagged buffer posted with TAG_ADD.
type tmEntry struct {
	id       uint64 // its RecvWRID
	lane     *tmLane
	seq      uint64 // posting order on the SRQ
	tag      uint64
	mask     uint64
	class    int
	cap      int // the buffer's length: its class's capacity, or less for a rendezvous not to fit
	off      int // in the receiver pool
	handle   uint32
	addTick  int64
	by       *tmMsg // the message that took it
	deleted  bool   // a TAG_DEL succeeded
	delTick  int64
	delBusy  bool  // a TAG_DEL is posted (its completion not seen)
	delErr   int64 // tick of a TAG_DEL that completed TM_ERR (0: none)
	released bool  // its buffer is back in the pool
}

// tmLane is one sending QP and its peer QP on the TM-SRQ.
type tmLane struct {
	id       int
	s        *tmSoak
	rng      *rand.Rand // the lane's messages
	quota    int        // how many it sends
	snd      *tmDev
	sqp      *verbs.QP  // sender's QP
	scq      *verbs.CQ  // its send and receive CQ
	rqp      *verbs.QP  // receiver's QP, on the TM-SRQ
	rscq     *verbs.CQ  // its send CQ: software's READs and FINs
	pattern  uint64     // the lane's tag bits 4..47
	msgs     []*tmMsg   // every message drawn, by seq
	sentN    int        // messages sent
	checked  int        // messages checked in lane order
	entries  []*tmEntry // buffers a message still to be checked may have to meet, in posting order
	sendDone int        // send completions seen
	finBufs  int        // FIN buffers posted on the sender's QP
	finNext  int        // FIN buffers ever posted: the next one's slot, round robin
	lastUnex *tmMsg     // the latest unexpected message of those checked
	out      int        // messages sent and not finished
	quiet    []*tmMsg   // rendezvous FIN'd whose buffers wait out tmQuiet
}

type tmDev struct {
	dev  *verbs.Device
	pd   *verbs.PD
	pool tmPool
	fins *verbs.MR // FIN receive buffers
}

type tmSoak struct {
	t     *testing.T
	rng   *rand.Rand
	src   []byte
	inv   []byte
	total int
	mtu   int

	rcv     *tmDev
	srq     *verbs.SRQ
	srqCQ   *verbs.CQ
	srqBufs *verbs.MR
	snd     [2]*tmDev
	lanes   []*tmLane
	byQPN   map[uint32]*tmLane

	tick      int64
	finished  int
	nextBuf   uint64 // WRID of the next SRQ buffer posted
	freeSlots []int  // SRQ slots not posted
	slotOf    map[uint64]int
	entrySeq  uint64
	entries   map[uint64]*tmEntry
	swUnexp   uint32  // unexpected messages software has polled
	synced    uint32  // the count of the last sync posted
	syncTicks []int64 // ticks of the syncs posted, ascending
	needSync  bool
	pending   []tmPost // software's READs and FINs the send queue had no room for
	bytes     int64
	count     struct {
		eager, multi, rndv, matched, unexp, unexpRndv, swRndv, stolen, unexpOff int
		adds, dels, delErr, syncs                                               int
	}
	finalSync bool // the last sync's completion is awaited
}

// tmPost is a send software still has to post on a receiver QP.
type tmPost struct {
	l  *tmLane
	wr ibv.SendWR
}

func newTMSoak(t *testing.T, f *fabric.Fabric, seed uint64, total int) *tmSoak {
	s := &tmSoak{t: t, rng: rand.New(rand.NewPCG(seed, 0x7a9)), total: total, byQPN: map[uint32]*tmLane{},
		slotOf: map[uint64]int{}, entries: map[uint64]*tmEntry{}}
	s.src = make([]byte, 2<<20)
	for i := 0; i < len(s.src); i += 8 {
		binary.LittleEndian.PutUint64(s.src[i:], s.rng.Uint64())
	}
	s.inv = make([]byte, len(s.src))
	for i := range s.src {
		s.inv[i] = ^s.src[i]
	}
	o := pairOpts{mtu: ibv.MTU4096, timeout: 14, retry: 7, rnr: 7}
	o.defaults()
	s.mtu = o.mtu.Bytes()
	access := ibv.AccessLocalWrite | ibv.AccessRemoteRead
	s.rcv = newTMDev(t, f, "10.0.0.2", tmRecvArena, access)
	s.snd[0] = newTMDev(t, f, "10.0.0.1", tmSendArena, access)
	s.snd[1] = newTMDev(t, f, "10.0.0.3", tmSendArena/2, access)
	s.snd[0].pool.extra, s.snd[1].pool.extra = tmTMHLens, tmTMHLens
	var err error
	s.srqCQ, err = s.rcv.dev.CreateCQ(4096, nil)
	must(t, err)
	s.srq, err = s.rcv.pd.CreateSRQEx(verbs.SRQInitAttrEx{SRQInitAttr: verbs.SRQInitAttr{MaxWR: tmSRQBufs, MaxSGE: 2},
		Type: ibv.SRQTypeTM, CQ: s.srqCQ, TM: ibv.TMCap{MaxNumTags: 1023, MaxOps: 16}})
	must(t, err)
	s.srqBufs, err = s.rcv.pd.RegMR(make([]byte, tmSRQBufs*tmSRQSlot), ibv.AccessLocalWrite)
	must(t, err)
	for i := range tmSRQBufs {
		s.freeSlots = append(s.freeSlots, i)
	}
	for i := range tmLanes {
		d := s.snd[min(i, 1)] // lanes 0 and 1 from 10.0.0.1, lane 2 from 10.0.0.3
		l := &tmLane{id: i, s: s, snd: d, rng: rand.New(rand.NewPCG(seed, uint64(i))), quota: total / tmLanes,
			pattern: s.rng.Uint64() & 0x0000_ffff_ffff_fff0}
		if i == 0 {
			l.quota += total % tmLanes
		}
		l.scq, err = d.dev.CreateCQ(1024, nil)
		must(t, err)
		l.sqp, err = d.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: l.scq, RecvCQ: l.scq,
			Cap: ibv.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 1}})
		must(t, err)
		l.rscq, err = s.rcv.dev.CreateCQ(256, nil)
		must(t, err)
		l.rqp, err = s.rcv.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: l.rscq, RecvCQ: l.rscq, SRQ: s.srq,
			Cap: ibv.QPCap{MaxSendWR: 64, MaxSendSGE: 4, MaxInlineData: 64}})
		must(t, err)
		se := &end{dev: d.dev, qp: l.sqp}
		re := &end{dev: s.rcv.dev, qp: l.rqp}
		sPSN, rPSN := uint32(1<<24-1-s.rng.IntN(4096)), s.rng.Uint32()&(1<<24-1)
		connect(t, se, re, o, sPSN, rPSN)
		connect(t, re, se, o, rPSN, sPSN)
		s.byQPN[l.rqp.QPN()] = l
		s.lanes = append(s.lanes, l)
	}
	return s
}

func newTMDev(t *testing.T, f *fabric.Fabric, addr string, arena int, access ibv.Access) *tmDev {
	t.Helper()
	ep, err := f.Attach(netip.MustParseAddr(addr))
	must(t, err)
	dev, err := verbs.Open(verbs.Config{Link: ep})
	must(t, err)
	t.Cleanup(func() { dev.Close() })
	d := &tmDev{dev: dev}
	d.pd, err = dev.AllocPD()
	must(t, err)
	mr, err := d.pd.RegMR(make([]byte, arena), access)
	must(t, err)
	d.pool.mr = mr
	d.fins, err = d.pd.RegMR(make([]byte, tmLanes*128*tmFinSlot), ibv.AccessLocalWrite)
	must(t, err)
	return d
}

// run drives the lanes until every message is finished, then deletes
// the buffers left, syncs a last time and checks nothing more completes.
func (s *tmSoak) run() error {
	wc := make([]ibv.WorkCompletion, 64)
	progress := time.Now()
	for s.finished < s.total {
		did := false
		if err := s.topUp(); err != nil {
			return err
		}
		for _, l := range s.lanes {
			ok, err := l.step()
			if err != nil {
				return err
			}
			did = did || ok
		}
		ok, err := s.poll(wc)
		if err != nil {
			return err
		}
		did = did || ok
		for _, l := range s.lanes {
			for len(l.quiet) > 0 && !time.Now().Before(l.quiet[0].quiet) {
				m := l.quiet[0]
				l.quiet = l.quiet[1:]
				if err := l.finishMsg(m); err != nil {
					return err
				}
			}
		}
		if err := s.flushPending(); err != nil {
			return err
		}
		if s.needSync && s.rng.IntN(4) != 0 {
			if err := s.sync(false); err != nil {
				return err
			}
		}
		if did {
			progress = time.Now()
			continue
		}
		if time.Since(progress) > time.Minute {
			return fmt.Errorf("no progress for a minute of fake time: %d of %d messages finished", s.finished, s.total)
		}
		time.Sleep(time.Millisecond)
	}
	return s.finish(wc)
}

// topUp posts the TM-SRQ's free ordinary buffers (now and then not at
// once), WRIDs in posting order: the SRQ hands them out in that order,
// so an unexpected message's WRID is the number of unexpected messages
// before it.
func (s *tmSoak) topUp() error {
	for len(s.freeSlots) > 0 && s.rng.IntN(4) != 0 {
		k := s.freeSlots[len(s.freeSlots)-1]
		s.freeSlots = s.freeSlots[:len(s.freeSlots)-1]
		buf := s.srqBufs.Buf()[k*tmSRQSlot : (k+1)*tmSRQSlot]
		copy(buf, s.inv[k*tmSRQSlot:])
		sgl := []ibv.SGE{s.srqBufs.SGE(k*tmSRQSlot, tmSRQSlot)}
		if cut := s.rng.IntN(tmSRQSlot); s.rng.IntN(2) == 0 && cut > 0 {
			sgl = []ibv.SGE{s.srqBufs.SGE(k*tmSRQSlot, cut), s.srqBufs.SGE(k*tmSRQSlot+cut, tmSRQSlot-cut)}
		}
		if _, err := s.srq.PostRecv(ibv.RecvWR{WRID: s.nextBuf, SGList: sgl}); err != nil {
			return fmt.Errorf("post SRQ buffer %d: %w", s.nextBuf, err)
		}
		s.slotOf[s.nextBuf] = k
		s.nextBuf++
	}
	for _, l := range s.lanes {
		for l.finBufs < 2*tmWindow {
			k := l.id*128 + l.finNext%128 // 128 slots, at most 2*tmWindow posted
			l.finNext++
			if _, err := l.sqp.PostRecv(ibv.RecvWR{WRID: uint64(k), SGList: []ibv.SGE{l.snd.fins.SGE(k*tmFinSlot, tmFinSlot)}}); err != nil {
				return fmt.Errorf("lane %d: post FIN buffer: %w", l.id, err)
			}
			l.finBufs++
		}
	}
	return nil
}

// draw makes the lane's next message, from the lane's own random
// source: the messages are the same whenever the seed is (what becomes
// of them depends on timing too).
func (l *tmLane) draw() *tmMsg {
	s := l.s
	seq := len(l.msgs)
	m := &tmMsg{lane: l, seq: seq, id: uint32(l.id)<<24 | uint32(seq), dst: -1}
	m.n = soakSize(l.rng, s.mtu, 1<<20)
	m.rndv = m.n >= tmRndvMin
	if m.rndv {
		m.user = l.rng.IntN(tmUserMax + 1)
	}
	m.srcOff = l.rng.IntN(len(s.src) - m.n - tmUserMax + 1)
	m.tag = uint64(l.id)<<tmTagLane | uint64(tmClass(m.n))<<tmTagClass | l.pattern | l.rng.Uint64N(16)
	l.msgs = append(l.msgs, m)
	if l.rng.IntN(4) != 0 {
		mask := tmTagFixed | l.rng.Uint64()&^0xf // the bits 4..47 are the lane's pattern: any mask of them
		switch l.rng.IntN(8) {
		case 0: // any tag of the lane and class
		case 1:
			mask |= 0xf
		default:
			mask |= l.rng.Uint64N(16)
		}
		c := tmClass(m.n)
		m.entry = &tmEntry{lane: l, tag: m.tag & mask, mask: mask, class: c, cap: tmClassCap(c), off: -1}
		if c >= 4 && l.rng.IntN(4) == 0 {
			// Room for any EAGER message of the class (below
			// tmRndvMin), not for most rendezvous.
			m.entry.cap = 2 * tmClassCap(c-1)
		}
	}
	return m
}

// step posts some of the lane's planned messages' tagged buffers, in
// random order, and sends its next message when it may.
func (l *tmLane) step() (bool, error) {
	s := l.s
	for len(l.msgs)-l.sentN < tmPlan && len(l.msgs) < l.quota {
		l.draw()
	}
	did := false
	// Buffers of planned messages, a few at a time in random order.
	var ops []ibv.OpsWR
	var added []*tmEntry
	for _, i := range s.rng.Perm(len(l.msgs) - l.sentN) {
		m := l.msgs[l.sentN+i]
		if m.entry == nil || m.entry.off >= 0 || s.rng.IntN(3) == 0 || len(ops) == 4 {
			continue
		}
		e := m.entry
		off, ok := s.rcv.pool.alloc(e.class)
		if !ok {
			break
		}
		e.off = off
		copy(s.rcv.pool.mr.Buf()[off:off+tmClassCap(e.class)], s.inv[s.rng.IntN(len(s.inv)-tmClassCap(e.class)+1):])
		s.entrySeq++
		e.id, e.seq = s.entrySeq, s.entrySeq
		flags := ibv.OpsFlags(0)
		if s.rng.IntN(2) == 0 {
			flags = ibv.OpsSignaled
		}
		ops = append(ops, ibv.OpsWR{WRID: 1<<tmOpsKind | e.id, Opcode: ibv.WRTagAdd, Flags: flags, RecvWRID: e.id,
			SGList: []ibv.SGE{s.rcv.pool.mr.SGE(off, e.cap)}, Tag: e.tag, Mask: e.mask})
		added = append(added, e)
	}
	if len(ops) > 0 {
		s.tick++
		if _, err := s.srq.PostOps(ops); err != nil {
			return false, fmt.Errorf("lane %d: TAG_ADD of %d buffers: %w", l.id, len(ops), err)
		}
		for i, e := range added {
			e.handle, e.addTick = ops[i].Handle, s.tick
			s.entries[e.id] = e
			l.entries = append(l.entries, e)
		}
		s.count.adds += len(ops)
		did = true
	}
	// The next message, once its buffer is posted.
	if l.sentN == len(l.msgs) || l.out >= tmWindow || s.rng.IntN(4) == 0 {
		return did, nil
	}
	m := l.msgs[l.sentN]
	if m.entry != nil && m.entry.off < 0 {
		return did, nil
	}
	m.sclass = tmClass(m.n)
	off, ok := l.snd.pool.alloc(m.sclass)
	if !ok {
		return did, nil
	}
	m.sbuf = off
	buf := l.snd.pool.mr.Buf()
	wr := ibv.SendWR{WRID: uint64(m.id), Opcode: ibv.WRSend, Flags: ibv.SendSignaled}
	if m.rndv {
		// TMH, RVH, user data at the buffer's start; the data after them.
		data := off + tmTMHLens
		copy(buf[data:data+m.n], s.src[m.srcOff:])
		wire.PutTMH(buf[off:], wire.TMRndv, m.id, m.tag)
		wire.PutRVH(buf[off+wire.TMHLen:], l.snd.pool.mr.Addr()+uint64(data), l.snd.pool.mr.RKey(), uint32(m.n))
		copy(buf[off+wire.TMHLen+wire.RVHLen:], s.src[m.srcOff+m.n:][:m.user])
		m.wireN = wire.TMHLen + wire.RVHLen + m.user
		wr.SGList = []ibv.SGE{l.snd.pool.mr.SGE(off, m.wireN)}
	} else {
		wire.PutTMH(buf[off:], wire.TMEager, m.id, m.tag)
		copy(buf[off+wire.TMHLen:off+wire.TMHLen+m.n], s.src[m.srcOff:])
		m.wireN = wire.TMHLen + m.n
		wr.SGList = splitSGE(s.rng, l.snd.pool.mr, off, m.wireN)
	}
	s.tick++
	if _, err := l.sqp.PostSend(wr); err != nil {
		return false, fmt.Errorf("lane %d: post message %d: %w", l.id, m.seq, err)
	}
	m.ticks[tickSent], m.synced = s.tick, s.synced
	l.sentN++
	l.out++
	s.bytes += int64(m.n)
	if m.rndv {
		s.count.rndv++
	} else {
		s.count.eager++
		if m.wireN > s.mtu {
			s.count.multi++
		}
	}
	return true, nil
}

// tmTMHLens is the room a sender buffer keeps before a rendezvous's data
// (and an eager message's TMH).
const tmTMHLens = wire.TMHLen + wire.RVHLen + tmUserMax

// wire returns the SEND the message is: TMH and data, or TMH, RVH and
// user data.
func (m *tmMsg) wire() []byte {
	s, mr := m.lane.s, m.lane.snd.pool.mr
	b := make([]byte, m.wireN)
	if m.rndv {
		wire.PutTMH(b, wire.TMRndv, m.id, m.tag)
		wire.PutRVH(b[wire.TMHLen:], mr.Addr()+uint64(m.sbuf+tmTMHLens), mr.RKey(), uint32(m.n))
		copy(b[wire.TMHLen+wire.RVHLen:], s.src[m.srcOff+m.n:][:m.user])
	} else {
		wire.PutTMH(b, wire.TMEager, m.id, m.tag)
		copy(b[wire.TMHLen:], s.src[m.srcOff:m.srcOff+m.n])
	}
	return b
}

func (s *tmSoak) msgOf(id uint32) *tmMsg {
	lane, seq := int(id>>24), int(id&(1<<24-1))
	if lane >= len(s.lanes) || seq >= len(s.lanes[lane].msgs) {
		return nil
	}
	return s.lanes[lane].msgs[seq]
}

// poll takes every CQ's completions.
func (s *tmSoak) poll(wc []ibv.WorkCompletion) (bool, error) {
	did := false
	for {
		k := s.srqCQ.Poll(wc)
		for i := range wc[:k] {
			s.tick++
			if err := s.srqCompletion(&wc[i]); err != nil {
				return false, err
			}
		}
		if k == 0 {
			break
		}
		did = true
	}
	for _, l := range s.lanes {
		for _, cq := range []*verbs.CQ{l.rscq, l.scq} {
			k := cq.Poll(wc)
			for i := range wc[:k] {
				s.tick++
				var err error
				if cq == l.scq {
					err = l.senderCompletion(&wc[i])
				} else {
					err = l.softwareCompletion(&wc[i])
				}
				if err != nil {
					return false, err
				}
			}
			did = did || k > 0
		}
	}
	for _, l := range s.lanes {
		if err := l.checkInOrder(); err != nil {
			return false, err
		}
	}
	return did, nil
}

// srqCompletion checks one completion of the TM-SRQ's CQ.
func (s *tmSoak) srqCompletion(wc *ibv.WorkCompletion) error {
	switch wc.Opcode {
	case ibv.WCTMAdd, ibv.WCTMDel, ibv.WCTMSync:
		return s.opsCompletion(wc)
	}
	l := s.byQPN[wc.QPNum]
	if l == nil || wc.SrcQP != l.sqp.QPN() {
		return fmt.Errorf("completion %+v on no lane's QP", *wc)
	}
	switch wc.Opcode {
	case ibv.WCTMRecv:
		return l.taggedCompletion(wc)
	case ibv.WCRecv:
		return l.unexpectedCompletion(wc)
	}
	return fmt.Errorf("lane %d: completion %+v with an opcode no message of the test makes", l.id, *wc)
}

func (s *tmSoak) opsCompletion(wc *ibv.WorkCompletion) error {
	kind, id := wc.WRID>>tmOpsKind, wc.WRID&(1<<tmOpsKind-1)
	switch {
	case wc.Opcode == ibv.WCTMAdd && kind == 1:
		if e := s.entries[id]; e == nil || wc.Status != ibv.WCSuccess {
			return fmt.Errorf("TAG_ADD completion %+v", *wc)
		}
		return nil
	case wc.Opcode == ibv.WCTMDel && kind == 2:
		e := s.entries[id]
		if e == nil || !e.delBusy {
			return fmt.Errorf("TAG_DEL completion %+v for no TAG_DEL posted", *wc)
		}
		e.delBusy = false
		switch wc.Status {
		case ibv.WCSuccess:
			if e.by != nil {
				return fmt.Errorf("TAG_DEL of buffer %d succeeded, but message %#x took it", e.id, e.by.id)
			}
			e.deleted, e.delTick = true, s.tick
			s.releaseEntry(e)
		case ibv.WCTMErr:
			// A message in flight took it; it must show up.
			e.delErr = s.tick
			s.count.delErr++
		default:
			return fmt.Errorf("TAG_DEL completion %+v", *wc)
		}
		return nil
	case wc.Opcode == ibv.WCTMSync && kind == 3:
		if wc.Status != ibv.WCSuccess {
			return fmt.Errorf("TAG_SYNC completion %+v", *wc)
		}
		if s.finalSync {
			if wc.Flags != 0 {
				return fmt.Errorf("the last sync, with every unexpected message counted (%d), completed %+v: want no TM_SYNC_REQ", s.swUnexp, *wc)
			}
			s.finalSync = false
		}
		return nil
	}
	return fmt.Errorf("list operation completion %+v", *wc)
}

// taggedCompletion checks a TM_RECV: a message in a tagged buffer, or a
// rendezvous request too large for it.
func (l *tmLane) taggedCompletion(wc *ibv.WorkCompletion) error {
	s := l.s
	e := s.entries[wc.WRID]
	m := s.msgOf(wc.TMPriv)
	incomplete := wc.Status == ibv.WCTMRndvIncomplete
	if e == nil || e.lane != l || m == nil || m.lane != l || wc.TMTag != m.tag || wc.Status != ibv.WCSuccess && !incomplete {
		return fmt.Errorf("lane %d: TM_RECV %+v: want a buffer of the lane, a message's app_ctx and tag, success", l.id, *wc)
	}
	if m.ticks[tickSent] == 0 {
		return fmt.Errorf("lane %d: TM_RECV %+v for message %d not sent yet", l.id, *wc, m.seq)
	}
	if m.rndv && (m.n > e.cap) != incomplete {
		return fmt.Errorf("lane %d: TM_RECV %+v for rendezvous %d of %d bytes in buffer %d of %d: want TM_RNDV_INCOMPLETE exactly when the data does not fit",
			l.id, *wc, m.seq, m.n, e.id, e.cap)
	}
	multi := !m.rndv && m.wireN > s.mtu
	switch wc.Flags {
	case ibv.WCTMMatch | ibv.WCTMDataValid, ibv.WCTMMatch:
		if (wc.Flags == ibv.WCTMMatch) != (multi || incomplete) {
			return fmt.Errorf("lane %d: TM_RECV %+v for message %d (%d bytes, rendezvous %v): MATCH alone is for a multi-packet EAGER", l.id, *wc, m.seq, m.n, m.rndv)
		}
		if m.how != tmPending {
			return fmt.Errorf("lane %d: message %d completed again: %+v", l.id, m.seq, *wc)
		}
		if e.by != nil || e.deleted {
			return fmt.Errorf("lane %d: message %d in buffer %d, which message %v took or TAG_DEL removed (%v)", l.id, m.seq, e.id, e.by, e.deleted)
		}
		if m.tag&e.mask != e.tag {
			return fmt.Errorf("lane %d: message %d tag %#x in buffer %d of tag %#x mask %#x", l.id, m.seq, m.tag, e.id, e.tag, e.mask)
		}
		e.by, m.in, m.how = m, e, tmInTagged
		m.ticks[tickResolved] = s.tick
		s.count.matched++
		if e != m.entry {
			s.count.stolen++
		}
		if multi {
			m.partly = true
			if wc.ByteLen != 0 {
				return fmt.Errorf("lane %d: MATCH completion %+v of message %d with a length", l.id, *wc, m.seq)
			}
			return nil
		}
		if incomplete {
			// The request whole in the buffer (mlx5 cq.c
			// handle_tag_matching, TM_CONSUMED_MSG_SW_RDNV): software
			// does the rendezvous.
			buf := s.rcv.pool.mr.Buf()[e.off : e.off+e.cap]
			if wc.ByteLen != uint32(m.wireN) {
				return fmt.Errorf("lane %d: TM_RNDV_INCOMPLETE %+v of message %d: length, want the request's %d", l.id, *wc, m.seq, m.wireN)
			}
			if err := s.checkBytes(fmt.Sprintf("lane %d: rendezvous request %d in tagged buffer %d", l.id, m.seq, e.id), buf[:m.wireN], m.wire()); err != nil {
				return err
			}
			rvh := wire.RVH(bytes.Clone(buf[wire.TMHLen : wire.TMHLen+wire.RVHLen])) // the buffer goes back now
			s.releaseEntry(e)
			s.count.swRndv++
			return s.softwareRead(l, m, rvh)
		}
	case ibv.WCTMDataValid:
		if !m.partly || m.in != e {
			return fmt.Errorf("lane %d: DATA_VALID %+v of message %d without its MATCH in that buffer", l.id, *wc, m.seq)
		}
		m.partly = false
	default:
		return fmt.Errorf("lane %d: TM_RECV %+v: flags", l.id, *wc)
	}
	if wc.ByteLen != uint32(m.n) {
		return fmt.Errorf("lane %d: TM_RECV %+v of message %d: length, want %d", l.id, *wc, m.seq, m.n)
	}
	if err := s.checkBytes(fmt.Sprintf("lane %d: message %d (rendezvous %v) in tagged buffer %d", l.id, m.seq, m.rndv, e.id),
		s.rcv.pool.mr.Buf()[e.off:e.off+m.n], s.src[m.srcOff:m.srcOff+m.n]); err != nil {
		return err
	}
	s.releaseEntry(e)
	m.done = true
	return l.finishMsg(m)
}

// unexpectedCompletion is the software matcher: an unexpected message,
// whole, in an ordinary SRQ buffer.
func (l *tmLane) unexpectedCompletion(wc *ibv.WorkCompletion) error {
	s := l.s
	k, ok := s.slotOf[wc.WRID]
	if !ok || wc.Status != ibv.WCSuccess || wc.Flags != ibv.WCTMSyncReq {
		return fmt.Errorf("lane %d: unexpected-message completion %+v: want an SRQ buffer, success, TM_SYNC_REQ", l.id, *wc)
	}
	delete(s.slotOf, wc.WRID)
	buf := s.srqBufs.Buf()[k*tmSRQSlot : (k+1)*tmSRQSlot]
	tmh, err := wire.AsTMH(buf[:wc.ByteLen])
	if err != nil {
		return fmt.Errorf("lane %d: unexpected message %+v: %v", l.id, *wc, err)
	}
	m := s.msgOf(tmh.AppCtx())
	if m == nil || m.lane != l || m.ticks[tickSent] == 0 {
		return fmt.Errorf("lane %d: unexpected message %+v with app_ctx %#x of no message sent on the lane", l.id, *wc, tmh.AppCtx())
	}
	if m.how != tmPending {
		return fmt.Errorf("lane %d: message %d completed again, unexpected: %+v", l.id, m.seq, *wc)
	}
	// The message whole: the sender's bytes, TMH first.
	if wc.ByteLen != uint32(m.wireN) {
		return fmt.Errorf("lane %d: unexpected message %d: %d bytes, want %d", l.id, m.seq, wc.ByteLen, m.wireN)
	}
	if err := s.checkBytes(fmt.Sprintf("lane %d: unexpected message %d (rendezvous %v)", l.id, m.seq, m.rndv),
		buf[:m.wireN], m.wire()); err != nil {
		return err
	}
	m.how, m.buf = tmUnexpectedMsg, wc.WRID
	m.ticks[tickResolved], m.ticks[tickPolled] = s.tick, s.tick
	s.swUnexp++
	s.needSync = true
	s.count.unexp++
	m.dst, ok = s.rcv.pool.alloc(tmClass(m.n))
	if !ok {
		return fmt.Errorf("lane %d: no room for software's copy of message %d", l.id, m.seq)
	}
	dst := s.rcv.pool.mr.Buf()[m.dst : m.dst+m.n]
	copy(dst, s.inv[m.srcOff:])
	if !m.rndv {
		copy(dst, buf[wire.TMHLen:m.wireN])
		s.freeSlots = append(s.freeSlots, k)
		if err := s.checkBytes(fmt.Sprintf("lane %d: software's copy of unexpected message %d", l.id, m.seq), dst, s.src[m.srcOff:m.srcOff+m.n]); err != nil {
			return err
		}
		m.done = true
		return l.finishMsg(m)
	}
	s.count.unexpRndv++
	rvh := wire.RVH(bytes.Clone(buf[wire.TMHLen : wire.TMHLen+wire.RVHLen])) // the buffer goes back now
	s.freeSlots = append(s.freeSlots, k)
	return s.softwareRead(l, m, rvh)
}

// softwareRead starts software's rendezvous of m: a READ of the RVH's
// range into a buffer of its own, then (softwareCompletion) the FIN.
func (s *tmSoak) softwareRead(l *tmLane, m *tmMsg, rvh wire.RVH) error {
	m.swRndv = true
	if m.dst < 0 {
		var ok bool
		if m.dst, ok = s.rcv.pool.alloc(tmClass(m.n)); !ok {
			return fmt.Errorf("lane %d: no room for software's copy of message %d", l.id, m.seq)
		}
	}
	copy(s.rcv.pool.mr.Buf()[m.dst:m.dst+m.n], s.inv[m.srcOff:])
	s.pending = append(s.pending, tmPost{l: l, wr: ibv.SendWR{WRID: 1<<tmOpsKind | uint64(m.id), Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
		SGList: splitSGE(s.rng, s.rcv.pool.mr, m.dst, m.n), RemoteAddr: rvh.VA(), RKey: rvh.RKey()}})
	return nil
}

// softwareCompletion checks a completion of software's READ or FIN on a
// receiver QP.
func (l *tmLane) softwareCompletion(wc *ibv.WorkCompletion) error {
	s := l.s
	m := s.msgOf(uint32(wc.WRID))
	if m == nil || m.lane != l || wc.Status != ibv.WCSuccess || !m.swRndv || m.done {
		return fmt.Errorf("lane %d: software's %+v: want a rendezvous of the lane software has, successful", l.id, *wc)
	}
	switch {
	case wc.WRID>>tmOpsKind == 1 && wc.Opcode == ibv.WCRDMARead && wc.ByteLen == uint32(m.n):
		if err := s.checkBytes(fmt.Sprintf("lane %d: software's READ of unexpected rendezvous %d", l.id, m.seq),
			s.rcv.pool.mr.Buf()[m.dst:m.dst+m.n], s.src[m.srcOff:m.srcOff+m.n]); err != nil {
			return err
		}
		var fin [wire.TMHLen]byte
		wire.PutTMH(fin[:], wire.TMFin, m.id, m.tag)
		s.pending = append(s.pending, tmPost{l: l, wr: ibv.SendWR{WRID: 2<<tmOpsKind | uint64(m.id), Opcode: ibv.WRSend,
			Flags: ibv.SendSignaled | ibv.SendInline, InlineData: fin[:]}})
		return nil
	case wc.WRID>>tmOpsKind == 2 && wc.Opcode == ibv.WCSend && wc.ByteLen == wire.TMHLen:
		m.done = true
		return l.finishMsg(m)
	}
	return fmt.Errorf("lane %d: software's %+v for message %d", l.id, *wc, m.seq)
}

// senderCompletion checks a completion on a sender's CQ: its SENDs in
// order, and the FINs of its rendezvous.
func (l *tmLane) senderCompletion(wc *ibv.WorkCompletion) error {
	s := l.s
	switch wc.Opcode {
	case ibv.WCSend:
		if l.sendDone >= l.sentN {
			return fmt.Errorf("lane %d: send completion %+v with nothing sent", l.id, *wc)
		}
		m := l.msgs[l.sendDone]
		if wc.Status != ibv.WCSuccess || wc.WRID != uint64(m.id) || wc.ByteLen != uint32(m.wireN) {
			return fmt.Errorf("lane %d: send completion %+v, want message %d (%d bytes) to succeed", l.id, *wc, m.seq, m.wireN)
		}
		l.sendDone++
		m.sent = true
		return l.finishMsg(m)
	case ibv.WCRecv:
		l.finBufs--
		if wc.Status != ibv.WCSuccess || wc.ByteLen != wire.TMHLen {
			return fmt.Errorf("lane %d: FIN %+v: want %d bytes, success", l.id, *wc, wire.TMHLen)
		}
		tmh, _ := wire.AsTMH(l.snd.fins.Buf()[int(wc.WRID)*tmFinSlot:])
		m := s.msgOf(tmh.AppCtx())
		if tmh.Op() != wire.TMFin || m == nil || m.lane != l || tmh.Tag() != m.tag || !bytes.Equal(tmh.Reserved(), []byte{0, 0, 0}) {
			return fmt.Errorf("lane %d: FIN %+v holds TMH %v app_ctx %#x tag %#x: want a FIN with a rendezvous's app_ctx and tag", l.id, *wc, tmh.Op(), tmh.AppCtx(), tmh.Tag())
		}
		if !m.rndv || m.fin {
			return fmt.Errorf("lane %d: FIN for message %d (rendezvous %v, FIN seen before %v)", l.id, m.seq, m.rndv, m.fin)
		}
		m.fin = true
		return l.finishMsg(m)
	}
	return fmt.Errorf("lane %d: sender completion %+v", l.id, *wc)
}

// tmQuiet is how long a sender keeps a rendezvous's buffer after its
// FIN before it writes there: a duplicate of the READ request (the
// requester's retransmission, or the fabric's copy, held back for
// reordering until the FIN passed it) may still reach the sender's
// responder, which serves it from memory again (IBTA C9-101: duplicate
// RDMA READs are executed again); the requester drops its responses, but
// the race detector would see the test's write race the engine's read.
// Ten times the fabric's reorder hold.
const tmQuiet = 10 * time.Millisecond

// finishMsg gives a message's buffers back: the sender's once its SEND
// completed and, for a rendezvous, its FIN came and tmQuiet passed,
// poisoned so that a READ of it still to come would fetch the wrong
// bytes; the receiver's once it has checked the data.
func (l *tmLane) finishMsg(m *tmMsg) error {
	s := l.s
	if !m.sfreed && m.sent && (!m.rndv || m.fin) {
		if m.rndv && m.quiet.IsZero() {
			m.quiet = time.Now().Add(tmQuiet)
			l.quiet = append(l.quiet, m)
		}
		if m.rndv && time.Now().Before(m.quiet) {
			return nil
		}
		m.sfreed = true
		buf := l.snd.pool.mr.Buf()[m.sbuf : m.sbuf+tmClassCap(m.sclass)+tmTMHLens]
		copy(buf, s.inv[s.rng.IntN(len(s.inv)-len(buf)+1):])
		l.snd.pool.release(m.sclass, m.sbuf)
	}
	if m.freed || !m.sfreed || !m.done {
		return nil
	}
	m.freed = true
	if m.dst >= 0 {
		s.rcv.pool.release(tmClass(m.n), m.dst)
	}
	l.out--
	s.finished++
	// Its own buffer, if the message went elsewhere, is of no use to it:
	// delete it now, or leave it for a later message of the lane (not
	// the large ones, which would fill the pool).
	if e := m.entry; e != nil && e.by == nil && !e.deleted && !e.delBusy && e.delErr == 0 && e.off >= 0 && (e.class >= 4 || s.rng.IntN(2) == 0) {
		return s.del(e)
	}
	return nil
}

func (s *tmSoak) del(e *tmEntry) error {
	s.tick++
	e.delBusy = true
	s.count.dels++
	if _, err := s.srq.PostOps([]ibv.OpsWR{{WRID: 2<<tmOpsKind | e.id, Opcode: ibv.WRTagDel, Flags: ibv.OpsSignaled, Handle: e.handle}}); err != nil {
		return fmt.Errorf("TAG_DEL of buffer %d: %w", e.id, err)
	}
	return nil
}

func (s *tmSoak) sync(final bool) error {
	s.tick++
	s.count.syncs++
	s.needSync = false
	s.synced = s.swUnexp
	s.syncTicks = append(s.syncTicks, s.tick)
	s.finalSync = final
	_, err := s.srq.PostOps([]ibv.OpsWR{{WRID: 3<<tmOpsKind | uint64(s.count.syncs), Opcode: ibv.WRTagSync,
		Flags: ibv.OpsSignaled | ibv.OpsTMSync, UnexpectedCnt: s.swUnexp}})
	return err
}

func (s *tmSoak) releaseEntry(e *tmEntry) {
	if !e.released {
		e.released = true
		s.rcv.pool.release(e.class, e.off)
	}
}

// flushPending posts software's READs and FINs while the receiver QPs'
// send queues have room (the engine's rendezvous takes slots too).
func (s *tmSoak) flushPending() error {
	left := s.pending[:0]
	for _, p := range s.pending {
		s.tick++
		if _, err := p.l.rqp.PostSend(p.wr); err != nil {
			if errors.Is(err, verbs.ENOMEM) {
				left = append(left, p)
				continue
			}
			return fmt.Errorf("lane %d: software's %v: %w", p.l.id, p.wr.Opcode, err)
		}
	}
	s.pending = left
	return nil
}

// checkInOrder checks the lane's messages, in the order they arrived,
// against the tagged buffers: a message's outcome is checked once every
// message before it has one, so the model knows which buffers they took.
func (l *tmLane) checkInOrder() error {
	s := l.s
	for l.checked < l.sentN {
		m := l.msgs[l.checked]
		if m.how == tmPending {
			return nil
		}
		// listedFor reports whether e was certainly listed, and matched m,
		// when m arrived: posted before (after, for unexpected m: before
		// it was sent), neither taken by an earlier message nor deleted
		// before m was resolved (a TAG_DEL between m's send and its
		// completion might have come first: not counted).
		listedFor := func(e *tmEntry) bool {
			if m.tag&e.mask != e.tag {
				return false
			}
			if e.by != nil && e.by.seq < m.seq {
				return false
			}
			if e.deleted && e.delTick < m.ticks[tickResolved] {
				return false
			}
			return true
		}
		switch m.how {
		case tmInTagged:
			for _, e := range l.entries {
				if e.seq >= m.in.seq {
					break
				}
				if listedFor(e) {
					return fmt.Errorf("lane %d: message %d (tag %#x) took buffer %d (tag %#x mask %#x), but buffer %d (tag %#x mask %#x, taken by %v, deleted %v) was posted before it and matches",
						l.id, m.seq, m.tag, m.in.id, m.in.tag, m.in.mask, e.id, e.tag, e.mask, msgSeq(e.by), e.deleted)
				}
			}
			// Matching was on: software had synced every unexpected
			// message counted before, among them the lane's last.
			if u := l.lastUnex; u != nil {
				i := sort.Search(len(s.syncTicks), func(i int) bool { return s.syncTicks[i] > u.ticks[tickPolled] })
				if i == len(s.syncTicks) || s.syncTicks[i] > m.ticks[tickResolved] {
					return fmt.Errorf("lane %d: message %d matched buffer %d although unexpected message %d was counted before it and software had not synced since",
						l.id, m.seq, m.in.id, u.seq)
				}
			}
		case tmUnexpectedMsg:
			// Unexpected although software was in sync when it was sent
			// (every unexpected message before it counted and synced:
			// matching was on) and a buffer matched: wrong.
			for _, e := range l.entries {
				if e.addTick < m.ticks[tickSent] && listedFor(e) {
					if uint64(m.synced) == m.buf {
						return fmt.Errorf("lane %d: message %d (tag %#x) unexpected (SRQ buffer %d, software synced %d when it was sent), but buffer %d (tag %#x mask %#x) was listed and matches",
							l.id, m.seq, m.tag, m.buf, m.synced, e.id, e.tag, e.mask)
					}
					s.count.unexpOff++
					break
				}
			}
			if uint64(m.synced) > m.buf {
				return fmt.Errorf("lane %d: message %d took SRQ buffer %d, but software had synced %d unexpected messages before it was sent", l.id, m.seq, m.buf, m.synced)
			}
			l.lastUnex = m
		}
		l.checked++
		// Drop buffers no later message can meet: taken by a checked
		// message, or deleted before the next message was sent.
		next := s.tick
		if l.checked < l.sentN {
			next = l.msgs[l.checked].ticks[tickSent]
		}
		l.entries = slices.DeleteFunc(l.entries, func(e *tmEntry) bool {
			return e.by != nil && e.by.seq < l.checked || e.deleted && e.delTick < next
		})
	}
	return nil
}

func msgSeq(m *tmMsg) any {
	if m == nil {
		return "none"
	}
	return m.seq
}

// finish deletes the tagged buffers left, syncs with the final count,
// and checks that nothing more completes and every buffer is accounted
// for.
func (s *tmSoak) finish(wc []ibv.WorkCompletion) error {
	for _, l := range s.lanes {
		if l.checked != l.sentN {
			return fmt.Errorf("lane %d: %d of %d messages checked", l.id, l.checked, l.sentN)
		}
	}
	for _, e := range s.entries {
		if e.by == nil && !e.deleted && !e.delBusy {
			if e.delErr != 0 {
				return fmt.Errorf("TAG_DEL of buffer %d failed with TM_ERR, but no message took it", e.id)
			}
			if err := s.del(e); err != nil {
				return err
			}
		}
	}
	if err := s.sync(true); err != nil {
		return err
	}
	time.Sleep(time.Second)
	synctest.Wait()
	if _, err := s.poll(wc); err != nil {
		return err
	}
	for _, e := range s.entries {
		switch {
		case e.delBusy:
			return fmt.Errorf("TAG_DEL of buffer %d never completed", e.id)
		case e.by == nil && !e.deleted:
			return fmt.Errorf("buffer %d neither taken nor deleted", e.id)
		case e.by != nil && e.delErr != 0 && e.by.ticks[tickSent] > e.delErr:
			return fmt.Errorf("TAG_DEL of buffer %d failed with TM_ERR before message %d, which took it, was sent", e.id, e.by.seq)
		}
	}
	if s.finalSync {
		return errors.New("the last sync never completed")
	}
	if len(s.pending) > 0 {
		return fmt.Errorf("%d software sends never posted", len(s.pending))
	}
	return nil
}

func (s *tmSoak) checkBytes(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	bad := 0
	for j := range got {
		if got[j] != want[j] {
			bad++
		}
	}
	return fmt.Errorf("%s, %d bytes: %d differ, the first at offset %d (PMTU packet %d): got %#x, want %#x", what, len(want), bad, i, i/s.mtu, got[i], want[i])
}

// logState logs where each lane stood when the soak failed.
func (s *tmSoak) logState(t *testing.T) {
	for _, l := range s.lanes {
		t.Logf("lane %d: %d drawn, %d sent, %d send completions, %d checked, %d outstanding; sender QP %v, receiver QP %v",
			l.id, len(l.msgs), l.sentN, l.sendDone, l.checked, l.out, l.sqp.State(), l.rqp.State())
	}
	t.Logf("unexpected polled %d, last sync %d, %d software sends pending; receiver pool %d of %d bytes handed out",
		s.swUnexp, s.synced, len(s.pending), s.rcv.pool.bump, len(s.rcv.pool.mr.Buf()))
	for _, d := range []*tmDev{s.rcv, s.snd[0], s.snd[1]} {
		c := d.dev.Counters()
		t.Logf("device %v: RNR NAKs received %d, timeouts %d, retries exceeded %d, retransmits %d",
			d.dev.Addr(), c.RcvdRNRErr, c.Timeouts, c.RetryExceededErr, c.Retransmits)
	}
}
