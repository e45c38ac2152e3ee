package verbs_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
)

// pollOnlyLink is a fabric endpoint whose blocking read never returns a
// datagram: a device on it keeps its receive goroutine parked for good,
// so what it receives, only Progress (a poll of an empty CQ) reads.
type pollOnlyLink struct {
	*fabric.Endpoint
	closed chan struct{}
	once   sync.Once
}

func (l *pollOnlyLink) ReadBatch([]link.Datagram) (int, error) {
	<-l.closed
	return 0, link.ErrLinkClosed
}

func (l *pollOnlyLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Endpoint.Close()
}

// A busy-polling application makes progress by polling alone: with one P
// (GOMAXPROCS=1), the receive goroutines never reading, and nothing but
// the test's goroutine running, a SEND, an RDMA WRITE with immediate and
// an RDMA READ complete on both sides within the first round of polls:
// the responder's poll reads the request and answers it, the requester's
// reads the answer. No timing is asserted, only the number of polls. It
// holds whether or not the devices busy-poll in their blocking waits
// (Config.BusyPoll): a poll of an empty CQ reads the link in both.
func TestPollingAloneMakesProgress(t *testing.T) {
	for _, bp := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("BusyPoll=%v", bp), func(t *testing.T) { pollingAloneMakesProgress(t, bp) })
	}
}

func pollingAloneMakesProgress(t *testing.T, busyPoll time.Duration) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	o := pairOpts{timeout: 14, retry: 7, rnr: 7, busyPoll: busyPoll}
	o.defaults()
	end := func(addr string) *end {
		ep, err := f.Attach(netip.MustParseAddr(addr))
		if err != nil {
			t.Fatal(err)
		}
		return newEndOn(t, &pollOnlyLink{Endpoint: ep, closed: make(chan struct{})}, o)
	}
	a, b := end("10.0.0.1"), end("10.0.0.2")
	connect(t, a, b, o, o.sqPSN, o.rqPSN)
	connect(t, b, a, o, o.rqPSN, o.sqPSN)
	// Each modify woke its QP's processor (rc.QP.Modify), which has not
	// run yet on the one P: let it make that pass now. Left runnable, it
	// ran when the Go scheduler preempted this goroutine mid-exchange,
	// took the QP (qpEntry.running) and waited for the QP's lock this
	// goroutine held; the post then found the QP taken and the polls made
	// no progress until the next preemption. With nothing else runnable,
	// the exchanges below are polling alone, as the test means.
	for range 10 {
		runtime.Gosched()
	}

	wc := make([]ibv.WorkCompletion, 4)
	// exchange polls b's CQ then a's until each has one completion, and
	// returns them and the rounds it took.
	exchange := func(what string) (wa, wb ibv.WorkCompletion, rounds int) {
		t.Helper()
		var gotA, gotB bool
		for !gotA || !gotB {
			rounds++
			if rounds > 2 {
				t.Fatalf("%s: no completion on %s after %d rounds of polls: polling alone did not make progress",
					what, map[bool]string{true: "the requester", false: "the responder"}[gotB], rounds-1)
			}
			if !gotB {
				if n := b.cq.Poll(wc[:1]); n == 1 {
					wb, gotB = wc[0], true
				}
			}
			if !gotA {
				if n := a.cq.Poll(wc[:1]); n == 1 {
					wa, gotA = wc[0], true
				}
			}
		}
		return wa, wb, rounds
	}
	for i := range 50 {
		a.buf[0], a.buf[1] = byte(i), byte(i+1)
		postRecv(t, b, ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey()}}})
		_, err := a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{{Addr: a.mr.Addr(), Length: 2, LKey: a.mr.LKey()}}})
		must(t, err)
		wa, wb, _ := exchange("SEND")
		if wa.Status != ibv.WCSuccess || wa.Opcode != ibv.WCSend || wb.Status != ibv.WCSuccess || wb.Opcode != ibv.WCRecv || wb.ByteLen != 2 {
			t.Fatalf("SEND %d: requester %+v, responder %+v", i, wa, wb)
		}
		if b.buf[0] != byte(i) || b.buf[1] != byte(i+1) {
			t.Fatalf("SEND %d: received % x", i, b.buf[:2])
		}

		postRecv(t, b, ibv.RecvWR{WRID: uint64(i), SGList: []ibv.SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey()}}})
		_, err = a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMAWriteWithImm, Flags: ibv.SendSignaled, Imm: uint32(i),
			SGList:     []ibv.SGE{{Addr: a.mr.Addr(), Length: 2, LKey: a.mr.LKey()}},
			RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
		must(t, err)
		wa, wb, _ = exchange("RDMA WRITE with immediate")
		if wa.Status != ibv.WCSuccess || wb.Opcode != ibv.WCRecvRDMAWithImm || wb.Imm != uint32(i) {
			t.Fatalf("WRITE %d: requester %+v, responder %+v", i, wa, wb)
		}

		b.buf[200] = byte(i + 7)
		_, err = a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled,
			SGList:     []ibv.SGE{{Addr: a.mr.Addr() + 300, Length: 1, LKey: a.mr.LKey()}},
			RemoteAddr: b.mr.Addr() + 200, RKey: b.mr.RKey()})
		must(t, err)
		rounds := 0
		for {
			rounds++
			if rounds > 2 {
				t.Fatalf("READ %d: no completion after %d rounds of polls", i, rounds-1)
			}
			// The responder completes nothing for a READ: its poll only
			// drives its NIC, which answers.
			if n := b.cq.Poll(wc[:1]); n != 0 {
				t.Fatalf("READ %d: the responder completed %+v", i, wc[0])
			}
			if n := a.cq.Poll(wc[:1]); n == 1 {
				if wc[0].Status != ibv.WCSuccess || wc[0].Opcode != ibv.WCRDMARead || a.buf[300] != byte(i+7) {
					t.Fatalf("READ %d: %+v, read %#x", i, wc[0], a.buf[300])
				}
				break
			}
		}
	}
}

// A device opened with Config.BusyPoll polls the link before a blocking
// wait sleeps: on a link its receive goroutine never reads, CQ.Wait and
// CompChannel.GetEvent still see the completion the peer's answer brings.
// Without busy polling both would wait out their context.
func TestBusyPollWaits(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	o := pairOpts{timeout: 14, retry: 7, rnr: 7, busyPoll: time.Minute, channel: true}
	o.defaults()
	ep, err := f.Attach(netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	a := newEndOn(t, &pollOnlyLink{Endpoint: ep, closed: make(chan struct{})}, o)
	o.busyPoll = 0
	b := newEnd(t, f, netip.MustParseAddr("10.0.0.2"), o)
	connect(t, a, b, o, o.sqPSN, o.rqPSN)
	connect(t, b, a, o, o.rqPSN, o.sqPSN)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := make([]ibv.WorkCompletion, 1)
	for i := range 20 {
		_, err := a.qp.PostSend(ibv.SendWR{WRID: uint64(i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		must(t, err)
		n, err := a.cq.Wait(ctx, wc)
		if err != nil || n != 1 || wc[0].Status != ibv.WCSuccess || wc[0].WRID != uint64(i) {
			t.Fatalf("WRITE %d: Wait: %d, %v, %+v", i, n, err, wc[0])
		}
	}

	// The same through the completion channel: arm, post, GetEvent.
	for i := range 20 {
		must(t, a.cq.ReqNotify(false))
		_, err := a.qp.PostSend(ibv.SendWR{WRID: uint64(100 + i), Opcode: ibv.WRRDMAWrite, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		must(t, err)
		cq, err := a.ch.GetEvent(ctx)
		if err != nil || cq != a.cq {
			t.Fatalf("WRITE %d: GetEvent: %v, %v", i, cq, err)
		}
		must(t, cq.AckEvents(1))
		if n := a.cq.Poll(wc); n != 1 || wc[0].Status != ibv.WCSuccess || wc[0].WRID != uint64(100+i) {
			t.Fatalf("WRITE %d: polled %d: %+v", i, n, wc[0])
		}
	}
}

// peekByte reads b[i] while the device may be writing it (see
// perftest's peek: the race is the point).
//
//go:norace
//go:noinline
func peekByte(b []byte, i int) byte { return b[i] }

// WaitActivity wakes a goroutine waiting on memory when the device has
// handled the peer's RDMA WRITE into it; it returns false when the device
// did nothing within the timeout, and true at once when the caller's
// check already holds.
func TestWaitActivity(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	a, b := newPair(t, f, pairOpts{timeout: 14, retry: 7, rnr: 7})
	ctx := context.Background()
	// The modifies that connected the QPs ran passes of their own: wait
	// them out, then nothing happens.
	idle := false
	for range 100 {
		if !b.dev.WaitActivity(ctx, time.Millisecond, func() bool { return false }) {
			idle = true
			break
		}
	}
	if !idle {
		t.Fatal("WaitActivity kept reporting activity on an idle device")
	}
	if !b.dev.WaitActivity(ctx, time.Hour, func() bool { return true }) {
		t.Fatal("WaitActivity did not return at once for a check that holds")
	}
	for i := 1; i <= 100; i++ {
		a.buf[0] = byte(i)
		arrived := func() bool { return peekByte(b.buf, 0) == byte(i) }
		done := make(chan int)
		go func() {
			// As perftest's awaitByte: look, and sleep until the device
			// did something, with a timeout far beyond the test's.
			wakes := 0
			for !arrived() {
				if !b.dev.WaitActivity(ctx, time.Hour, arrived) {
					t.Error("WaitActivity timed out")
				}
				wakes++
			}
			done <- wakes
		}()
		post(t, a, rdmaWR(a, b, uint64(i), ibv.WRRDMAWrite, 0, 0, 1))
		if wakes := <-done; wakes > 3 {
			t.Errorf("WRITE %d: %d wake-ups for one WRITE", i, wakes)
		}
		wantWC(t, waitWC(t, a.cq, 1)[0], uint64(i), ibv.WCSuccess, ibv.WCRDMAWrite)
	}
}
