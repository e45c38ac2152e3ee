package rc_test

// Work requests, completions, memory patterns and packet matchers of the
// pair tests (harness_test.go).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// sge is the SGE of n bytes at off in e's MR.
func (e *end) sge(off, n int) ibv.SGE {
	return ibv.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

// sendWR is a signaled send work request of n bytes at off in e's MR.
func sendWR(e *end, wrid uint64, op ibv.WROpcode, off, n int) ibv.SendWR {
	return ibv.SendWR{WRID: wrid, Opcode: op, Flags: ibv.SendSignaled, SGList: []ibv.SGE{e.sge(off, n)}}
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
	return ibv.RecvWR{WRID: wrid, SGList: []ibv.SGE{e.sge(off, n)}}
}

// waitWC runs the network until e's CQ holds n completions, within a
// minute of fake time (every retransmission the tests provoke), and takes
// them.
func (e *end) waitWC(n int) []ibv.WorkCompletion {
	e.t.Helper()
	return e.waitWCFor(n, time.Minute)
}

// waitWCFor is waitWC within d.
func (e *end) waitWCFor(n int, d time.Duration) []ibv.WorkCompletion {
	e.t.Helper()
	e.net.RunUntil(fmt.Sprintf("%d completions at %v", n, e.node.Addr()), d, func() bool { return e.cq.Len() >= n })
	return e.cq.Take(n)
}

// noWC fails the test if e's CQ holds completions after d of fake time.
func (e *end) noWC(d time.Duration) {
	e.t.Helper()
	e.net.Run(d)
	if got := e.cq.Take(-1); len(got) > 0 {
		e.t.Fatalf("unexpected completions at %v: %+v", e.node.Addr(), got)
	}
}

// pollAll takes every completion e's CQ holds.
func (e *end) pollAll() []ibv.WorkCompletion { return e.cq.Take(-1) }

// takeEvents returns the events e's QP reported since the last call.
func (e *end) takeEvents() []ibv.AsyncEventType {
	evs := e.events
	e.events = nil
	return evs
}

// wantEvents checks that e's QP reported every event of evs since the
// last takeEvents.
func wantEvents(t testing.TB, who string, e *end, evs ...ibv.AsyncEventType) {
	t.Helper()
	got := e.takeEvents()
	for _, ev := range evs {
		if !slices.Contains(got, ev) {
			t.Errorf("%s events %v, want %v among them", who, got, ev)
		}
	}
}

// wantWC checks one completion's WRID, status and opcode.
func wantWC(t testing.TB, wc ibv.WorkCompletion, wrid uint64, st ibv.WCStatus, op ibv.WCOpcode) {
	t.Helper()
	if wc.WRID != wrid || wc.Status != st || wc.Opcode != op {
		t.Errorf("completion %+v: want wr_id %d, status %q, opcode %d", wc, wrid, st, op)
	}
}

// wantState checks e's QP state.
func wantState(t testing.TB, who string, e *end, want ibv.QPState) {
	t.Helper()
	if got := e.state(); got != want {
		t.Errorf("%s QP state %v, want %v", who, got, want)
	}
}

// wcOpcodeOf is the completion opcode of a send WR's opcode.
func wcOpcodeOf(op ibv.WROpcode) ibv.WCOpcode {
	switch op {
	case ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm:
		return ibv.WCRDMAWrite
	case ibv.WRRDMARead:
		return ibv.WCRDMARead
	case ibv.WRAtomicFetchAndAdd:
		return ibv.WCFetchAdd
	case ibv.WRAtomicCmpAndSwp:
		return ibv.WCCompSwap
	}
	return ibv.WCSend
}

// from matches datagrams sent by e's node.
func from(e *end) fabric.Matcher { return fabric.From(e.node.Addr()) }

// ops matches datagrams sent by e's node with one of the opcodes.
func ops(e *end, op ...wire.Opcode) fabric.Matcher {
	return fabric.And(from(e), fabric.OpcodeIs(op...))
}

// fill writes a pattern derived from seed into b.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed + i*7 + i>>8)
	}
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

// u64 reads the native-endian u64 at b (atomics use CPU byte order).
func u64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func binaryPut(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }

// writeSize and writeOff are the WRITE the loss and reorder tests send:
// seven packets at path MTU 1024 (FIRST, MIDDLE×5, LAST) to writeOff in
// the peer's buffer.
const writeSize, writeOff = 6*1024 + 100, 5000

// writeChecked posts that WRITE (wr_id 7) of a's buffer filled from seed,
// waits for its successful completion and checks b's memory: the data at
// writeOff, every other byte as it was.
func writeChecked(t testing.TB, a, b *end, seed int) {
	t.Helper()
	fill(a.buf[:writeSize], seed)
	want := append([]byte(nil), b.buf...)
	copy(want[writeOff:], a.buf[:writeSize])
	a.post(rdmaWR(a, b, 7, ibv.WRRDMAWrite, 0, writeOff, writeSize))
	wantWC(t, a.waitWC(1)[0], 7, ibv.WCSuccess, ibv.WCRDMAWrite)
	checkBytes(t, "responder memory", b.buf, want)
}
