package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

func TestPattern(t *testing.T) {
	// rping_test_client's buffer for ping 0 of 64 bytes: the header,
	// then 'A'.. (the C tool's first line of "rping -c -v").
	got := string(cString(Pattern(64, 0)))
	want := "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
	if got != want {
		t.Errorf("ping 0:\n got %q\nwant %q", got, want)
	}
	// Each ping starts one character later; after 'z' comes 'A'.
	if got := string(cString(Pattern(MinSize, 1))); got != "rdma-ping-1: BCDEFGHIJKLM" {
		t.Errorf("ping 1: %q", got)
	}
	b := Pattern(100, 57)
	if i := len("rdma-ping-57: "); b[i] != 'z' || b[i+1] != 'A' {
		t.Errorf("ping 57 starts %q, want \"zA\"", b[i:i+2])
	}
	if b := Pattern(100, 58); b[len("rdma-ping-58: ")] != 'A' {
		t.Errorf("ping 58 does not start again at 'A'")
	}
	if b := Pattern(MinSize, 0); b[MinSize-1] != 0 {
		t.Errorf("last byte %#x, want NUL", b[MinSize-1])
	}
}

func TestInfo(t *testing.T) {
	i := Info{Buf: 0x0102030405060708, RKey: 0x11223344, Size: 64}
	b := make([]byte, 16)
	i.Marshal(b)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64}
	if !bytes.Equal(b, want) {
		t.Fatalf("Marshal: % x, want % x", b, want)
	}
	got, err := ParseInfo(b)
	if err != nil || got != i {
		t.Fatalf("ParseInfo: %+v, %v", got, err)
	}
	if _, err := ParseInfo(b[:15]); err == nil || err.Error() != "Received bogus data, size 15" {
		t.Errorf("15 bytes: %v", err)
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		i, err := ParseInfo(b)
		if err != nil {
			if len(b) == 16 {
				t.Fatalf("16 bytes refused: %v", err)
			}
			return
		}
		out := make([]byte, 16)
		i.Marshal(out)
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip % x -> % x", b, out)
		}
	})
}

func TestConfigCheck(t *testing.T) {
	for _, tt := range []struct {
		size, count int
		want        string
	}{
		{25, 0, "Invalid size 25 (valid range is 26 to 65536)"},
		{65536, 0, "Invalid size 65536 (valid range is 26 to 65536)"},
		{64, -1, "Invalid count -1"},
		{26, 0, ""},
		{65535, 5, ""},
	} {
		c := Defaults()
		c.Size, c.Count = tt.size, tt.count
		err := c.Check()
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("size %d count %d: %v, want %q", tt.size, tt.count, err, tt.want)
		}
	}
}

// side is one end of an in-process run.
type side struct {
	out, err bytes.Buffer
	res      error
}

// newCM starts a CM on dev, stopped when the test ends.
func newCM(t *testing.T, dev *verbs.Device) *cm.CM {
	t.Helper()
	c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}})
	if err != nil {
		t.Fatalf("cm.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runPair runs an rping server on 10.0.0.1 and a client on 10.0.0.2 on
// an in-memory fabric, each with its own CM, as two processes would.
func runPair(t *testing.T, f *fabric.Fabric, scfg, ccfg Config) (srv, cli *side) {
	t.Helper()
	if f == nil {
		f = fabric.New(fabric.Config{Seed: 1})
		t.Cleanup(func() { f.Close() })
	}
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	scm, ccm := newCM(t, devs[0]), newCM(t, devs[1])
	scfg.Server = true
	ccfg.Server = false
	ccfg.Addr = netip.MustParseAddr("10.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, cli = &side{}, &side{}
	var wg sync.WaitGroup
	wg.Add(2)
	started := make(chan struct{})
	go func() {
		defer wg.Done()
		close(started)
		srv.res = Run(ctx, scfg, Env{Env: toolnic.Env{CM: scm, Out: &srv.out, Err: &srv.err, Stall: 20 * time.Second}})
	}()
	go func() {
		defer wg.Done()
		<-started
		// The C client fails when nobody listens yet (REJ, or a timeout);
		// give the server's listen a head start by retrying.
		for i := 0; ; i++ {
			cli.out.Reset()
			cli.err.Reset()
			cli.res = Run(ctx, ccfg, Env{Env: toolnic.Env{CM: ccm, Out: &cli.out, Err: &cli.err, Stall: 20 * time.Second}})
			if cli.res == nil || i == 50 || !strings.Contains(cli.err.String(), "RDMA_CM_EVENT_REJECTED") {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	wg.Wait()
	return srv, cli
}

// wantPings is what -v prints for count pings of size bytes.
func wantPings(prefix string, count, size int) string {
	var b strings.Builder
	for i := range count {
		fmt.Fprintf(&b, "%sping data: %s\n", prefix, cString(Pattern(size, i)))
	}
	return b.String()
}

func TestPair(t *testing.T) {
	for _, size := range []int{DefaultSize, MinSize, 5000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			cfg := Defaults()
			cfg.Count, cfg.Size, cfg.Verbose, cfg.Validate = 10, size, true, true
			srv, cli := runPair(t, nil, cfg, cfg)
			if srv.res != nil || cli.res != nil {
				t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.res, srv.out.String(), srv.err.String(),
					cli.res, cli.out.String(), cli.err.String())
			}
			if got, want := cli.out.String(), wantPings("", 10, size); got != want {
				t.Errorf("client output:\n%s\nwant:\n%s", got, want)
			}
			if got, want := srv.out.String(), wantPings("server ", 10, size); got != want {
				t.Errorf("server output:\n%s\nwant:\n%s", got, want)
			}
			// rping.c's server sees the client's disconnect while it waits
			// for the next ping's advertisement.
			if got, want := srv.err.String(), "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n"; got != want {
				t.Errorf("server stderr %q, want %q", got, want)
			}
		})
	}
}

// TestPersistentServer serves two clients one after the other with -P.
func TestPersistentServer(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 2})
	t.Cleanup(func() { f.Close() })
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	scm, ccm := newCM(t, devs[0]), newCM(t, devs[1])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	scfg := Defaults()
	scfg.Server, scfg.Persistent, scfg.Verbose = true, true, true
	var sout, serr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Run(ctx, scfg, Env{Env: toolnic.Env{CM: scm, Out: &sout, Err: &serr}, Conns: 2}) }()
	for n := range 2 {
		ccfg := Defaults()
		ccfg.Addr, ccfg.Count, ccfg.Validate = netip.MustParseAddr("10.0.0.1"), 3+n, true
		var err error
		var cerr bytes.Buffer
		for i := 0; i < 50; i++ {
			cerr.Reset()
			if err = Run(ctx, ccfg, Env{Env: toolnic.Env{CM: ccm, Out: new(bytes.Buffer), Err: &cerr}}); err == nil ||
				!strings.Contains(cerr.String(), "REJECTED") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("client %d: %v\n%s", n, err, cerr.String())
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, serr.String())
	}
	if got := strings.Count(sout.String(), "server ping data: "); got != 3+4 {
		t.Errorf("server printed %d pings, want 7:\n%s", got, sout.String())
	}
}

// TestRejectedNoServer: a client with nobody listening fails as rping.c
// does, with status 255 and the REJECTED event's line.
func TestNoServer(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 3})
	t.Cleanup(func() { f.Close() })
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	newCM(t, devs[0])
	ccm := newCM(t, devs[1])
	cfg := Defaults()
	cfg.Addr, cfg.Count = netip.MustParseAddr("10.0.0.1"), 1
	var out, errb bytes.Buffer
	err := Run(context.Background(), cfg, Env{Env: toolnic.Env{CM: ccm, Out: &out, Err: &errb, Stall: 10 * time.Second}})
	var fl *Failure
	if !errors.As(err, &fl) || fl.Status != 255 {
		t.Fatalf("got %v, want a Failure with status 255\n%s", err, errb.String())
	}
	if !strings.HasPrefix(errb.String(), "cma event RDMA_CM_EVENT_REJECTED, error ") {
		t.Errorf("stderr %q", errb.String())
	}
}

// TestNoGoroutineLeak runs a pair in a synctest bubble, which fails if
// any goroutine of the run (rping's CM and CQ goroutines, the CMs', the
// devices') outlives the run and the cleanup of the CMs, the devices and
// the fabric.
func TestNoGoroutineLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{Seed: 5})
		t.Cleanup(func() { f.Close() })
		cfg := Defaults()
		cfg.Count, cfg.Validate = 3, true
		srv, cli := runPair(t, f, cfg, cfg)
		if srv.res != nil || cli.res != nil {
			t.Fatalf("server: %v %s\nclient: %v %s", srv.res, srv.err.String(), cli.res, cli.err.String())
		}
	})
}

// TestSelfQP is -q on both sides: each makes its QP itself and moves it
// with rdma_init_qp_attr's attributes; the client's RTU goes with
// rdma_establish after CONNECT_RESPONSE.
func TestSelfQP(t *testing.T) {
	cfg := Defaults()
	cfg.Count, cfg.Verbose, cfg.Validate, cfg.SelfQP = 5, true, true, true
	srv, cli := runPair(t, nil, cfg, cfg)
	if srv.res != nil || cli.res != nil {
		t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.res, srv.out.String(), srv.err.String(),
			cli.res, cli.out.String(), cli.err.String())
	}
	if got, want := cli.out.String(), wantPings("", 5, DefaultSize); got != want {
		t.Errorf("client output:\n%s\nwant:\n%s", got, want)
	}
}
