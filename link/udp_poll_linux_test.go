package link

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

// psnOf returns the PSN of a received datagram: buildDatagrams numbers
// them 0, 1, ...
func psnOf(t testing.TB, d *Datagram) int {
	t.Helper()
	b, err := wire.AsBTH(d.Buf)
	if err != nil {
		t.Fatal(err)
	}
	return int(b.PSN())
}

// tryUntil calls TryReadBatch on l until it has returned want datagrams
// in all, as loopback delivers them in the background; the deadline only
// bounds a test that would otherwise spin forever.
func tryUntil(t testing.TB, l *UDPLink, batch, want int) []Datagram {
	t.Helper()
	var got []Datagram
	msgs := rxBatch(batch)
	for deadline := time.Now().Add(10 * time.Second); len(got) < want; {
		n, err := l.TryReadBatch(msgs[:min(batch, want-len(got))])
		if err != nil {
			t.Fatalf("TryReadBatch after %d of %d datagrams: %v", len(got), want, err)
		}
		got = append(got, clone(msgs[:n])...)
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("TryReadBatch returned %d of %d datagrams (stats %+v)", len(got), want, l.Stats())
			}
			runtime.Gosched()
		}
	}
	return got
}

// queued waits until l's socket holds a datagram (SIOCINQ: the length
// of the first one queued, net/ipv4/udp.c udp_ioctl), without receiving
// it or taking the descriptor's read lock (RawConn.Control).
func queued(l *UDPLink) error {
	for deadline := time.Now().Add(10 * time.Second); ; {
		var n int
		var ierr error
		if err := l.sock.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
			return err
		}
		if ierr != nil {
			return fmt.Errorf("SIOCINQ: %w", ierr)
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nothing arrived in the socket")
		}
		runtime.Gosched()
	}
}

func waitQueued(t testing.TB, l *UDPLink) {
	t.Helper()
	if err := queued(l); err != nil {
		t.Fatal(err)
	}
}

// send writes n datagrams of size bytes from la to lb, numbered by PSN
// from 0, in batches of la.BatchSize().
func send(t testing.TB, la, lb *UDPLink, n, size int) {
	t.Helper()
	ss := make([]sample, n)
	for i := range ss {
		ss[i].size = size
	}
	msgs := buildDatagrams(t, newRand(t), la, lb, ss)
	for len(msgs) > 0 {
		k := min(len(msgs), la.BatchSize())
		if w, err := la.WriteBatch(msgs[:k]); err != nil || w != k {
			t.Fatalf("WriteBatch = %d, %v; want %d", w, err, k)
		}
		msgs = msgs[k:]
	}
}

// blockReader starts a goroutine reading lb with ReadBatch, returning
// once that reader has found the socket empty and is about to wait (its
// first recvmmsg returns EAGAIN, as the kernel's does on an empty
// socket: nothing was sent yet). The reader sends every datagram it gets
// on got and its final error on done. lb's recvFault is the hook's.
func blockReader(t *testing.T, lb *UDPLink, got chan<- Datagram) (done <-chan error) {
	t.Helper()
	first := make(chan struct{})
	calls := 0
	lb.recvFault = func(int) sysResult {
		calls++ // under rxMu
		if calls == 1 {
			close(first)
			return sysFail(unix.EAGAIN)
		}
		return sysResult{}
	}
	errc := readInto(lb, got)
	<-first
	return errc
}

// readInto starts a goroutine reading lb with ReadBatch until it fails:
// it sends every datagram it gets on got and its final error on the
// returned channel.
func readInto(lb *UDPLink, got chan<- Datagram) <-chan error {
	errc := make(chan error, 1)
	go func() {
		msgs := rxBatch(lb.BatchSize())
		for {
			n, err := lb.ReadBatch(msgs)
			if err != nil {
				errc <- err
				return
			}
			for _, d := range clone(msgs[:n]) {
				got <- d
			}
		}
	}()
	return errc
}

func forGRO(t *testing.T, f func(t *testing.T, gro bool)) {
	for _, gro := range []bool{false, true} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) { f(t, gro) })
	}
}

// TestUDPTryReadBatch: on an empty socket TryReadBatch returns 0 and no
// error, counting nothing; once datagrams arrive it returns them with
// the Encap, ICRC status and bytes ReadBatch would give.
func TestUDPTryReadBatch(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		if !CanPoll(lb) || !CanPoll(NewPcapLink(lb, nil)) {
			t.Fatal("CanPoll false for the UDP link or a PcapLink over it")
		}
		if !PreferBusyPoll(lb) || !PreferBusyPoll(NewPcapLink(lb, nil)) {
			t.Fatal("PreferBusyPoll false for the UDP link or a PcapLink over it")
		}
		msgs := rxBatch(lb.BatchSize())
		for range 3 {
			if n, err := lb.TryReadBatch(msgs); n != 0 || err != nil {
				t.Fatalf("TryReadBatch on an empty socket = %d, %v; want 0, nil", n, err)
			}
		}
		if n, err := lb.TryReadBatch(nil); n != 0 || err != nil {
			t.Fatalf("TryReadBatch(nil) = %d, %v", n, err)
		}
		ss := []sample{{size: 100}, {size: 100}, {size: 100}, {tc: 0x68, hop: 9, size: 33}}
		sent := buildDatagrams(t, newRand(t), la, lb, ss)
		if n, err := la.WriteBatch(sent); n != len(sent) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		got := tryUntil(t, lb, lb.BatchSize(), len(sent))
		for i := range got {
			d, s := &got[i], &sent[i]
			if !bytes.Equal(d.Buf, s.Buf) {
				t.Fatalf("datagram %d differs from the one sent", i)
			}
			e := d.Encap
			if e.Src != la.LocalAddr() || e.SrcPort != la.Port() || e.Dst != lb.LocalAddr() || e.DstPort != lb.Port() ||
				e.TrafficClass != ss[i].tc {
				t.Errorf("datagram %d: Encap %+v", i, e)
			}
			if d.ICRC != ICRCGuessedIPv4ID || !d.CheckICRC() {
				t.Errorf("datagram %d: ICRC %v, check failed or wrong status", i, d.ICRC)
			}
		}
		if n, err := lb.TryReadBatch(msgs); n != 0 || err != nil {
			t.Fatalf("TryReadBatch after the last datagram = %d, %v", n, err)
		}
		if st := lb.Stats(); st.RxPackets != uint64(len(sent)) || st.RxErrors != 0 {
			t.Fatalf("receiver stats %+v", st)
		}
	})
}

// TestUDPTryReadBatchBesideReadBatch: with a goroutine blocked in
// ReadBatch, TryReadBatch on another returns without waiting for it (a
// TryReadBatch stuck behind the reader would hang the test), and the two
// readers together receive every datagram exactly once. Close then ends
// the blocked reader with ErrLinkClosed, and TryReadBatch returns it too.
func TestUDPTryReadBatchBesideReadBatch(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro, BatchSize: 16})
		fromReader := make(chan Datagram, 4096)
		done := blockReader(t, lb, fromReader)
		msgs := rxBatch(8)
		tried := make(chan error, 1)
		go func() {
			n, err := lb.TryReadBatch(msgs)
			if err == nil && n != 0 {
				err = fmt.Errorf("%d datagrams from an empty socket", n)
			}
			tried <- err
		}()
		select {
		case err := <-tried:
			if err != nil {
				t.Fatalf("TryReadBatch beside a blocked ReadBatch: %v", err)
			}
		case <-time.After(10 * time.Second): // a hang guard, not a timing check
			t.Fatal("TryReadBatch waits for the ReadBatch blocked beside it")
		}

		// Runs of equal sizes: GSO sends, coalesced again with GRO, so
		// that a buffer's segments may go to both readers.
		const total = 512
		send(t, la, lb, total, 64)
		seen := make(map[int]string, total)
		take := func(d *Datagram, who string) {
			p := psnOf(t, d)
			if p < 0 || p >= total {
				t.Fatalf("%s received PSN %d, never sent", who, p)
			}
			if prev, dup := seen[p]; dup {
				t.Fatalf("PSN %d received twice (%s, then %s)", p, prev, who)
			}
			seen[p] = who
		}
		byTry := 0
		for deadline := time.Now().Add(10 * time.Second); len(seen) < total; {
			for drained := false; !drained; {
				select {
				case d := <-fromReader:
					take(&d, "ReadBatch")
				default:
					drained = true
				}
			}
			n, err := lb.TryReadBatch(msgs)
			if err != nil {
				t.Fatal(err)
			}
			for i := range msgs[:n] {
				take(&msgs[i], "TryReadBatch")
			}
			byTry += n
			if n == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("received %d of %d datagrams (stats %+v)", len(seen), total, lb.Stats())
				}
				runtime.Gosched()
			}
		}
		st := lb.Stats()
		t.Logf("TryReadBatch took %d, ReadBatch %d; stats %+v", byTry, total-byTry, st)
		if st.RxPackets != total || st.RxErrors != 0 || st.RxTruncated != 0 {
			t.Fatalf("receiver stats %+v", st)
		}

		if err := lb.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrLinkClosed) {
			t.Fatalf("blocked ReadBatch after Close: %v, want ErrLinkClosed", err)
		}
		for _, m := range [][]Datagram{msgs, nil} {
			if n, err := lb.TryReadBatch(m); n != 0 || !errors.Is(err, ErrLinkClosed) {
				t.Fatalf("TryReadBatch(%d) after Close = %d, %v; want ErrLinkClosed", len(m), n, err)
			}
		}
		if n, err := lb.ReadBatch(msgs); n != 0 || !errors.Is(err, ErrLinkClosed) {
			t.Fatalf("ReadBatch after Close = %d, %v; want ErrLinkClosed", n, err)
		}
	})
}

// sendRun sends total equal 64-byte datagrams from la to lb in one
// WriteBatch (a GSO send where the kernel has GSO) and returns them.
func sendRun(t *testing.T, la, lb *UDPLink, total int) []Datagram {
	t.Helper()
	ss := make([]sample, total)
	for i := range ss {
		ss[i].size = 64
	}
	sent := buildDatagrams(t, newRand(t), la, lb, ss)
	if n, err := la.WriteBatch(sent); n != total || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	return sent
}

// TestUDPGROSplitAcrossReaders: the segments of one coalesced buffer
// handed out partly by TryReadBatch and partly by ReadBatch arrive all,
// in order, once, each with the identification a GSO sender gave it
// (the guess continues across the calls).
func TestUDPGROSplitAcrossReaders(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{})
	if !la.GSO() || !lb.GRO() {
		t.Skip("kernel has no UDP GSO or GRO")
	}
	const total = 16
	sent := sendRun(t, la, lb, total)
	if la.Stats().TxGSOSends != 1 {
		t.Fatalf("want one GSO send of %d segments: %+v", total, la.Stats())
	}
	var got []Datagram
	got = append(got, tryUntil(t, lb, 5, 5)...) // receives the whole buffer, hands out 5
	if st := lb.Stats(); st.RxGRO != 1 {
		t.Skipf("the kernel did not hand the GSO send over coalesced: %+v", st)
	}
	msgs := rxBatch(4)
	n, err := lb.ReadBatch(msgs) // leftovers: no wait
	if n != 4 || err != nil {
		t.Fatalf("ReadBatch of the leftovers = %d, %v; want 4", n, err)
	}
	got = append(got, clone(msgs[:n])...)
	msgs = rxBatch(total)
	if n, err = lb.TryReadBatch(msgs); n != total-9 || err != nil {
		t.Fatalf("TryReadBatch of the rest = %d, %v; want %d", n, err, total-9)
	}
	got = append(got, clone(msgs[:n])...)
	if n, err := lb.TryReadBatch(msgs); n != 0 || err != nil {
		t.Fatalf("TryReadBatch after the buffer = %d, %v", n, err)
	}
	for i := range got {
		d := &got[i]
		// WriteBatch left each Buf as sent: its ICRC patched for
		// identification i, segment i of the GSO send.
		if p := psnOf(t, d); p != i || !bytes.Equal(d.Buf, sent[i].Buf) {
			t.Fatalf("datagram %d: PSN %d, bytes as sent %v", i, p, bytes.Equal(d.Buf, sent[i].Buf))
		}
		if d.Encap.ID != uint16(i) || !d.CheckICRC() || d.ICRC != ICRCGood {
			t.Errorf("datagram %d: identification guessed %d, ICRC %v; want %d, good", i, d.Encap.ID, d.ICRC, i)
		}
	}
	if st := lb.Stats(); st.RxPackets != total || st.RxErrors != 0 {
		t.Fatalf("receiver stats %+v", st)
	}
}

// TestUDPTryReadBatchFaults: recvmmsg's results, from the fault hook,
// mean for TryReadBatch what the kernel's do. EAGAIN (nothing queued):
// 0, not counted. EINTR: retried at once, not counted. A failed call
// (ENOMEM, a pending ECONNREFUSED, a count no kernel gives): 0, counted
// by errno, and nothing lost: the datagrams stay queued for the next
// call. A partial batch: that many.
func TestUDPTryReadBatchFaults(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro, DisableGSO: true})
		const total = 3
		sent := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 40}, {size: 40}, {size: 40}})
		if n, err := la.WriteBatch(sent); n != total || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		waitQueued(t, lb)
		msgs := rxBatch(lb.BatchSize())
		var calls []int // vlen of each hooked call
		step := func(res sysResult, wantN int, wantCalls int, wantErrs [NumLinkErrnos]uint64) {
			t.Helper()
			calls = calls[:0]
			first := true
			lb.recvFault = func(vlen int) sysResult {
				calls = append(calls, vlen)
				if first {
					first = false
					return res
				}
				return sysResult{}
			}
			n, err := lb.TryReadBatch(msgs)
			lb.recvFault = nil
			if n != wantN || err != nil || len(calls) != wantCalls {
				t.Fatalf("fault %+v: TryReadBatch = %d, %v after %d calls; want %d, nil after %d", res, n, err, len(calls), wantN, wantCalls)
			}
			if st := lb.Stats(); st.RxErrnos != wantErrs {
				t.Fatalf("fault %+v: errors by errno %v, want %v", res, st.RxErrnos, wantErrs)
			}
		}
		var errs [NumLinkErrnos]uint64
		step(sysFail(unix.EAGAIN), 0, 1, errs)
		step(sysFail(unix.ENOMEM), 0, 1, incr(&errs, ErrnoOther))
		step(sysFail(unix.ECONNREFUSED), 0, 1, incr(&errs, ErrnoECONNREFUSED))
		step(sysResult{r1: 0, hit: true}, 0, 1, incr(&errs, ErrnoOther))
		step(sysResult{r1: 1 << 20, hit: true}, 0, 1, incr(&errs, ErrnoOther))
		step(sysPartial(1), 1, 1, errs) // one queued at least (waitQueued)
		got := clone(msgs[:1])
		waitQueued(t, lb)
		// EINTR: the same call retries and receives.
		calls = calls[:0]
		lb.recvFault = func(vlen int) sysResult {
			calls = append(calls, vlen)
			if len(calls) == 1 {
				return sysFail(unix.EINTR)
			}
			return sysResult{}
		}
		n, err := lb.TryReadBatch(msgs[:1])
		lb.recvFault = nil
		if n != 1 || err != nil || len(calls) != 2 {
			t.Fatalf("EINTR: TryReadBatch = %d, %v after %d calls; want 1, nil after 2", n, err, len(calls))
		}
		got = append(got, clone(msgs[:1])...)
		got = append(got, tryUntil(t, lb, 4, total-len(got))...)
		for i := range got {
			if !bytes.Equal(got[i].Buf, sent[i].Buf) { // as sent: WriteBatch patched it
				t.Fatalf("datagram %d differs from the one sent", i)
			}
		}
		if st := lb.Stats(); st.RxPackets != total || st.RxErrors != 4 || st.RxErrnos != errs {
			t.Fatalf("receiver stats %+v", st)
		}
	})
}

func incr(a *[NumLinkErrnos]uint64, c LinkErrno) [NumLinkErrnos]uint64 {
	a[c]++
	return *a
}

// TestUDPReadBatchEINTRDoesNotPark: an EINTR from recvmmsg with
// datagrams queued makes ReadBatch try again, not wait for a readiness
// that those datagrams, already queued, will never signal.
func TestUDPReadBatchEINTRDoesNotPark(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		sent := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 40}})
		if n, err := la.WriteBatch(sent); n != 1 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		waitQueued(t, lb)
		calls := 0
		lb.recvFault = func(int) sysResult {
			calls++
			if calls == 1 {
				return sysFail(unix.EINTR)
			}
			return sysResult{}
		}
		readN(t, lb, 1) // fails after 5 s if parked
		if st := lb.Stats(); calls != 2 || st.RxErrors != 0 {
			t.Fatalf("%d calls, stats %+v; want 2 calls and no error counted", calls, st)
		}
	})
}

// TestUDPReadBatchEAGAINWaits: a ReadBatch whose recvmmsg finds the
// socket empty (EAGAIN, not counted) waits, and a datagram that arrives
// after that EAGAIN and before the reader parks wakes it: the hook sends
// it and waits until the socket holds it before returning the EAGAIN,
// which puts its arrival in that window every time.
func TestUDPReadBatchEAGAINWaits(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		sent := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 40}})
		hookErr := make(chan error, 1)
		calls := 0
		lb.recvFault = func(int) sysResult {
			calls++
			if calls > 1 {
				return sysResult{}
			}
			var err error
			if n, werr := la.WriteBatch(sent); n != 1 || werr != nil {
				err = fmt.Errorf("WriteBatch = %d, %v", n, werr)
			} else {
				err = queued(lb)
			}
			hookErr <- err
			return sysFail(unix.EAGAIN)
		}
		got := readN(t, lb, 1) // fails after 5 s if the reader stays parked
		if err := <-hookErr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0].Buf, sent[0].Buf) { // as sent: WriteBatch patched it
			t.Fatal("received datagram differs from the one sent")
		}
		if st := lb.Stats(); calls != 2 || st.RxErrors != 0 || st.RxPackets != 1 {
			t.Fatalf("%d calls, stats %+v; want 2 calls, no error counted", calls, st)
		}
	})
}

// TestUDPTryReadBatchNoAllocs: a TryReadBatch allocates nothing, empty or
// not.
func TestUDPTryReadBatchNoAllocs(t *testing.T) {
	forGRO(t, func(t *testing.T, gro bool) {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		msgs := buildDatagrams(t, newRand(t), la, lb, make([]sample, 8))
		rx := rxBatch(lb.BatchSize())
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := lb.TryReadBatch(rx); err != nil {
				t.Fatal(err)
			}
			if _, err := la.WriteBatch(msgs); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < len(msgs); {
				n, err := lb.TryReadBatch(rx)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
		})
		if allocs != 0 {
			t.Errorf("%.1f allocations per round trip, want 0", allocs)
		}
	})
}

// BenchmarkUDPTryReadBatch is BenchmarkUDPReadBatch receiving with
// TryReadBatch, retried while loopback has not delivered yet.
func BenchmarkUDPTryReadBatch(b *testing.B) {
	benchRoundTrip(b, func(l *UDPLink, msgs []Datagram) (int, error) { return l.TryReadBatch(msgs) })
}

// TestUDPGROHeadersReused: with GRO a receive pass prepares again only
// the headers the last recvmmsg wrote (the kernel shortens a header's
// control length to what it wrote there). Rounds that alternate lone
// datagrams with runs that GRO coalesces (one more control message),
// read in batches of changing sizes with empty polls between them, still
// come out whole, with their traffic class and segmentation.
func TestUDPGROHeadersReused(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{BatchSize: 16})
	if !lb.GRO() {
		t.Skip("kernel has no UDP GRO")
	}
	rng := newRand(t)
	msgs := rxBatch(16)
	for round, batch := range []int{16, 3, 1, 16, 5, 2, 16, 7} {
		var ss []sample
		if round%2 == 0 {
			for range 12 { // a run: GSO out, coalesced by GRO
				ss = append(ss, sample{tc: 0x20, hop: 64, size: 200})
			}
		} else {
			for i := range 5 { // lone datagrams, each its own TC
				ss = append(ss, sample{tc: uint8(0x40 + 4*i), hop: uint8(10 + i), size: 50 + 30*i})
			}
		}
		sent := buildDatagrams(t, rng, la, lb, ss)
		if n, err := la.WriteBatch(sent); n != len(sent) || err != nil {
			t.Fatalf("round %d: WriteBatch = %d, %v", round, n, err)
		}
		got := tryUntil(t, lb, batch, len(sent))
		for i := range got {
			if !bytes.Equal(got[i].Buf, sent[i].Buf) || got[i].Encap.TrafficClass != ss[i].tc || !got[i].CheckICRC() {
				t.Fatalf("round %d (batches of %d): datagram %d: %d bytes, TC %#x, ICRC %v; sent %d bytes, TC %#x",
					round, batch, i, len(got[i].Buf), got[i].Encap.TrafficClass, got[i].CheckICRC(), len(sent[i].Buf), ss[i].tc)
			}
		}
		for range 3 {
			if n, err := lb.TryReadBatch(msgs[:batch]); n != 0 || err != nil {
				t.Fatalf("round %d: TryReadBatch on an empty socket = %d, %v", round, n, err)
			}
		}
	}
	if st := lb.Stats(); st.RxErrors != 0 || st.RxTruncated != 0 {
		t.Fatalf("receiver stats %+v", st)
	}
}

// TestUDPTryReadBatchWakesTheReader: GRO segments TryReadBatch leaves in
// the link's buffers reach a ReadBatch parked on the (now empty) socket
// without further traffic, and every datagram is numbered in the order it
// was handed out (Datagram.Seq). The recvFault hook lets one recvmmsg
// through, TryReadBatch's, so that the parked reader does not take the
// GSO send itself.
func TestUDPTryReadBatchWakesTheReader(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{})
	if !la.GSO() || !lb.GRO() {
		t.Skip("kernel has no UDP GSO or GRO")
	}
	var allow atomic.Bool
	calls := make(chan struct{}, 64)
	lb.recvFault = func(int) sysResult {
		select {
		case calls <- struct{}{}:
		default:
		}
		if !allow.CompareAndSwap(true, false) {
			return sysFail(unix.EAGAIN)
		}
		return sysResult{}
	}
	start, ok := NextSeq(lb) // what a NIC asks before it reads
	if !ok {
		t.Fatal("the UDP link does not say which Seq comes next")
	}
	got := make(chan Datagram, 64)
	readInto(lb, got)
	<-calls // the reader found the socket empty: it waits
	const total = 16
	sendRun(t, la, lb, total)
	<-calls // the send woke the reader; it was told the socket is empty and waits again
	allow.Store(true)
	msgs := rxBatch(5)
	n, err := lb.TryReadBatch(msgs)
	if n == 0 && err == nil && !allow.Load() {
		// The parked reader woke again and made the one call allowed
		// first: it took the send, and delivers it (maybe not yet).
		select {
		case <-got:
			t.Skip("the parked reader woke again and took the send first")
		case <-time.After(10 * time.Second):
			t.Fatal("the allowed call was made, but neither reader delivered the send")
		}
	}
	if n != 5 || err != nil {
		t.Fatalf("TryReadBatch = %d, %v; want 5", n, err)
	}
	if st := lb.Stats(); st.RxGRO != 1 {
		t.Skipf("the kernel did not hand the GSO send over coalesced: %+v", st)
	}
	all := clone(msgs[:n])
	timeout := time.After(10 * time.Second)
	for len(all) < total {
		select {
		case d := <-got:
			all = append(all, d)
		case <-timeout:
			t.Fatalf("the parked reader got %d of the %d segments TryReadBatch left", len(all)-5, total-5)
		}
	}
	for i := range all {
		if p := psnOf(t, &all[i]); p != i || all[i].Seq != all[0].Seq+uint64(i) || all[0].Seq == 0 {
			t.Fatalf("datagram %d: PSN %d, Seq %d (the first %d)", i, p, all[i].Seq, all[0].Seq)
		}
	}
	if next, _ := NextSeq(lb); all[0].Seq != start || next != start+total {
		t.Errorf("Seq from %d, NextSeq %d before and %d after %d datagrams", all[0].Seq, start, next, total)
	}
}

// A read yield (SetReadYield) is asked whenever ReadBatch finds the
// socket empty: at once, and at each wake-up (WakeRead's, as a datagram
// that a poll took first gives). True ends the read with 0 datagrams and
// no error; false waits on; a queued datagram is read whatever it says.
// Through a PcapLink too, which records nothing for an empty read; a
// closed link and a link without the methods refuse.
func TestUDPReadYield(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{})
	var yield atomic.Bool
	var asks atomic.Int32
	if !SetReadYield(lb, func() bool { asks.Add(1); return yield.Load() }) {
		t.Fatal("SetReadYield on a UDP link reported false")
	}
	read := func(l Link) chan int {
		done := make(chan int, 1)
		go func() {
			n, err := l.ReadBatch(rxBatch(4))
			if err != nil {
				n = -1
			}
			done <- n
		}()
		return done
	}
	wait := func(what string, done chan int, want int) {
		t.Helper()
		select {
		case n := <-done:
			if n != want {
				t.Fatalf("%s: ReadBatch = %d, want %d", what, n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadBatch did not return", what)
		}
	}
	awaitAsks := func(what string, above int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); asks.Load() <= above; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the read yield was not asked", what)
			}
		}
	}

	// Yielding, empty socket: 0 at once. A queued datagram: read.
	yield.Store(true)
	wait("yield, empty", read(lb), 0)
	sendRun(t, la, lb, 1)
	wait("yield, a datagram queued", read(lb), 1)
	// Not yielding: the read waits; a wake-up makes it ask, and it waits
	// on; a datagram then ends it.
	yield.Store(false)
	before := asks.Load()
	done := read(lb)
	awaitAsks("the first look", before)
	before = asks.Load()
	if !WakeRead(lb) {
		t.Fatal("WakeRead on an open UDP link reported false")
	}
	awaitAsks("woken, not yielding", before)
	select {
	case n := <-done:
		t.Fatalf("woken with the yield false, ReadBatch returned %d", n)
	default:
	}
	sendRun(t, la, lb, 1)
	wait("woken, not yielding, then a datagram", done, 1)
	// Waiting, then yielding and woken: 0.
	before = asks.Load()
	done = read(lb)
	awaitAsks("the first look", before)
	yield.Store(true)
	WakeRead(lb)
	wait("woken, yielding", done, 0)
	// A wake-up with no reader: the next read asks at once (here: waits
	// on, not yielding), and still reads.
	yield.Store(false)
	WakeRead(lb)
	done = read(lb)
	sendRun(t, la, lb, 1)
	wait("a wake-up before the read", done, 1)

	// Through a PcapLink, which records nothing for an empty read.
	var rec recorder
	p := NewPcapLink(lb, &rec)
	yield.Store(true)
	if !SetReadYield(p, func() bool { return yield.Load() }) {
		t.Fatal("SetReadYield through a PcapLink reported false")
	}
	wait("through a PcapLink", read(p), 0)
	yield.Store(false)
	done = read(p)
	WakeRead(p)
	yield.Store(true)
	WakeRead(p)
	wait("woken through a PcapLink", done, 0)
	rec.mu.Lock()
	if len(rec.recs) != 0 {
		t.Errorf("the PcapLink recorded %d datagrams for reads of none", len(rec.recs))
	}
	rec.mu.Unlock()
	// nil takes the yield away: the read waits for a datagram.
	SetReadYield(lb, nil)
	done = read(lb)
	sendRun(t, la, lb, 1)
	wait("no yield", done, 1)

	la.Close()
	lb.Close()
	if WakeRead(lb) {
		t.Error("WakeRead on a closed link reported true")
	}
	if SetReadYield(&queueLink{}, func() bool { return true }) || WakeRead(&queueLink{}) {
		t.Error("SetReadYield or WakeRead on a link without the methods reported true")
	}
}
