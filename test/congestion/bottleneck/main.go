// Command bottleneck is the congestion bed's switch port: the kernel here has no RED qdisc, so
// the bottleneck is built in user space. It reads the IP packets the switch namespace routes
// into a TUN device, queues them in a byte-limited FIFO that marks ECN-capable packets CE by
// RED on the instantaneous queue (DCQCN's Kmin, Kmax, Pmax) and tail-drops when full, drains
// the FIFO at the bottleneck's rate on the real clock, and sends each packet on through a raw
// IP socket, which routes it by the main table to the receiver.
//
// Usage: bottleneck -tun NAME [-rate-mbit 200] [-limit-kb 512] [-kmin-kb K] [-kmax-kb K]
// [-pmax P] [-stats FILE] [-backlog FILE] [-trace FILE]
//
// On SIGTERM or SIGINT it writes its counters and the backlog's mean and maximum as JSON to
// -stats and exits; -backlog gets the backlog in bytes every 100 ms, -trace a line every 10 ms
// (the backlog, and the bytes offered and sent, the packets marked and dropped since the line
// before).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	tun := flag.String("tun", "", "the TUN device the switch routes the bottleneck's packets into (required; it may exist)")
	rate := flag.Float64("rate-mbit", 200, "the bottleneck's rate in Mb/s")
	limit := flag.Int("limit-kb", 512, "the buffer in KiB")
	kmin := flag.Float64("kmin-kb", 20, "RED's Kmin in KiB: no marks at or below it")
	kmax := flag.Float64("kmax-kb", 200, "RED's Kmax in KiB: every ECN-capable packet marked at or above it")
	pmax := flag.Float64("pmax", 0.2, "RED's marking probability just below Kmax")
	statsFile := flag.String("stats", "", "write the counters here as JSON on exit")
	backlogFile := flag.String("backlog", "", "write the backlog in bytes here every 100 ms")
	traceFile := flag.String("trace", "", "write a line here every 10 ms: ms since start, backlog, then since the line before: bytes offered, bytes sent, packets marked, packets dropped")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bottleneck: ")
	if *tun == "" || *rate <= 0 || *kmax <= *kmin || *pmax < 0 || *pmax > 1 {
		flag.Usage()
		os.Exit(2)
	}
	cfg := Config{
		RateBps: int64(*rate * 1e6),
		Limit:   *limit << 10,
		Kmin:    int(*kmin * 1024),
		Kmax:    int(*kmax * 1024),
		Pmax:    *pmax,
	}
	tunFD, err := openTUN(*tun)
	if err != nil {
		log.Fatal(err)
	}
	rawFD, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW) // IP_HDRINCL implied
	if err != nil {
		log.Fatalf("raw socket: %v", err)
	}
	_ = unix.SetsockoptInt(rawFD, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	var backlog *os.File
	if *backlogFile != "" {
		if backlog, err = os.Create(*backlogFile); err != nil {
			log.Fatal(err)
		}
	}

	var trace *os.File
	if *traceFile != "" {
		if trace, err = os.Create(*traceFile); err != nil {
			log.Fatal(err)
		}
	}

	s := &sw{port: NewPort(cfg, rand.Float64), kick: make(chan struct{}, 1), raw: rawFD}
	go s.read(tunFD)
	go s.drain()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(10 * time.Millisecond)
	start := time.Now()
	var sum, samples, peak, ticks, lastB int
	var last Stats
	for {
		select {
		case now := <-tick.C:
			s.mu.Lock()
			b, st := s.port.Backlog(), s.port.Stats
			s.mu.Unlock()
			if trace != nil {
				offered := st.SentBytes + st.DroppedBytes + uint64(b) - (last.SentBytes + last.DroppedBytes + uint64(lastB))
				fmt.Fprintln(trace, now.Sub(start).Milliseconds(), b, offered, st.SentBytes-last.SentBytes, st.Marked-last.Marked, st.Dropped-last.Dropped)
			}
			last, lastB = st, b
			if ticks++; ticks%10 != 0 {
				break
			}
			sum, samples, peak = sum+b, samples+1, max(peak, b)
			if backlog != nil {
				fmt.Fprintln(backlog, b)
			}
		case <-sig:
			s.mu.Lock()
			out := struct {
				Stats
				ReadErrors  uint64  `json:"read_errors"`
				SendErrors  uint64  `json:"send_errors"`
				BacklogMean float64 `json:"backlog_mean"`
				BacklogMax  int     `json:"backlog_max"`
			}{Stats: s.port.Stats, ReadErrors: s.readErrors, SendErrors: s.sendErrors, BacklogMax: peak}
			s.mu.Unlock()
			if samples > 0 {
				out.BacklogMean = float64(sum) / float64(samples)
			}
			if *statsFile != "" {
				j, _ := json.Marshal(out)
				if err := os.WriteFile(*statsFile, append(j, '\n'), 0o644); err != nil {
					log.Fatal(err)
				}
			}
			os.Exit(0)
		}
	}
}

// sw joins the port to the TUN device it reads and the raw socket it sends on.
type sw struct {
	mu         sync.Mutex
	port       *Port  // guarded by mu
	readErrors uint64 // guarded by mu
	sendErrors uint64 // guarded by mu
	kick       chan struct{}
	raw        int
}

// pool recycles packet buffers: the bed forwards some 20-100 thousand packets a second.
var pool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// read queues every packet the TUN device gives.
func (s *sw) read(fd int) {
	for {
		bp := pool.Get().(*[]byte)
		b := (*bp)[:cap(*bp)]
		n, err := unix.Read(fd, b)
		if err != nil || n < 20 {
			s.mu.Lock()
			s.readErrors++
			s.mu.Unlock()
			pool.Put(bp)
			if err != nil && err != unix.EINTR && err != unix.EAGAIN {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		s.mu.Lock()
		v := s.port.Enqueue(time.Now(), b[:n])
		s.mu.Unlock()
		if v == Dropped {
			pool.Put(bp)
			continue
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// drain sends the port's packets as the link's rate lets them go.
func (s *sw) drain() {
	for {
		s.mu.Lock()
		pkt, wait := s.port.Dequeue(time.Now())
		s.mu.Unlock()
		switch {
		case pkt != nil:
			s.send(pkt)
		case wait > 0:
			// Sleeping less than this costs CPU for nothing: the link sends what fell due
			// when it wakes, at a burst of 100 µs's worth of the rate (2.5 KB at 200 Mb/s).
			time.Sleep(max(wait, 100*time.Microsecond))
		default:
			<-s.kick
		}
	}
}

// send hands an IPv4 packet to the kernel, which routes it by its destination.
func (s *sw) send(pkt []byte) {
	dst, _ := netip.AddrFromSlice(pkt[16:20])
	if err := unix.Sendto(s.raw, pkt, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
		s.mu.Lock()
		s.sendErrors++
		s.mu.Unlock()
	}
	b := pkt[:0]
	pool.Put(&b)
}

// openTUN attaches to the TUN device name (creating it if it does not exist), without the
// packet information header: each read is one IP packet.
func openTUN(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return -1, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return fd, nil
}
