package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

var (
	lo1  = netip.MustParseAddr("127.0.0.1")
	lo2  = netip.MustParseAddr("127.0.0.2")
	lo6  = netip.MustParseAddr("::1")
	qpSP = uint16(0xC123) // an rxe-style per-QP source port
)

// listenPair opens two UDP links, on a and b, on a free port (b on the
// next port when a == b).
func listenPair(t testing.TB, a, b netip.Addr, cfg UDPConfig) (*UDPLink, *UDPLink) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for range 100 {
		p := uint16(20000 + r.IntN(30000))
		pb := p
		if a == b {
			pb++
		}
		ca, cb := cfg, cfg
		ca.Addr, ca.Port = a, p
		cb.Addr, cb.Port = b, pb
		la, err := ListenUDP(ca)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		lb, err := ListenUDP(cb)
		if errors.Is(err, syscall.EADDRINUSE) {
			la.Close()
			continue
		}
		if err != nil {
			la.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { la.Close(); lb.Close() })
		return la, lb
	}
	t.Fatal("no free UDP port pair")
	return nil, nil
}

// gsoModes are the send modes a test runs in: with UDP GSO, and without.
var gsoModes = []struct {
	name string
	gso  bool
}{{"gso", true}, {"plain", false}}

// hasIPv6Loopback reports whether ::1 can be bound.
func hasIPv6Loopback() bool {
	l, err := ListenUDP(UDPConfig{Addr: lo6, Port: 0xFFF0})
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	l.Close()
	return true
}

// sample is a datagram the round-trip test sends.
type sample struct {
	tc, hop uint8
	size    int // payload bytes
}

// buildDatagrams builds SEND packets from a to b over the Encap the engine
// would use (a per-QP source port, identification 0, DF).
func buildDatagrams(t testing.TB, r *rand.Rand, a, b *UDPLink, ss []sample) []Datagram {
	t.Helper()
	msgs := make([]Datagram, len(ss))
	for i, s := range ss {
		e := wire.Encap{Src: a.LocalAddr(), Dst: b.LocalAddr(), SrcPort: qpSP, DstPort: b.Port(),
			TrafficClass: s.tc, HopLimit: s.hop}
		if e.IsIPv4() {
			e.FragOff = wire.IPv4DF
		}
		payload := make([]byte, s.size)
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey,
			DestQP: 0x11, PSN: wire.PSN(i)}}
		buf := make([]byte, MaxDatagram)
		n, err := wire.Build(buf, &e, &h, payload)
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = Datagram{Encap: e, Buf: buf[:n]}
	}
	return msgs
}

// readN reads n datagrams from l with buffers of cap MaxDatagram, failing
// after a few seconds.
func readN(t testing.TB, l *UDPLink, n int) []Datagram {
	t.Helper()
	var got []Datagram
	done := make(chan error, 1)
	go func() {
		msgs := make([]Datagram, l.BatchSize())
		for len(got) < n {
			for i := range msgs {
				msgs[i] = Datagram{Buf: make([]byte, 0, MaxDatagram)}
			}
			k, err := l.ReadBatch(msgs)
			if err != nil {
				done <- err
				return
			}
			got = append(got, msgs[:k]...)
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(got), n, err)
		}
	case <-time.After(5 * time.Second):
		l.Close()
		<-done
		t.Fatalf("received %d of %d datagrams (stats %+v)", len(got), n, l.Stats())
	}
	return got
}

// roundTripSamples has runs of equal sizes (GSO material), a shorter tail,
// and changes of traffic class and hop limit that end runs.
func roundTripSamples() []sample {
	var ss []sample
	for range 20 {
		ss = append(ss, sample{size: 4096})
	}
	ss = append(ss, sample{size: 1000}, sample{size: 0})
	for range 5 {
		ss = append(ss, sample{tc: 0x68, hop: 7, size: 1024})
	}
	ss = append(ss, sample{tc: 2, hop: 1, size: 1024}, sample{size: 33}, sample{size: 33}, sample{size: 31})
	return ss
}

func TestUDPRoundTrip(t *testing.T) {
	modes := []struct {
		name     string
		gso, gro bool
	}{{"gso+gro", true, true}, {"gso", true, false}, {"gro", false, true}, {"plain", false, false}}
	fams := []struct {
		name string
		a, b netip.Addr
	}{{"ipv4", lo1, lo2}, {"ipv6", lo6, lo6}}
	for _, f := range fams {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				if f.a.Is6() && !hasIPv6Loopback() {
					t.Skip("no IPv6 loopback (::1) on this machine")
				}
				la, lb := listenPair(t, f.a, f.b, UDPConfig{DisableGSO: !m.gso, DisableGRO: !m.gro})
				if m.gso && !la.GSO() {
					t.Logf("kernel has no UDP GSO; testing the plain path")
				}
				if m.gro && !lb.GRO() {
					t.Logf("kernel has no UDP GRO; testing the plain path")
				}
				r := newRand(t)
				ss := roundTripSamples()
				msgs := buildDatagrams(t, r, la, lb, ss)
				sent := make([][]byte, len(msgs))
				for i := range msgs {
					sent[i] = bytes.Clone(msgs[i].Buf)
				}
				n, err := la.WriteBatch(msgs)
				if err != nil || n != len(msgs) {
					t.Fatalf("WriteBatch = %d, %v; want %d", n, err, len(msgs))
				}
				// The sender rewrote each Encap to the wire headers and
				// patched the ICRC to match them.
				for i := range msgs {
					e := &msgs[i].Encap
					if e.SrcPort != la.Port() || e.Src != la.LocalAddr() {
						t.Errorf("datagram %d sent as %v:%d, want %v:%d", i, e.Src, e.SrcPort, la.LocalAddr(), la.Port())
					}
					if err := wire.CheckICRC(e, msgs[i].Buf); err != nil {
						t.Errorf("datagram %d: ICRC for the wire headers %+v: %v", i, *e, err)
					}
				}
				st := la.Stats()
				if m.gso && la.GSO() && st.TxGSOSends == 0 {
					t.Errorf("GSO on but no GSO sends: %+v", st)
				}
				if !la.GSO() && st.TxGSOSends != 0 {
					t.Errorf("GSO off but %d GSO sends", st.TxGSOSends)
				}
				got := readN(t, lb, len(msgs))
				for i, d := range got {
					s := ss[i]
					e := d.Encap
					want := msgs[i].Encap
					if e.Src != la.LocalAddr() || e.SrcPort != la.Port() || e.Dst != lb.LocalAddr() || e.DstPort != lb.Port() {
						t.Errorf("datagram %d: %v:%d > %v:%d, want %v:%d > %v:%d", i, e.Src, e.SrcPort, e.Dst, e.DstPort,
							la.LocalAddr(), la.Port(), lb.LocalAddr(), lb.Port())
					}
					if e.TrafficClass != s.tc || e.HopLimit != want.HopLimit {
						t.Errorf("datagram %d: tc %#x hop %d, want %#x %d", i, e.TrafficClass, e.HopLimit, s.tc, want.HopLimit)
					}
					if len(d.Buf) != len(sent[i]) || !bytes.Equal(d.Buf[:len(d.Buf)-4], sent[i][:len(sent[i])-4]) {
						t.Fatalf("datagram %d: %d bytes, differ from the %d sent", i, len(d.Buf), len(sent[i]))
					}
					// The link hands over every header field the ICRC
					// covers as it was on the wire but an IPv4
					// identification, which it guesses (0, or i for the
					// i-th segment of a GRO buffer: wrong when GSO
					// segments arrive apart) and the check solves for.
					wantICRC := ICRCUnchecked
					if e.IsIPv4() {
						wantICRC = ICRCGuessedIPv4ID
					}
					if d.ICRC != wantICRC {
						t.Errorf("datagram %d: ICRC %v, want %v", i, d.ICRC, wantICRC)
					}
					if !d.CheckICRC() {
						t.Errorf("datagram %d: ICRC check failed (%+v)", i, d.Encap)
					}
					e = d.Encap
					if e.ID != want.ID {
						t.Errorf("datagram %d: identification %#x, want %#x", i, e.ID, want.ID)
					}
					if err := wire.CheckICRC(&e, d.Buf); err != nil {
						t.Errorf("datagram %d: ICRC for the received headers %+v: %v", i, e, err)
					}
				}
				rs := lb.Stats()
				if rs.RxPackets != uint64(len(msgs)) || rs.RxTruncated != 0 {
					t.Errorf("receiver stats %+v", rs)
				}
				t.Logf("sender %+v receiver %+v", st, rs)
			})
		}
	}
}

func TestUDPPortInUse(t *testing.T) {
	la, _ := listenPair(t, lo1, lo2, UDPConfig{})
	_, err := ListenUDP(UDPConfig{Addr: lo1, Port: la.Port()})
	if err == nil {
		t.Fatal("second link on the same address and port opened")
	}
	want := fmt.Sprintf("127.0.0.1:%d is already in use", la.Port())
	if !strings.Contains(err.Error(), want) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("error %q: want it to say %q and wrap EADDRINUSE", err, want)
	}
	for _, a := range []netip.Addr{{}, netip.IPv4Unspecified(), netip.IPv6Unspecified(), netip.MustParseAddr("224.0.0.1")} {
		if l, err := ListenUDP(UDPConfig{Addr: a}); err == nil {
			l.Close()
			t.Errorf("ListenUDP(%v) succeeded", a)
		}
	}
}

func TestUDPCloseUnblocksRead(t *testing.T) {
	la, _ := listenPair(t, lo1, lo2, UDPConfig{})
	done := make(chan error, 1)
	go func() {
		msgs := []Datagram{{Buf: make([]byte, 0, MaxDatagram)}}
		_, err := la.ReadBatch(msgs)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it block; the test passes either way
	la.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLinkClosed) {
			t.Fatalf("ReadBatch after Close: %v, want ErrLinkClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock ReadBatch")
	}
	if _, err := la.WriteBatch([]Datagram{{}}); !errors.Is(err, ErrLinkClosed) {
		t.Fatalf("WriteBatch after Close: %v", err)
	}
	if err := la.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestUDPIPv4ICRCSkip(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{IPv4ICRC: IPv4ICRCSkip})
	msgs := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 8}})
	if _, err := la.WriteBatch(msgs); err != nil {
		t.Fatal(err)
	}
	if d := readN(t, lb, 1)[0]; d.ICRC != ICRCUnverifiable {
		t.Fatalf("IPv4 datagram in skip mode: ICRC %v, want %v", d.ICRC, ICRCUnverifiable)
	}
}

func TestUDPBadEncapDropped(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{})
	msgs := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 8}, {size: 8}, {size: 8}, {size: 8}, {size: 8}, {size: 8}})
	msgs[0].Encap.Dst = lo6 // wrong family
	msgs[1].Encap.DstPort = 0
	// Payloads placed outside Buf, or with no ICRC after them.
	for i, split := range []int{-1, len(msgs[2].Buf) - wire.ICRCLen + 1, len(msgs[2].Buf) + 1} {
		msgs[2+i].Payload, msgs[2+i].Split = []byte{1, 2, 3, 4}, split
	}
	n, err := la.WriteBatch(msgs)
	if err != nil || n != 1 {
		t.Fatalf("WriteBatch = %d, %v; want 1", n, err)
	}
	if st := la.Stats(); st.TxBadEncap != 5 {
		t.Fatalf("TxBadEncap = %d, want 5", st.TxBadEncap)
	}
	for i, want := range []syscall.Errno{unix.EAFNOSUPPORT, unix.EDESTADDRREQ, unix.EINVAL, unix.EINVAL, unix.EINVAL, 0} {
		if msgs[i].Err != want {
			t.Errorf("datagram %d: Err %v, want %v", i, msgs[i].Err, want)
		}
	}
	if msgs[0].Encap.Dst.IsValid() || msgs[1].Encap.Dst.IsValid() || msgs[5].Encap.SrcPort != la.Port() {
		t.Fatalf("Encaps after the write: %+v", msgs)
	}
	readN(t, lb, 1)
}

// TestUDPNoAllocs checks the datapath allocates nothing per batch.
func TestUDPNoAllocs(t *testing.T) {
	for _, gro := range []bool{false, true} {
		la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		ss := make([]sample, 16)
		for i := range ss {
			ss[i].size = 1024
		}
		msgs := buildDatagrams(t, newRand(t), la, lb, ss)
		rx := make([]Datagram, lb.BatchSize())
		for i := range rx {
			rx[i].Buf = make([]byte, 0, MaxDatagram)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := la.WriteBatch(msgs); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < len(msgs); {
				n, err := lb.ReadBatch(rx)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
		})
		if allocs != 0 {
			t.Errorf("gro=%v: %.1f allocations per batch round trip, want 0", gro, allocs)
		}
	}
}

func BenchmarkUDPLink(b *testing.B) {
	for _, m := range []struct {
		name     string
		gso, gro bool
	}{{"plain", false, false}, {"gso", true, false}, {"gso+gro", true, true}} {
		// One sender, one receiver over loopback; the sender is not paced,
		// so what the receiver cannot take is lost (%delivered). Both do
		// the engine's share of the ICRC: datagrams are sent as the engine
		// builds them (the link's source port, identification 0, so only
		// GSO segments 1, 2, ... are patched) and every datagram received
		// is checked as the engine does (Datagram.CheckICRC).
		b.Run(m.name, func(b *testing.B) {
			la, lb := listenPair(b, lo1, lo2, UDPConfig{DisableGSO: !m.gso, DisableGRO: !m.gro})
			ss := make([]sample, 32)
			for i := range ss {
				ss[i].size = 4096
			}
			msgs := buildDatagrams(b, rand.New(rand.NewPCG(1, 2)), la, lb, ss)
			built := make([]wire.Encap, len(msgs))
			icrc := make([]uint32, len(msgs))
			for i := range msgs {
				msgs[i].Encap.SrcPort = la.SrcPort()
				wire.SetICRC(&msgs[i].Encap, msgs[i].Buf)
				built[i], icrc[i] = msgs[i].Encap, wire.StoredICRC(msgs[i].Buf)
			}
			rx := make([]Datagram, lb.BatchSize())
			for i := range rx {
				rx[i].Buf = make([]byte, 0, MaxDatagram)
			}
			var bad atomic.Uint64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					n, err := lb.ReadBatch(rx)
					if err != nil {
						return
					}
					for i := range rx[:n] {
						d := &rx[i]
						if !d.CheckICRC() {
							bad.Add(1)
						}
					}
				}
			}()
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				for i := range msgs {
					// As the transports hand them over: built afresh.
					msgs[i].Encap = built[i]
					binary.LittleEndian.PutUint32(msgs[i].Buf[len(msgs[i].Buf)-wire.ICRCLen:], icrc[i])
				}
				if _, err := la.WriteBatch(msgs); err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			time.Sleep(20 * time.Millisecond)
			lb.Close()
			<-done
			st := lb.Stats()
			b.ReportMetric(float64(st.RxBytes)*8/elapsed.Seconds()/1e9, "Gbit/s-delivered")
			b.ReportMetric(float64(st.RxPackets)/float64(b.N*len(msgs))*100, "%delivered")
			if bad.Load() != 0 {
				b.Errorf("%d datagrams received with a bad ICRC", bad.Load())
			}
		})
	}
}

// TestUDPSendFaults drives the send error paths: a kernel refusing GSO
// (EIO) turns GSO off and the batch goes out plainly, with every ICRC
// patched to identification 0; any other error drops that message's
// datagrams, counts them by errno and marks them. Batches longer than
// BatchSize go out in chunks. The faults are the syscall's own results:
// -1 with an errno, or a partial count.
func TestUDPSendFaults(t *testing.T) {
	la, lb := listenPair(t, lo1, lo2, UDPConfig{BatchSize: 16})
	if !la.GSO() {
		t.Skip("no UDP GSO on this kernel")
	}
	la.sendFault = func(tx *udpTx, vlen int) sysResult {
		// sendmmsg sends the plain messages before the first GSO one
		// and stops there; the next call fails on it with EIO.
		for k := range vlen {
			if tx.count[tx.start+k] > 1 {
				if k == 0 {
					return sysFail(unix.EIO)
				}
				return sysPartial(k)
			}
		}
		return sysResult{}
	}
	ss := make([]sample, 40)
	for i := range ss {
		ss[i].size = 1024
	}
	msgs := buildDatagrams(t, newRand(t), la, lb, ss)
	for i := 1; i < len(msgs); i += 2 {
		msgs[i] = splitDatagram(msgs[i], ss[i].size) // patched again for the plain sends too
	}
	n, err := la.WriteBatch(msgs)
	if err != nil || n != len(msgs) {
		t.Fatalf("WriteBatch = %d, %v; want %d", n, err, len(msgs))
	}
	if la.GSO() {
		t.Fatal("GSO still on after EIO")
	}
	for i, d := range readN(t, lb, len(msgs)) {
		if d.Encap.ID != 0 || wire.CheckICRC(&d.Encap, d.Buf) != nil {
			t.Fatalf("datagram %d: ID %d, ICRC %v", i, d.Encap.ID, wire.CheckICRC(&d.Encap, d.Buf))
		}
	}
	if st := la.Stats(); st.TxGSOSends != 0 || st.TxPackets != uint64(len(msgs)) || st.TxGSOFallbacks != 1 || st.TxErrors != 0 {
		t.Fatalf("stats after fallback %+v", st)
	}

	// Each call sends one message and stops (a partial batch); every
	// third call fails with EMSGSIZE.
	calls := 0
	la.sendFault = func(_ *udpTx, vlen int) sysResult {
		calls++
		if calls%3 == 0 {
			return sysFail(unix.EMSGSIZE)
		}
		return sysPartial(1)
	}
	msgs = buildDatagrams(t, newRand(t), la, lb, ss[:6])
	n, err = la.WriteBatch(msgs)
	if err != nil || n != 4 {
		t.Fatalf("WriteBatch = %d, %v; want 4", n, err)
	}
	for i, d := range msgs {
		want := unix.Errno(0)
		if i == 2 || i == 5 {
			want = unix.EMSGSIZE
		}
		if d.Err != want {
			t.Errorf("datagram %d: Err %v, want %v", i, d.Err, want)
		}
	}
	st := la.Stats()
	if st.TxErrors != 2 || st.TxErrnos[ErrnoEMSGSIZE] != 2 {
		t.Fatalf("TxErrors %d, by errno %v; want 2 EMSGSIZE", st.TxErrors, st.TxErrnos)
	}
	readN(t, lb, n)
}

// TestUDPSyscallResults feeds WriteBatch and ReadBatch every kind of
// result sendmmsg and recvmmsg return — -1 with each counted errno, a
// partial batch followed by the failing message's errno, and results no
// kernel gives (no message and no error, a count above vlen) — and
// checks that nothing panics, every datagram is either sent or marked
// and counted, and the receiver gets exactly the sent ones. (A send's
// ECONNREFUSED is the socket's error, sent again once:
// TestUDPSendRetriesSocketError.)
func TestUDPSyscallResults(t *testing.T) {
	errnos := []unix.Errno{unix.EMSGSIZE, unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EPERM, unix.ENOBUFS,
		unix.EACCES}
	for _, gso := range []bool{false, true} {
		for _, e := range errnos {
			t.Run(fmt.Sprintf("gso=%v/%v", gso, e), func(t *testing.T) {
				la, lb := listenPair(t, lo1, lo2, UDPConfig{BatchSize: 8, DisableGSO: !gso})
				// Calls: 1: -1/e; 2: 2 messages; 3: -1/e (the message
				// that stopped call 2); 4: a count of 0 with no error;
				// 5: a count above vlen; then the real kernel.
				calls := 0
				la.sendFault = func(_ *udpTx, vlen int) sysResult {
					calls++
					switch calls {
					case 1, 3:
						return sysFail(e)
					case 2:
						return sysPartial(min(2, vlen))
					case 4:
						return sysResult{r1: 0, hit: true}
					case 5:
						return sysResult{r1: uintptr(vlen + 1), hit: true}
					}
					return sysResult{}
				}
				// Runs of 512, 512, 511 bytes: GSO sends of three.
				ss := make([]sample, 12)
				for i := range ss {
					ss[i].size = 512 - 4*(i%3/2)
				}
				msgs := buildDatagrams(t, newRand(t), la, lb, ss)
				n, err := la.WriteBatch(msgs)
				if err != nil {
					t.Fatal(err)
				}
				failed := 0
				for _, d := range msgs {
					if d.Err != 0 {
						failed++
					}
				}
				st := la.Stats()
				if n+failed != len(msgs) || uint64(n) != st.TxPackets || uint64(failed) != st.TxErrors {
					t.Fatalf("WriteBatch = %d, %d marked failed, of %d; stats %+v", n, failed, len(msgs), st)
				}
				var sum uint64
				for _, v := range st.TxErrnos {
					sum += v
				}
				if sum != st.TxErrors || st.TxErrnos[LinkErrnoOf(e)] == 0 || st.TxErrnos[ErrnoOther] == 0 {
					t.Fatalf("errors by errno %v (total %d): want %v and other counted", st.TxErrnos, st.TxErrors, e)
				}
				if n == 0 {
					t.Fatal("nothing sent after the faults")
				}
				got := readN(t, lb, n)
				// What arrived is exactly the datagrams not marked, in order.
				j := 0
				for i := range msgs {
					if msgs[i].Err != 0 {
						continue
					}
					if !bytes.Equal(got[j].Buf[:len(got[j].Buf)-4], msgs[i].Buf[:len(msgs[i].Buf)-4]) {
						t.Fatalf("received datagram %d is not sent datagram %d", j, i)
					}
					j++
				}
			})
		}
	}
}

// TestUDPSendRetriesSocketError: a sendmmsg that fails with ECONNREFUSED
// took the socket's error (an ICMP port unreachable about an earlier
// datagram, with IP_RECVERR) and sent nothing: the link sends the
// message again, once, and the datagram goes out uncounted as an error;
// a second ECONNREFUSED for the same message drops it, marked and
// counted.
func TestUDPSendRetriesSocketError(t *testing.T) {
	for _, refusals := range []int{1, 2} {
		t.Run(fmt.Sprint(refusals), func(t *testing.T) {
			la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGSO: true})
			calls := 0
			la.sendFault = func(_ *udpTx, vlen int) sysResult {
				calls++
				if calls <= refusals {
					return sysFail(unix.ECONNREFUSED)
				}
				return sysResult{}
			}
			msgs := buildDatagrams(t, newRand(t), la, lb, []sample{{size: 256}, {size: 256}})
			n, err := la.WriteBatch(msgs)
			if err != nil {
				t.Fatal(err)
			}
			st := la.Stats()
			switch refusals {
			case 1:
				if n != 2 || msgs[0].Err != 0 || st.TxErrors != 0 {
					t.Fatalf("WriteBatch = %d, first Err %v, stats %+v; want both sent, no error", n, msgs[0].Err, st)
				}
			case 2:
				if n != 1 || msgs[0].Err != unix.ECONNREFUSED || st.TxErrnos[ErrnoECONNREFUSED] != 1 {
					t.Fatalf("WriteBatch = %d, first Err %v, stats %+v; want the first refused twice dropped", n, msgs[0].Err, st)
				}
			}
			readN(t, lb, n)
		})
	}
}

// TestUDPRecvFaults: recvmmsg failing (-1 with an errno, each counted
// and retried), returning a partial batch, or a count no kernel gives,
// loses no datagram and panics nothing, with and without GRO.
func TestUDPRecvFaults(t *testing.T) {
	for _, gro := range []bool{false, true} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro, DisableGSO: true})
			ss := make([]sample, 10)
			for i := range ss {
				ss[i].size = 256
			}
			msgs := buildDatagrams(t, newRand(t), la, lb, ss)
			if n, err := la.WriteBatch(msgs); err != nil || n != len(msgs) {
				t.Fatalf("WriteBatch = %d, %v", n, err)
			}
			seq := []sysResult{sysFail(unix.ECONNREFUSED), sysFail(unix.ENOBUFS), sysPartial(1),
				{r1: 0, hit: true}, sysFail(unix.ENOMEM), {r1: 1 << 20, hit: true}, sysPartial(3)}
			calls := 0
			lb.recvFault = func(vlen int) sysResult {
				calls++
				if calls <= len(seq) {
					return seq[calls-1]
				}
				return sysResult{}
			}
			got := readN(t, lb, len(msgs))
			for i := range got {
				if !bytes.Equal(got[i].Buf, msgs[i].Buf) {
					t.Fatalf("datagram %d differs", i)
				}
			}
			st := lb.Stats()
			if st.RxErrors != 5 || st.RxErrnos[ErrnoECONNREFUSED] != 1 || st.RxErrnos[ErrnoENOBUFS] != 1 ||
				st.RxErrnos[ErrnoOther] != 3 || st.RxPackets != uint64(len(msgs)) {
				t.Fatalf("receiver stats %+v", st)
			}
		})
	}
}

// TestUDPSendsTheICRCAsComputed: a datagram built as the engine builds it
// (the link's SrcPort, identification 0, DF) goes out with its ICRC as
// computed; the one fix-up left on the way is the identification of GSO
// segments 1, 2, ..., which the kernel numbers as it cuts them.
func TestUDPSendsTheICRCAsComputed(t *testing.T) {
	for _, m := range gsoModes {
		t.Run(m.name, func(t *testing.T) {
			la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGSO: !m.gso})
			if la.SrcPort() != la.Port() {
				t.Fatalf("SrcPort %d, want the bound port %d", la.SrcPort(), la.Port())
			}
			ss := make([]sample, 8)
			for i := range ss {
				ss[i] = sample{size: 512, hop: 64}
			}
			msgs := buildDatagrams(t, newRand(t), la, lb, ss)
			sent := make([]Datagram, len(msgs))
			for i := range msgs {
				msgs[i].Encap.SrcPort = la.SrcPort()
				wire.SetICRC(&msgs[i].Encap, msgs[i].Buf)
				sent[i] = Datagram{Encap: msgs[i].Encap, Buf: bytes.Clone(msgs[i].Buf)}
			}
			if n, err := la.WriteBatch(msgs); n != len(msgs) || err != nil {
				t.Fatalf("WriteBatch = %d, %v; want %d", n, err, len(msgs))
			}
			for i := range msgs {
				d, s := &msgs[i], &sent[i]
				want := s.Encap
				if la.GSO() {
					want.ID = uint16(i) // one GSO send of 8 equal segments
				}
				if d.Encap != want {
					t.Errorf("datagram %d went out as %+v, want %+v", i, d.Encap, want)
				}
				if patched := !bytes.Equal(d.Buf, s.Buf); patched != (want.ID != 0) {
					t.Errorf("datagram %d (identification %d): ICRC patched %v", i, want.ID, patched)
				}
				if err := wire.CheckICRC(&d.Encap, d.Buf); err != nil {
					t.Errorf("datagram %d: %v", i, err)
				}
			}
			readN(t, lb, len(msgs))
		})
	}
}

// splitDatagram returns d (a SEND_ONLY: a BTH, then size payload bytes)
// as the engine hands over one whose payload lies in the application's
// memory (Datagram.Payload): the payload moved to a buffer of its own,
// Buf the rest.
func splitDatagram(d Datagram, size int) Datagram {
	hdr := wire.BTHLen
	d.Payload = bytes.Clone(d.Buf[hdr : hdr+size])
	d.Buf = append(bytes.Clone(d.Buf[:hdr]), d.Buf[hdr+size:]...)
	d.Split = hdr
	return d
}

// flat returns a datagram's bytes in one slice.
func flat(d *Datagram) []byte {
	if d.Payload == nil {
		return d.Buf
	}
	return slices.Concat(d.Buf[:d.Split], d.Payload, d.Buf[d.Split:])
}

// A datagram whose payload lies apart (Datagram.Payload) goes on the wire
// as the same bytes as the one made of its pieces, in GSO sends too
// (split and whole datagrams of one size in one send) and with the ICRC
// patched for each segment's identification; the receiver gets whole
// datagrams whose ICRCs check. Sending allocates nothing.
func TestUDPSendsSplitDatagrams(t *testing.T) {
	if !(&UDPLink{}).SendsSplit() {
		t.Fatal("the UDP link does not say it sends split datagrams")
	}
	for _, m := range gsoModes {
		t.Run(m.name, func(t *testing.T) {
			la, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGSO: !m.gso})
			ss := roundTripSamples()
			msgs := buildDatagrams(t, newRand(t), la, lb, ss)
			for i := range msgs {
				// Every other datagram with a payload is split: GSO
				// groups mix the two kinds.
				if ss[i].size > 0 && i%2 == 0 {
					msgs[i] = splitDatagram(msgs[i], ss[i].size)
				}
			}
			sent := make([][]byte, len(msgs))
			for i := range msgs {
				sent[i] = bytes.Clone(flat(&msgs[i]))
			}
			if n, err := la.WriteBatch(msgs); n != len(msgs) || err != nil {
				t.Fatalf("WriteBatch = %d, %v; want %d", n, err, len(msgs))
			}
			for i := range msgs {
				if err := wire.CheckICRC(&msgs[i].Encap, flat(&msgs[i])); err != nil {
					t.Errorf("datagram %d (split %v): ICRC for the wire headers %+v: %v", i, msgs[i].Payload != nil, msgs[i].Encap, err)
				}
			}
			st := la.Stats()
			if m.gso && la.GSO() && st.TxGSOSends == 0 {
				t.Errorf("GSO on but no GSO sends: %+v", st)
			}
			var bytesSent uint64
			for _, b := range sent {
				bytesSent += uint64(len(b))
			}
			if st.TxBytes != bytesSent {
				t.Errorf("TxBytes %d, want %d", st.TxBytes, bytesSent)
			}
			got := readN(t, lb, len(msgs))
			for i, d := range got {
				if !bytes.Equal(d.Buf[:len(d.Buf)-4], sent[i][:len(sent[i])-4]) {
					t.Fatalf("datagram %d: received\n% x\nsent\n% x", i, d.Buf, sent[i])
				}
				if !d.CheckICRC() {
					t.Errorf("datagram %d: ICRC check failed (%+v)", i, d.Encap)
				}
			}
			// Sent again as built, with no allocation.
			built := buildDatagrams(t, newRand(t), la, lb, ss)
			for i := range built {
				if ss[i].size > 0 && i%2 == 0 {
					built[i] = splitDatagram(built[i], ss[i].size)
				}
			}
			again := make([]Datagram, len(built))
			allocs := testing.AllocsPerRun(20, func() {
				copy(again, built)
				if _, err := la.WriteBatch(again); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%.1f allocations per WriteBatch of split datagrams, want 0", allocs)
			}
		})
	}
}

// With Lend, the segments of a GRO-coalesced buffer are handed over in
// place (Datagram.Loan), the caller's buffers left alone; a buffer with
// datagrams still held is not read into again (the next read takes
// another), and one whose datagrams were all released is. Without GRO
// there is nothing to lend.
func TestUDPLends(t *testing.T) {
	if _, lb := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: true}); lb.Lend() {
		t.Error("Lend on a link without GRO said yes")
	}
	la, lb := listenPair(t, lo1, lo2, UDPConfig{})
	if !lb.GRO() || !la.GSO() {
		t.Skip("kernel has no UDP GSO or GRO")
	}
	if !Lend(NewPcapLink(lb, &recorder{})) || !lb.rx.lend {
		t.Fatal("Lend through a PcapLink did not reach the UDP link")
	}
	ss := make([]sample, 16)
	for i := range ss {
		ss[i].size = 1024
	}
	r := newRand(t)
	// read reads one GSO send's 16 datagrams in batches of 5 (leftovers
	// between reads), into caller buffers filled with 0xEE.
	rx := make([]Datagram, 5)
	read := func() ([]Datagram, [][]byte) {
		t.Helper()
		msgs := buildDatagrams(t, r, la, lb, ss)
		var sent [][]byte
		for i := range msgs {
			sent = append(sent, bytes.Clone(msgs[i].Buf))
		}
		if n, err := la.WriteBatch(msgs); n != len(msgs) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		var got []Datagram
		for len(got) < len(msgs) {
			for i := range rx {
				rx[i] = Datagram{Buf: bytes.Repeat([]byte{0xEE}, 64)[:0]}
			}
			n, err := lb.ReadBatch(rx)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range rx[n:] {
				if d.Loan != nil {
					t.Fatal("a datagram past n has a Loan")
				}
			}
			got = append(got, rx[:n]...)
		}
		for i := range got {
			if got[i].Loan == nil {
				t.Fatalf("datagram %d of a GRO buffer was copied, not lent (stats %+v)", i, lb.Stats())
			}
			if !bytes.Equal(got[i].Buf[:len(got[i].Buf)-4], sent[i][:len(sent[i])-4]) || !got[i].CheckICRC() {
				t.Fatalf("datagram %d: lent bytes differ from those sent", i)
			}
			if cap(got[i].Buf) != len(got[i].Buf) {
				t.Errorf("datagram %d: Buf has room past its end (cap %d, len %d)", i, cap(got[i].Buf), len(got[i].Buf))
			}
		}
		return got, sent
	}
	held, sent := read()
	first := lb.rx.loans[0]
	// Still held: the next reads must not write into their buffers.
	for range 3 {
		got, _ := read()
		for _, d := range got {
			d.Loan.Release()
		}
	}
	for i, d := range held {
		if !bytes.Equal(d.Buf[:len(d.Buf)-4], sent[i][:len(sent[i])-4]) {
			t.Fatalf("held datagram %d was overwritten by a later read", i)
		}
	}
	if lb.rx.loans[0] == first {
		t.Error("the read after a held buffer read into it again")
	}
	st := lb.Stats()
	if st.RxLent != 64 || st.RxLentReleased != 48 {
		t.Errorf("lent %d, released %d; want 64 and 48", st.RxLent, st.RxLentReleased)
	}
	for _, d := range held {
		d.Loan.Release()
	}
	if st := lb.Stats(); st.RxLentReleased != 64 {
		t.Errorf("released %d, want 64", st.RxLentReleased)
	}
	// Released: read into again.
	again := lb.rx.loans[0]
	got, _ := read()
	if lb.rx.loans[0] != again {
		t.Error("a released buffer was not read into again")
	}
	for _, d := range got {
		d.Loan.Release()
	}
}

// A Loan goes back to its pool when the link let go of it and its last
// reference is released, not before; one with no reference held stays
// with the link.
func TestLoanReferences(t *testing.T) {
	var released atomic.Uint64
	pool := newLoanPool(16, &released)
	l := pool.Get().(*Loan)
	if !l.keep() || l.state.Load() != 0 {
		t.Fatalf("keep of a loan with no reference: state %#x, want kept and 0", l.state.Load())
	}
	l.lend()
	l.lend()
	if l.keep() {
		t.Fatal("keep of a loan with two references said yes")
	}
	l.Release()
	if got := l.state.Load(); got != loanDetached+1 {
		t.Fatalf("after one release: state %#x, want detached with one reference", got)
	}
	l.Release()
	if got := l.state.Load(); got != 0 || released.Load() != 2 {
		t.Fatalf("after the last release: state %#x, %d released; want 0 and 2", got, released.Load())
	}
}

// BenchmarkUDPReadBatch measures the receive path without loss: each op
// writes 32 datagrams of 1 KiB over loopback and reads them back with
// ReadBatch on the same goroutine, so that the receiver never falls
// behind (BenchmarkUDPLink's sender is not paced and its receiver loses).
func BenchmarkUDPReadBatch(b *testing.B) {
	benchRoundTrip(b, func(l *UDPLink, msgs []Datagram) (int, error) { return l.ReadBatch(msgs) })
}

// benchRoundTrip runs BenchmarkUDPReadBatch's loop with read as the
// receive call, without and with GRO.
func benchRoundTrip(b *testing.B, read func(*UDPLink, []Datagram) (int, error)) {
	for _, m := range []struct {
		name string
		gro  bool
	}{{"plain", false}, {"gso+gro", true}} {
		b.Run(m.name, func(b *testing.B) {
			la, lb := listenPair(b, lo1, lo2, UDPConfig{DisableGSO: !m.gro, DisableGRO: !m.gro})
			ss := make([]sample, 32)
			for i := range ss {
				ss[i].size = 1024
			}
			msgs := buildDatagrams(b, rand.New(rand.NewPCG(1, 2)), la, lb, ss)
			rx := make([]Datagram, lb.BatchSize())
			for i := range rx {
				rx[i].Buf = make([]byte, 0, MaxDatagram)
			}
			b.SetBytes(int64(len(msgs) * 1024))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := la.WriteBatch(msgs); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(msgs); {
					n, err := read(lb, rx)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
			if st := lb.Stats(); st.RxKernelDrops != 0 {
				b.Fatalf("the kernel dropped %d datagrams", st.RxKernelDrops)
			}
		})
	}
}

// A read fills msgs[:n] and leaves msgs[n:] as they were (link.Link): the
// engine refills only the datagrams a read returned. With and without
// GRO, by ReadBatch and by TryReadBatch.
func TestUDPReadLeavesTheRestAlone(t *testing.T) {
	for _, gro := range []bool{false, true} {
		a, b := listenPair(t, lo1, lo2, UDPConfig{DisableGRO: !gro})
		r := newRand(t)
		for _, try := range []bool{false, true} {
			sent := buildDatagrams(t, r, a, b, []sample{{size: 100}, {size: 100}})
			if n, err := a.WriteBatch(sent); n != 2 || err != nil {
				t.Fatalf("WriteBatch: %d, %v", n, err)
			}
			msgs := rxBatch(8)
			for i := range msgs {
				msgs[i].Buf = msgs[i].Buf[:i] // a length no read gives
				msgs[i].ICRC = ICRCBad
				msgs[i].Seq = uint64(100 + i)
			}
			before := slices.Clone(msgs)
			got := 0
			for deadline := time.Now().Add(5 * time.Second); got < 2 && time.Now().Before(deadline); {
				var n int
				var err error
				if try {
					n, err = b.TryReadBatch(msgs[got:])
				} else {
					n, err = b.ReadBatch(msgs[got:])
				}
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
			if got != 2 {
				t.Fatalf("gro %v, try %v: read %d of 2 datagrams", gro, try, got)
			}
			for i := 2; i < len(msgs); i++ {
				m, o := msgs[i], before[i]
				if unsafe.SliceData(m.Buf) != unsafe.SliceData(o.Buf) || len(m.Buf) != len(o.Buf) || cap(m.Buf) != cap(o.Buf) ||
					m.ICRC != o.ICRC || m.Seq != o.Seq || m.Encap != o.Encap {
					t.Errorf("gro %v, try %v: msgs[%d] changed: %+v, was %+v", gro, try, i, m, o)
				}
			}
		}
	}
}
