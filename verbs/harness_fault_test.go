package verbs_test

// Helpers of the API tests that watch the wire (memory windows, solicited
// events, the receive fuzzer, ...): a tap that records what the fabric
// carries, a raw peer, and completion helpers. Everything runs inside a
// testing/synctest bubble, so "time" is the bubble's fake clock. The
// transports' own protocol tests are beside the transports, in
// internal/transport/rc and ud, on the kit internal/transport/transporttest.

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// seen is one datagram as a recorder saw it: a private copy, and the fake
// time the fabric was offered it.
type seen struct {
	fabric.Packet
	at time.Time
}

// op returns the packet's opcode.
func (p *seen) op() wire.Opcode { return p.Wire.Opcode }

// recorder keeps every datagram offered to a fabric, in order.
type recorder struct {
	mu   sync.Mutex
	pkts []seen // guarded by mu
}

// record taps f until the test ends.
func record(t testing.TB, f *fabric.Fabric) *recorder {
	r := &recorder{}
	remove := f.Tap(func(p fabric.Packet) {
		s := seen{Packet: p.Clone(), at: time.Now()}
		r.mu.Lock()
		r.pkts = append(r.pkts, s)
		r.mu.Unlock()
	})
	t.Cleanup(remove)
	return r
}

// match returns the recorded datagrams m matches, in order.
func (r *recorder) match(m fabric.Matcher) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seen
	for i := range r.pkts {
		if m == nil || m(&r.pkts[i].Packet) {
			out = append(out, r.pkts[i])
		}
	}
	return out
}

// count returns how many recorded datagrams m matches.
func (r *recorder) count(m fabric.Matcher) int { return len(r.match(m)) }

// reset forgets what was recorded so far.
func (r *recorder) reset() {
	r.mu.Lock()
	r.pkts = nil
	r.mu.Unlock()
}

// from matches datagrams sent by e's device.
func from(e *end) fabric.Matcher { return fabric.From(e.dev.Addr()) }

// ops matches datagrams sent by e's device with one of the opcodes.
func ops(e *end, op ...wire.Opcode) fabric.Matcher {
	return fabric.And(from(e), fabric.OpcodeIs(op...))
}

// fill writes a pattern derived from seed into b.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed + i*7 + i>>8)
	}
}

// pattern returns n bytes of fill's pattern.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// checkBytes fails the test unless got equals want, naming the first
// difference.
func checkBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: byte %d is %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// pollAll returns every completion cq holds now.
func pollAll(cq *verbs.CQ) []ibv.WorkCompletion {
	var got []ibv.WorkCompletion
	buf := make([]ibv.WorkCompletion, 16)
	for {
		k := cq.Poll(buf)
		if k == 0 {
			return got
		}
		got = append(got, buf[:k]...)
	}
}

// settle lets the engines finish everything they can do at the current
// fake time, then lets d of fake time pass (timers due in it fire).
func settle(d time.Duration) {
	synctest.Wait()
	if d > 0 {
		time.Sleep(d)
		synctest.Wait()
	}
}

// noWC fails the test if cq holds completions after d of fake time.
func noWC(t testing.TB, cq *verbs.CQ, d time.Duration) {
	t.Helper()
	settle(d)
	if got := pollAll(cq); len(got) > 0 {
		t.Fatalf("unexpected completions: %+v", got)
	}
}

// waitUntil polls cond every 10µs of fake time for at most d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%v passed waiting for %s", d, what)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// wantWC checks one completion's WRID, status and opcode.
func wantWC(t testing.TB, wc ibv.WorkCompletion, wrid uint64, st ibv.WCStatus, op ibv.WCOpcode) {
	t.Helper()
	if wc.WRID != wrid || wc.Status != st || wc.Opcode != op {
		t.Errorf("completion %+v: want wr_id %d, status %q, opcode %d", wc, wrid, st, op)
	}
}

// sendWR is a signaled send work request of n bytes at off in e's MR.
func sendWR(e *end, wrid uint64, op ibv.WROpcode, off, n int) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: op, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{e.mr.SGE(off, n)}}
}

// rdmaWR is a signaled RDMA work request of n bytes between off in e's MR
// and roff in peer's MR.
func rdmaWR(e, peer *end, wrid uint64, op ibv.WROpcode, off, roff, n int) ibv.SendWR {
	w := sendWR(e, wrid, op, off, n)
	w.RemoteAddr, w.RKey = peer.mr.Addr()+uint64(roff), peer.mr.RKey()
	return w
}

// recvWR is a receive work request of n bytes at off in e's MR.
func recvWR(e *end, wrid uint64, off, n int) ibv.RecvWR {
	return ibv.RecvWR{WRID: wrid, SGList: []ibv.SGE{e.mr.SGE(off, n)}}
}

// post posts send WRs on e's QP, failing the test on error.
func post(t testing.TB, e *end, wrs ...ibv.SendWR) {
	t.Helper()
	if _, err := e.qp.PostSend(wrs...); err != nil {
		t.Fatalf("post send: %v", err)
	}
}

// postRecv posts receive WRs on e's QP, failing the test on error.
func postRecv(t testing.TB, e *end, wrs ...ibv.RecvWR) {
	t.Helper()
	if _, err := e.qp.PostRecv(wrs...); err != nil {
		t.Fatalf("post recv: %v", err)
	}
}

// modify modifies e's QP, failing the test on error.
func modify(t testing.TB, e *end, attr ibv.QPAttr, mask ibv.AttrMask) {
	t.Helper()
	if err := e.qp.Modify(&attr, mask); err != nil {
		t.Fatalf("modify QP: %v", err)
	}
}

// wantState checks e's QP state.
func wantState(t testing.TB, who string, e *end, want ibv.QPState) {
	t.Helper()
	if got := e.qp.State(); got != want {
		t.Errorf("%s QP state %v, want %v", who, got, want)
	}
}

// rawPeer is a bare fabric endpoint playing the requester of an RC
// connection to a device QP: tests build its packets byte by byte, which
// no verbs requester would send (misaligned atomics, oversized READs,
// broken opcode sequences).
type rawPeer struct {
	ep    *fabric.Endpoint
	qpn   uint32 // the QPN the device QP sends its responses to
	encap wire.Encap
	dst   uint32 // the device QP's QPN
}

// newRawPeer makes a device at 10.0.0.2 whose RC QP in RTS is connected
// to a raw endpoint at 10.0.0.1 (QPN 0x99), both directions starting at
// PSN psn.
func newRawPeer(t testing.TB, f *fabric.Fabric, o pairOpts, psn uint32) (*end, *rawPeer) {
	t.Helper()
	o.defaults()
	addr := netip.MustParseAddr("10.0.0.1")
	ep, err := f.Attach(addr)
	if err != nil {
		t.Fatal(err)
	}
	b := newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
	raw := &rawPeer{ep: ep, qpn: 0x99, dst: b.qp.QPN()}
	must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1,
		AccessFlags: ibv.AccessRemoteWrite | ibv.AccessRemoteRead | ibv.AccessRemoteAtomic},
		ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags))
	must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR, PathMTU: o.mtu, DestQPN: raw.qpn, RQPSN: psn,
		MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AHAttr: ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: addr, HopLimit: 1}}},
		ibv.QPAttrState|ibv.QPAttrAV|ibv.QPAttrPathMTU|ibv.QPAttrDestQPN|ibv.QPAttrRQPSN|
			ibv.QPAttrMaxDestRdAtomic|ibv.QPAttrMinRNRTimer))
	must(t, b.qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS, SQPSN: psn, Timeout: o.timeout,
		RetryCnt: o.retry, RNRRetry: o.rnr, MaxRdAtomic: 16},
		ibv.QPAttrState|ibv.QPAttrSQPSN|ibv.QPAttrTimeout|ibv.QPAttrRetryCnt|
			ibv.QPAttrRNRRetry|ibv.QPAttrMaxQPRdAtomic))
	raw.encap = wire.Encap{Src: addr, Dst: b.dev.Addr(), SrcPort: wire.ConnectedSrcPort(raw.qpn, raw.dst),
		DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF}
	return b, raw
}
