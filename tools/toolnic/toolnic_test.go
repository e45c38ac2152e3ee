package toolnic_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/wire"
)

func fabricLink(f *fabric.Fabric) toolnic.LinkFunc {
	return func(a netip.Addr, _ uint16) (link.Link, error) { return f.Attach(a) }
}

// TestPcapAndMetrics runs an rc_pingpong between two NICs opened by Open,
// one writing a pcap and serving metrics, the other writing its metrics
// to a file when it closes, and checks all three.
func TestPcapAndMetrics(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	pcap := filepath.Join(t.TempDir(), "a.pcap")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	a, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.9.0.1"), Link: fabricLink(f), Pcap: pcap, Metrics: maddr, Name: "rxe0"})
	if err != nil {
		t.Fatal(err)
	}
	mfile := filepath.Join(t.TempDir(), "b.prom")
	b, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.9.0.2"), Link: fabricLink(f), MetricsFile: mfile})
	if err != nil {
		t.Fatal(err)
	}
	if a.Dev.Name() != "rxe0" || b.Dev.Name() != "softnic0" {
		t.Errorf("names: got %q and %q", a.Dev.Name(), b.Dev.Name())
	}
	oob, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := pingpong.Defaults(pingpong.RC)
	cfg.Iters, cfg.Size = 5, 3000
	ccfg := cfg
	ccfg.ServerName, ccfg.Port = "127.0.0.1", oob.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	var serr, cerr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, serr = pingpong.Run(ctx, cfg, toolnic.Env{Dev: a.Dev, Out: io.Discard, Listener: oob})
	}()
	go func() {
		defer wg.Done()
		_, cerr = pingpong.Run(ctx, ccfg, toolnic.Env{Dev: b.Dev, Out: io.Discard})
	}()
	wg.Wait()
	if serr != nil || cerr != nil {
		t.Fatalf("pingpong: %v, %v", serr, cerr)
	}
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "softnic_") || !strings.Contains(string(body), `device="rxe0"`) {
		t.Errorf("metrics: got\n%.500s", body)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(mfile)
	if err != nil {
		t.Fatal(err)
	}
	// The file has the counters as the NIC closed: rc_pingpong's 5
	// exchanges of 3000 bytes came in 3 packets each, and more.
	want := fmt.Sprintf("softnic_rcvd_pkts_total{device=%q} %d\n", "softnic0", b.Dev.Counters().RcvdPkts)
	if b.Dev.Counters().RcvdPkts < 15 || !strings.Contains(string(text), want) {
		t.Errorf("metrics file: want a line %q in\n%.800s", want, text)
	}
	if _, err := http.Get("http://" + maddr + "/metrics"); err == nil {
		t.Error("metrics still served after Close")
	}
	ds, err := capture.ReadFile(pcap)
	if err != nil {
		t.Fatal(err)
	}
	// 5 exchanges of 3 packets each way (MTU 1024), plus ACKs.
	if len(ds) < 30 {
		t.Errorf("pcap: got %d datagrams, want at least 30", len(ds))
	}
	for _, d := range ds {
		if d.Encap.DstPort != wire.UDPPort {
			t.Errorf("pcap: datagram to port %d", d.Encap.DstPort)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	inUse := func(netip.Addr, uint16) (link.Link, error) {
		return nil, fmt.Errorf("listen: %w", syscall.EADDRINUSE)
	}
	_, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("127.0.0.1"), Link: inUse})
	var ae *toolnic.ErrAddrInUse
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "UDP port 4791 on 127.0.0.1 is already in use") {
		t.Errorf("in use: got %v", err)
	}
	_, err = toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("127.0.0.1"), Port: 9,
		Link: func(netip.Addr, uint16) (link.Link, error) { return nil, syscall.EADDRNOTAVAIL }})
	if err == nil || !strings.Contains(err.Error(), "not an address of this host") {
		t.Errorf("not local: got %v", err)
	}
	if _, err := toolnic.Open(toolnic.Config{}); err == nil {
		t.Error("no address: got no error")
	}
	f := fabric.New(fabric.Config{})
	defer f.Close()
	_, err = toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.0.0.1"), Link: fabricLink(f), Pcap: filepath.Join(t.TempDir(), "no", "such", "dir.pcap")})
	if err == nil || !strings.Contains(err.Error(), "pcap") {
		t.Errorf("bad pcap path: got %v", err)
	}
	// The failed Open released the address.
	n, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.0.0.1"), Link: fabricLink(f), Metrics: "256.0.0.1:1"})
	if err == nil {
		n.Close()
		t.Error("bad metrics address: got no error")
	}
	n, err = toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.0.0.1"), Link: fabricLink(f), MetricsFile: filepath.Join(t.TempDir(), "no", "dir.prom")})
	if err == nil || !strings.Contains(err.Error(), "--metrics-file") || !errors.Is(err, syscall.ENOENT) {
		if err == nil {
			n.Close()
		}
		t.Errorf("bad metrics file path: got %v", err)
	}
	// Detached NICs need no link and may share an address.
	for range 2 {
		n, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("127.0.0.1"), Detached: true})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
	}
}

func TestClientAddr(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		a, err := toolnic.ClientAddr(host)
		if err != nil {
			t.Logf("%s: %v", host, err)
			continue
		}
		if a != toolnic.DefaultClientAddr {
			t.Errorf("ClientAddr(%s): got %v, want %v", host, a, toolnic.DefaultClientAddr)
		}
	}
	if _, err := toolnic.ClientAddr("no-such-host.invalid"); err == nil {
		t.Error("unknown host: got no error")
	}
}

func TestWaiterStall(t *testing.T) {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	n, err := toolnic.Open(toolnic.Config{Addr: netip.MustParseAddr("10.0.0.1"), Link: fabricLink(f)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ch := n.Dev.CreateCompChannel()
	defer ch.Close()
	cq, err := n.Dev.CreateCQ(4, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	w := toolnic.Waiter{CQ: cq, Ch: ch, Stall: 50 * time.Millisecond}
	start := time.Now()
	_, err = w.Poll(context.Background(), make([]ibv.WorkCompletion, 1))
	var st *toolnic.ErrStall
	if !errors.As(err, &st) || time.Since(start) > 5*time.Second {
		t.Errorf("idle CQ: got %v after %v, want a stall", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.Stall = -1
	if _, err := w.Poll(ctx, make([]ibv.WorkCompletion, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}
