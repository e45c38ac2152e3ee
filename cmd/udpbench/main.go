//go:build linux

// Command udpbench measures how fast this machine moves RoCEv2-sized UDP
// datagrams over loopback with the batching softnic's UDP link uses, so
// softnic's throughput can be compared with the machine's limit:
//
//	go run ./cmd/udpbench                   # every mode, 4112-byte datagrams
//	go run ./cmd/udpbench -size 1052 -d 5s  # 1 KiB PMTU, longer runs
//	go run ./cmd/udpbench -size 80          # the message-rate limit
//
// -size 80 is the packet of a 64-byte SEND (BTH, 64 bytes, ICRC): the
// kpkt/s column is then the limit of softnic's send_bw -s 64, plainly
// (raw/plain) and with up to 64 equal-size datagrams a UDP GSO send and
// UDP GRO on receive (raw/gso+gro).
//
// One sender goroutine and one receiver goroutine, each on its own OS
// thread, send from 127.0.0.1 to 127.0.0.2 for -d per run; the table shows
// the median of -runs runs of what was delivered, and the CPU time the
// process (both sides, user and system) spent in that run per 10^9 bytes
// delivered (cpu_s/GB; "-" with -peer, where the receiver is elsewhere).
// Modes:
//
//	raw/plain     sendmmsg of -batch datagrams -> recvmmsg of -batch
//	raw/gso       sendmmsg of UDP GSO sends (up to 64 KiB each) -> recvmmsg
//	raw/gso+gro   the same, received with UDP_GRO into 64 KiB buffers
//	link/...      the same three through link.UDPLink WriteBatch/ReadBatch
//	              (control messages, GRO splitting, the GSO segments'
//	              ICRC fix-up, the ICRC check and IPv4 identification
//	              solve on receive)
//
// The sender is not paced: what the receiver cannot take is lost in its
// socket buffer (8 MiB) and counted as loss.
//
// With -pingpong N, a second table follows: the floor for write_lat, a
// small datagram back and forth N times, spinning (busy) and through
// Go's network poller (block), and write_lat's turn of two datagrams
// each way through softnic's UDP link (turn); see pingpong.go.
//
// Between two hosts (scripts/bench --guests does this on its two guests),
// one runs udpbench -serve ADDR:PORT and the other udpbench -peer
// ADDR:PORT [-local ADDR] with the raw modes and -pingpong: the peer
// sends (and times the ping-pong), the server receives and counts (and
// echoes); see remote.go.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/wire"
)

var (
	size      = flag.Int("size", 4112, "UDP payload bytes per datagram (4112: a 4096-byte RoCEv2 WRITE_MIDDLE; 80: a 64-byte SEND_ONLY)")
	batch     = flag.Int("batch", 64, "datagrams per sendmmsg/recvmmsg (the UDP link's default batch)")
	duration  = flag.Duration("d", 2*time.Second, "length of one run")
	runs      = flag.Int("runs", 3, "runs per mode; the median is shown")
	modes     = flag.String("modes", "raw/plain,raw/gso,raw/gso+gro,link/plain,link/gso,link/gso+gro", "modes to run")
	pingpong  = flag.Int("pingpong", 0, "round trips of each ping-pong mode after the table; 0: none")
	ppModes   = flag.String("pingpong-modes", "busy,block,turn", "the ping-pong modes to run (busy, block, turn)")
	echo      = flag.String("pingpong-echo", "", "be the answering side of a ping-pong mode (what -pingpong starts)")
	serveAddr = flag.String("serve", "", "answer a udpbench -peer on this TCP ADDR:PORT (raw modes and ping-pong between two hosts)")
	peer      = flag.String("peer", "", "run the raw modes and the ping-pong against a udpbench -serve at this TCP ADDR:PORT")
	local     = flag.String("local", "", "the address to send from (default: 127.0.0.1, or with -peer any)")
)

// localAddr is the address the sending (or timing) side binds.
func localAddr() string {
	switch {
	case *local != "":
		return *local
	case *peer != "":
		return "0.0.0.0"
	}
	return "127.0.0.1"
}

func main() {
	flag.Parse()
	if *echo != "" {
		if err := pingPongEcho(*echo); err != nil {
			fmt.Fprintf(os.Stderr, "udpbench -pingpong-echo: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *serveAddr != "" {
		if err := serve(*serveAddr); err != nil {
			fmt.Fprintf(os.Stderr, "udpbench -serve: %v\n", err)
			os.Exit(1)
		}
		return
	}
	to := "127.0.0.2"
	if *peer != "" {
		to = *peer
	}
	fmt.Printf("udpbench: %d-byte datagrams, batch %d, %v x %d runs, GOMAXPROCS %d, %s -> %s\n",
		*size, *batch, *duration, *runs, runtime.GOMAXPROCS(0), localAddr(), to)
	fmt.Printf("%-14s %10s %10s %8s %9s\n", "mode", "Gbit/s", "kpkt/s", "loss%", "cpu_s/GB")
	for _, m := range splitComma(*modes) {
		var res []result
		for range *runs {
			cpu := cpuTime()
			r, err := run(m)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", m, err)
				os.Exit(1)
			}
			r.cpu = cpuTime() - cpu
			res = append(res, r)
		}
		slices.SortFunc(res, func(a, b result) int { return int(a.bytes - b.bytes) })
		r := res[len(res)/2]
		secs := r.elapsed.Seconds()
		loss := 0.0
		if r.sent > 0 {
			loss = 100 * (1 - float64(r.pkts)/float64(r.sent))
		}
		cpu := cpuPerGB(r.cpu, r.bytes)
		if *peer != "" {
			cpu = "-" // the receiver's CPU is on the other host
		}
		fmt.Printf("%-14s %10.3f %10.1f %8.2f %9s\n", m, float64(r.bytes)*8/secs/1e9, float64(r.pkts)/secs/1e3, loss, cpu)
	}
	if *pingpong <= 0 {
		return
	}
	fmt.Printf("\nping-pong: %d-byte datagrams, %d round trips, half round trips in usec\n", pingPongSize, *pingpong)
	fmt.Printf("%-14s %10s %10s\n", "mode", "typical", "p99")
	for _, m := range splitComma(*ppModes) {
		r, err := pingPong(m, *pingpong)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ping-pong %s: %v\n", m, err)
			os.Exit(1)
		}
		fmt.Printf("%-14s %10.2f %10.2f\n", m, r.typical, r.p99)
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

type result struct {
	bytes, pkts, sent int64
	elapsed           time.Duration
	// cpu is the process's CPU time (user and system, every thread)
	// over the run, its setup and drain included.
	cpu time.Duration
}

// cpuTime returns the CPU time this process has used so far, user and
// system, over all its threads (getrusage RUSAGE_SELF): a run's sender
// and receiver are both in it.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerGB formats cpu seconds per 10^9 bytes delivered, "-" when nothing
// was.
func cpuPerGB(cpu time.Duration, bytes int64) string {
	if bytes <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", cpu.Seconds()/(float64(bytes)/1e9))
}

// run measures one mode once.
func run(mode string) (result, error) {
	var link bool
	var gso, gro bool
	switch mode {
	case "raw/plain":
	case "raw/gso":
		gso = true
	case "raw/gso+gro":
		gso, gro = true, true
	case "link/plain":
		link = true
	case "link/gso":
		link, gso = true, true
	case "link/gso+gro":
		link, gso, gro = true, true, true
	default:
		return result{}, fmt.Errorf("unknown mode %q", mode)
	}
	switch {
	case link && *peer != "":
		return result{}, fmt.Errorf("%s: the link modes need both ends in one process (no -peer)", mode)
	case link:
		return runLink(gso, gro)
	case *peer != "":
		return runRawRemote(*peer, gso, gro)
	}
	return runRaw(gso, gro)
}

// ---- through link.UDPLink ----

func runLink(gso, gro bool) (result, error) {
	var la, lb *link.UDPLink
	var err error
	for port := uint16(47910); ; port++ {
		la, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.0.0.1"), Port: port, BatchSize: *batch, DisableGSO: !gso})
		if err != nil {
			continue
		}
		lb, err = link.ListenUDP(link.UDPConfig{Addr: netip.MustParseAddr("127.0.0.2"), Port: port, BatchSize: *batch, DisableGRO: !gro})
		if err != nil {
			la.Close()
			if port > 48000 {
				return result{}, err
			}
			continue
		}
		break
	}
	defer la.Close()
	// Datagrams as the engine builds them: the link's source port, so that
	// only GSO segments 1, 2, ... have their ICRC patched.
	e := wire.Encap{Src: la.LocalAddr(), Dst: lb.LocalAddr(), SrcPort: la.SrcPort(), DstPort: lb.Port(), HopLimit: 64, FragOff: wire.IPv4DF}
	payload := make([]byte, *size-wire.BTHLen-wire.ICRCLen)
	h := wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteMiddle, PKey: wire.DefaultPKey, DestQP: 0x11}}
	msgs := make([]link.Datagram, *batch)
	for i := range msgs {
		b := make([]byte, link.MaxDatagram)
		n, err := wire.Build(b, &e, &h, payload)
		if err != nil {
			return result{}, err
		}
		msgs[i] = link.Datagram{Encap: e, Buf: b[:n]}
	}
	var rxBytes, rxPkts atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		rx := make([]link.Datagram, *batch)
		for i := range rx {
			rx[i].Buf = make([]byte, 0, link.MaxDatagram)
		}
		for {
			n, err := lb.ReadBatch(rx)
			if err != nil {
				return
			}
			var b int64
			for _, d := range rx[:n] {
				b += int64(len(d.Buf))
			}
			rxBytes.Add(b)
			rxPkts.Add(int64(n))
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sent int64
	start := time.Now()
	for time.Since(start) < *duration {
		// Each Encap is left as WriteBatch reported it: the headers sent,
		// which the ICRC in Buf was patched for.
		for i := range msgs {
			msgs[i].Err = 0
		}
		n, err := la.WriteBatch(msgs)
		if err != nil {
			return result{}, err
		}
		sent += int64(n)
	}
	elapsed := time.Since(start)
	time.Sleep(50 * time.Millisecond) // drain
	lb.Close()
	wg.Wait()
	return result{bytes: rxBytes.Load(), pkts: rxPkts.Load(), sent: sent, elapsed: elapsed}, nil
}

// ---- raw sockets ----

type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

func listen(addr string, port int) (*net.UDPConn, syscall.RawConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addr), Port: port})
	if err != nil {
		return nil, nil, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	var serr error
	rc.Control(func(fd uintptr) {
		s := int(fd)
		if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20) != nil {
			unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
		}
		if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
			unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		}
		serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	})
	if serr != nil {
		c.Close()
		return nil, nil, serr
	}
	return c, rc, nil
}

func runRaw(gso, gro bool) (result, error) {
	var ca, cb *net.UDPConn
	var ra, rb syscall.RawConn
	var err error
	port := 0
	for p := 48100; p < 48200; p++ {
		if ca, ra, err = listen("127.0.0.1", p); err != nil {
			continue
		}
		if cb, rb, err = listen("127.0.0.2", p); err != nil {
			ca.Close()
			continue
		}
		port = p
		break
	}
	if port == 0 {
		return result{}, fmt.Errorf("no free port: %v", err)
	}
	defer ca.Close()
	rx, err := startRawRecv(cb, rb, gro, *size)
	if err != nil {
		cb.Close()
		return result{}, err
	}
	sent, elapsed, err := rawSend(ra, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(port)), gso)
	time.Sleep(50 * time.Millisecond) // drain
	bytes, pkts := rx.stop()
	if err != nil {
		return result{}, err
	}
	return result{bytes: bytes, pkts: pkts, sent: sent, elapsed: elapsed}, nil
}

// rawRecv is a raw mode's receiving side: a goroutine on an OS thread of
// its own reading batches of -batch datagrams (with UDP_GRO, up to 64 KiB
// each) and counting them, sz bytes a datagram.
type rawRecv struct {
	c           *net.UDPConn
	done        chan struct{}
	bytes, pkts atomic.Int64
}

// startRawRecv starts receiving sz-byte datagrams on c (rc its RawConn)
// until stop.
func startRawRecv(c *net.UDPConn, rc syscall.RawConn, gro bool, sz int) (*rawRecv, error) {
	if gro {
		var gerr error
		rc.Control(func(fd uintptr) { gerr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) })
		if gerr != nil {
			return nil, fmt.Errorf("UDP_GRO: %w", gerr)
		}
	}
	rbuf := sz
	if gro {
		rbuf = 1 << 16
	}
	rdata := make([]byte, *batch*rbuf)
	riov := make([]unix.Iovec, *batch)
	roob := make([]byte, *batch*64)
	rhs := make([]mmsghdr, *batch)
	r := &rawRecv{c: c, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		runtime.LockOSThread()
		var got int
		fn := func(fd uintptr) bool {
			for i := range rhs {
				riov[i].Base = &rdata[i*rbuf]
				riov[i].SetLen(rbuf)
				rhs[i].hdr.Iov = &riov[i]
				rhs[i].hdr.SetIovlen(1)
				rhs[i].hdr.Control = &roob[i*64]
				rhs[i].hdr.SetControllen(64)
			}
			n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&rhs[0])), uintptr(len(rhs)), unix.MSG_DONTWAIT, 0, 0)
			if e == unix.EAGAIN {
				return false
			}
			got = int(n)
			if e != 0 {
				got = 0
			}
			return true
		}
		for {
			if err := rc.Read(fn); err != nil {
				return
			}
			var b, p int64
			for i := range got {
				n := int64(rhs[i].len)
				b += n
				seg := int64(sz)
				if gro {
					// The GRO segment size is in the control message; the
					// datagrams are all sz bytes here.
					p += (n + seg - 1) / seg
				} else {
					p++
				}
			}
			r.bytes.Add(b)
			r.pkts.Add(p)
		}
	}()
	return r, nil
}

// stop closes the socket and returns what was received.
func (r *rawRecv) stop() (bytes, pkts int64) {
	r.c.Close()
	<-r.done
	return r.bytes.Load(), r.pkts.Load()
}

// rawSend sends -size-byte datagrams to `to` from the socket rc for
// -duration, -batch datagrams a sendmmsg (with gso, in UDP GSO sends of
// up to 64 KiB), and returns how many it sent and for how long.
func rawSend(rc syscall.RawConn, to netip.AddrPort, gso bool) (int64, time.Duration, error) {
	sz := *size
	segs := 1
	if gso {
		segs = min(64, (0xFFFF-28)/sz)
	}
	// batch datagrams, grouped into messages of segs datagrams.
	nmsg := (*batch + segs - 1) / segs
	data := make([]byte, *batch*sz)
	iov := make([]unix.Iovec, *batch)
	for i := range iov {
		iov[i].Base = &data[i*sz]
		iov[i].SetLen(sz)
	}
	if !to.Addr().Is4() {
		return 0, 0, fmt.Errorf("%v: only IPv4", to)
	}
	var sa [unix.SizeofSockaddrInet4]byte
	binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], to.Port())
	a4 := to.Addr().As4()
	copy(sa[4:], a4[:])
	oob := make([]byte, unix.CmsgSpace(2))
	if segs > 1 {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		c.Level, c.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(sz))
	}
	hs := make([]mmsghdr, nmsg)
	for m := range hs {
		first := m * segs
		cnt := min(segs, *batch-first)
		hs[m].hdr.Name = &sa[0]
		hs[m].hdr.Namelen = unix.SizeofSockaddrInet4
		hs[m].hdr.Iov = &iov[first]
		hs[m].hdr.SetIovlen(cnt)
		if cnt > 1 {
			hs[m].hdr.Control = &oob[0]
			hs[m].hdr.SetControllen(len(oob))
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sent int64
	var serr error
	sendFn := func(fd uintptr) bool {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hs[0])), uintptr(len(hs)), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			serr = e
			return true
		}
		for m := range int(n) {
			sent += int64(hs[m].hdr.Iovlen)
		}
		return true
	}
	start := time.Now()
	for time.Since(start) < *duration {
		if err := rc.Write(sendFn); err != nil {
			return 0, 0, err
		}
		if serr != nil {
			return 0, 0, fmt.Errorf("sendmmsg: %w", serr)
		}
	}
	return sent, time.Since(start), nil
}
