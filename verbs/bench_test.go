package verbs_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
)

// The benchmarks run two devices on a clean fabric in real time (not in
// a synctest bubble): the numbers are the engine's and the fabric's
// costs, with no network in between. The application side busy-polls its
// CQs, yielding between empty polls, as perftest does.

// benchPair returns a connected RC pair at the given path MTU with a
// 1 MiB buffer on each side.
func benchPair(b *testing.B, mtu ibv.MTU) (a, c *end) {
	b.Helper()
	f := fabric.New(fabric.Config{})
	b.Cleanup(func() { f.Close() })
	return newPair(b, f, pairOpts{mtu: mtu, bufSize: 1 << 20, timeout: 14, retry: 7, rnr: 7, maxWR: 256, cqe: 1024})
}

// poller busy-polls a CQ and fails the benchmark on an unsuccessful
// completion or when nothing completes for ten seconds.
type poller struct {
	b  *testing.B
	wc []ibv.WorkCompletion
}

func newPoller(b *testing.B) *poller { return &poller{b: b, wc: make([]ibv.WorkCompletion, 64)} }

// poll returns the completions cq has now, possibly none.
func (p *poller) poll(cq *verbs.CQ) []ibv.WorkCompletion {
	n := cq.Poll(p.wc)
	for _, w := range p.wc[:n] {
		if w.Status != ibv.WCSuccess {
			p.b.Fatalf("completion %+v", w)
		}
	}
	return p.wc[:n]
}

// wait polls cq until it has at least one completion.
func (p *poller) wait(cq *verbs.CQ) []ibv.WorkCompletion {
	var deadline time.Time
	for i := 0; ; i++ {
		if wc := p.poll(cq); len(wc) > 0 {
			return wc
		}
		if i%1024 == 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(10 * time.Second)
			} else if time.Now().After(deadline) {
				p.b.Fatal("no completion for ten seconds")
			}
		}
		runtime.Gosched()
	}
}

// BenchmarkRCWrite64K measures WRITE throughput: 64 KiB WRITEs at MTU
// 4096 (16 packets each), 16 outstanding.
func BenchmarkRCWrite64K(b *testing.B) {
	benchWindow(b, ibv.WRRDMAWrite, 64<<10, 16)
}

// BenchmarkRCRead64K measures READ throughput: 64 KiB READs at MTU 4096,
// 16 outstanding (the QPs' max_rd_atomic).
func BenchmarkRCRead64K(b *testing.B) {
	benchWindow(b, ibv.WRRDMARead, 64<<10, 16)
}

// benchWindow keeps window signaled WRITEs or READs of size bytes in
// flight from a to c, each on its own 64 KiB slot of both buffers.
func benchWindow(b *testing.B, op ibv.WROpcode, size, window int) {
	a, c := benchPair(b, ibv.MTU4096)
	p := newPoller(b)
	post := func(i int) {
		off := (i % window) * size
		_, err := a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: op, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(off, size)}, RemoteAddr: c.mr.Addr() + uint64(off), RKey: c.mr.RKey()})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	posted, done := 0, 0
	for done < b.N {
		for posted < b.N && posted-done < window {
			post(posted)
			posted++
		}
		done += len(p.wait(a.cq))
	}
}

// BenchmarkRCSend64B measures the message rate of 64-byte SENDs with 128
// outstanding and receives posted ahead; each op is one message, its
// send completion and its receive completion, the receive reposted.
func BenchmarkRCSend64B(b *testing.B) {
	const (
		size   = 64
		window = 128
	)
	a, c := benchPair(b, ibv.MTU1024)
	p := newPoller(b)
	recv := func(i uint64) {
		if _, err := c.qp.PostRecv(ibv.RecvWR{WRID: i, SGList: []ibv.SGE{c.mr.SGE(int(i)*size, size)}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range uint64(2 * window) {
		recv(i)
	}
	wr := ibv.SendWR{Opcode: ibv.WRSend, Flags: ibv.SendSignaled, SGList: []ibv.SGE{a.mr.SGE(0, size)}}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	posted, sent, received := 0, 0, 0
	for sent < b.N || received < b.N {
		for posted < b.N && posted-sent < window {
			wr.WRID = uint64(posted)
			if _, err := a.qp.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		got := false
		for _, w := range p.poll(c.cq) {
			recv(w.WRID)
			received++
			got = true
		}
		if n := len(p.poll(a.cq)); n > 0 {
			sent += n
			got = true
		}
		if !got {
			runtime.Gosched()
		}
	}
}

// BenchmarkRCPingPong8B measures latency, as ibv_rc_pingpong does: a
// SENDs 8 bytes, c answers with 8 bytes when the first arrives, and an op
// ends when the answer is in a's receive buffer.
func BenchmarkRCPingPong8B(b *testing.B) {
	const size = 8
	a, c := benchPair(b, ibv.MTU1024)
	p := newPoller(b)
	recv := func(e *end) {
		if _, err := e.qp.PostRecv(ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{e.mr.SGE(4096, size)}}); err != nil {
			b.Fatal(err)
		}
	}
	send := func(e *end) {
		if _, err := e.qp.PostSend(ibv.SendWR{WRID: 2, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{e.mr.SGE(0, size)}}); err != nil {
			b.Fatal(err)
		}
	}
	// waitRecv polls e's CQ until its receive completes, counting the
	// send completions it passes.
	waitRecv := func(e *end) {
		for {
			for _, w := range p.wait(e.cq) {
				if w.Opcode == ibv.WCRecv {
					return
				}
			}
		}
	}
	recv(a)
	recv(c)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send(a)
		waitRecv(c)
		recv(c)
		send(c)
		waitRecv(a)
		recv(a)
	}
}
