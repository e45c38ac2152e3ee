package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/wire"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// loopback returns the loopback interface.
func loopback(t *testing.T) *net.Interface {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback != 0 {
			return &ifs[i]
		}
	}
	t.Skip("no loopback interface")
	return nil
}

// capture records, on a packet socket on the loopback interface, the IP
// datagrams leaving the host for UDP port dport. It skips the test without
// CAP_NET_RAW.
type capture struct {
	fd      int
	mu      sync.Mutex
	pkts    [][]byte // guarded by mu
	stopped atomic.Bool
	done    chan struct{}
}

func startCapture(t *testing.T, dport uint16) *capture {
	t.Helper()
	lo := loopback(t)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_ALL)))
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		t.Skip("packet socket needs CAP_NET_RAW")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	// Room for every packet of the round on a loopback the other tests'
	// traffic crosses too: a packet socket's default buffer (~200 KiB)
	// holds three or four GSO sends, and the kernel drops the rest from
	// the capture, not from the wire (PACKET_STATISTICS, see stop).
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<20)
	}
	tv := unix.Timeval{Usec: 50000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	c := &capture{fd: fd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 1<<17)
		for {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && !c.stopped.Load() {
					continue
				}
				return
			}
			ll, ok := from.(*unix.SockaddrLinklayer)
			if !ok || ll.Pkttype != unix.PACKET_OUTGOING {
				continue // loopback shows each packet going out and coming in
			}
			if udpDstPort(buf[:n]) != dport {
				continue
			}
			c.mu.Lock()
			c.pkts = append(c.pkts, bytes.Clone(buf[:n]))
			c.mu.Unlock()
		}
	}()
	return c
}

// stop waits a little for the last packets and returns what was captured,
// and how many packets the kernel dropped from the capture for want of
// room (PACKET_STATISTICS tp_drops): those went out all the same.
func (c *capture) stop() ([][]byte, uint32) {
	time.Sleep(100 * time.Millisecond)
	c.stopped.Store(true)
	<-c.done // the reader sees the flag within its 50 ms receive timeout
	var drops uint32
	if st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
		drops = st.Drops
	}
	unix.Close(c.fd)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pkts, drops
}

// udpDstPort returns the UDP destination port of an IPv4 or IPv6 packet.
func udpDstPort(p []byte) uint16 {
	if len(p) < 1 {
		return 0
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) >= 24 && p[9] == 17 {
			return binary.BigEndian.Uint16(p[22:])
		}
	case 6:
		if len(p) >= 44 && p[6] == 17 {
			return binary.BigEndian.Uint16(p[42:])
		}
	}
	return 0
}

// TestUDPWireHeaders captures what the link really sends and checks every
// ICRC-covered header field against the ICRC: IPv4 identification 0 (i
// for GSO segment i) with DF, the bound source port. On loopback the
// kernel keeps a GSO send whole (lo segments nothing), so a GSO send shows
// up as one large datagram whose header is segment 0's; the segments'
// identifications are checked when the capture sees them cut, e.g. in a
// network namespace whose loopback segments in software:
//
//	go test -c -o /tmp/nic.test ./nic
//	unshare -n sh -c 'ip link set lo up; ethtool -K lo tx-udp-segmentation off;
//		/tmp/nic.test -test.run TestUDPWireHeaders -test.v'

func TestUDPWireHeaders(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b netip.Addr
	}{{"ipv4", lo1, lo2}, {"ipv6", lo6, lo6}} {
		t.Run(fam.name, func(t *testing.T) {
			if fam.a.Is6() && !hasIPv6Loopback() {
				t.Skip("no IPv6 loopback")
			}
			la, lb := listenPair(t, fam.a, fam.b, UDPConfig{})
			c := startCapture(t, lb.Port())
			ss := roundTripSamples()
			msgs := buildDatagrams(t, newRand(t), la, lb, ss)
			if _, err := la.WriteBatch(msgs); err != nil {
				t.Fatal(err)
			}
			readN(t, lb, len(msgs))
			pkts, drops := c.stop()
			// Walk the capture against what was sent, splitting GSO sends.
			next, segs, whole := 0, 0, 0
			for _, p := range pkts {
				e, payload, err := wire.ParseEncap(p)
				if err != nil {
					t.Fatalf("captured packet: %v", err)
				}
				if e.SrcPort != la.Port() || e.Src != la.LocalAddr() {
					t.Errorf("sent from %v:%d, want %v:%d", e.Src, e.SrcPort, la.LocalAddr(), la.Port())
				}
				if e.IsIPv4() && e.FragOff != wire.IPv4DF {
					t.Errorf("IPv4 flags/offset %#x, want DF", e.FragOff)
				}
				for seg := 0; len(payload) > 0; seg++ {
					if next >= len(msgs) {
						t.Fatalf("captured more than the %d datagrams sent", len(msgs))
					}
					n := len(msgs[next].Buf)
					if n > len(payload) {
						t.Fatalf("datagram %d: %d bytes, capture has %d left", next, n, len(payload))
					}
					se := e
					if e.IsIPv4() {
						se.ID = e.ID + uint16(seg) // the kernel's rule when it cuts a GSO send
					}
					if err := wire.CheckICRC(&se, payload[:n]); err != nil {
						t.Errorf("datagram %d (segment %d of a %d-byte capture): ICRC over the captured header %+v: %v",
							next, seg, len(payload), se, err)
					}
					if se.ID != msgs[next].Encap.ID {
						t.Errorf("datagram %d: identification %d on the wire, the link assumed %d", next, se.ID, msgs[next].Encap.ID)
					}
					if seg > 0 {
						segs++
					}
					payload = payload[n:]
					next++
				}
				whole++
			}
			if next != len(msgs) {
				t.Fatalf("captured %d of %d datagrams (the kernel dropped %d packets from the capture)", next, len(msgs), drops)
			}
			t.Logf("%d datagrams in %d captured packets (%d carried inside GSO packets), GSO %v",
				len(msgs), whole, segs, la.GSO())
		})
	}
}

// rawSend sends a whole IP datagram from a raw socket, as a kernel rxe
// does: its own identification, UDP checksum 0. It skips without
// CAP_NET_RAW.
func rawSend(t *testing.T, e *wire.Encap, pkt []byte) {
	t.Helper()
	buf := make([]byte, e.HeaderLen()+len(pkt))
	h := e.PutHeaders(buf, len(pkt))
	copy(buf[h:], pkt)
	var fd int
	var err error
	var to unix.Sockaddr
	if e.IsIPv4() {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		to = &unix.SockaddrInet4{Addr: e.Dst.As4()}
	} else {
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
		to = &unix.SockaddrInet6{Addr: e.Dst.As16()}
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		t.Skip("raw socket needs CAP_NET_RAW")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, buf, 0, to); err != nil {
		t.Fatal(err)
	}
}

// TestUDPForeignSender receives what a kernel rxe sends: a per-QP source
// port, a non-zero IPv4 identification, UDP checksum 0 (over IPv6 too).
// The engine's check recovers the identification; a corrupted packet is
// refused.
func TestUDPForeignSender(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b netip.Addr
	}{{"ipv4", lo1, lo2}, {"ipv6", lo6, lo6}} {
		t.Run(fam.name, func(t *testing.T) {
			if fam.a.Is6() && !hasIPv6Loopback() {
				t.Skip("no IPv6 loopback")
			}
			_, lb := listenPair(t, fam.a, fam.b, UDPConfig{})
			e := wire.Encap{Src: fam.a, Dst: lb.LocalAddr(), SrcPort: 0xC001, DstPort: lb.Port(),
				TrafficClass: 0x02, HopLimit: 64}
			if e.IsIPv4() {
				e.ID, e.FragOff = 0xBEEF, wire.IPv4DF
			}
			h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, PKey: wire.DefaultPKey, DestQP: 0x11, PSN: 5}}
			pkt := make([]byte, MaxDatagram)
			n, err := wire.Build(pkt, &e, &h, []byte("from a kernel rxe"))
			if err != nil {
				t.Fatal(err)
			}
			pkt = pkt[:n]
			rawSend(t, &e, pkt)
			bad := bytes.Clone(pkt)
			bad[wire.BTHLen] ^= 0x80
			rawSend(t, &e, bad)
			got := readN(t, lb, 2)
			for i, want := range []bool{true, false} {
				d := got[i]
				r := d.Encap
				if r.Src != e.Src || r.SrcPort != e.SrcPort || r.TrafficClass != e.TrafficClass || r.HopLimit != e.HopLimit {
					t.Errorf("datagram %d: received %+v, sent %+v", i, r, e)
				}
				// IPv4: the link guessed the identification and the
				// check solves for it; IPv6: the header is exact.
				ok := d.CheckICRC()
				r.ID = d.Encap.ID
				if ok != want {
					t.Fatalf("datagram %d: ICRC %v, check %v, want %v", i, d.ICRC, ok, want)
				}
				if want && r.ID != e.ID {
					t.Errorf("solved identification %#x, want %#x", r.ID, e.ID)
				}
			}
		})
	}
}
