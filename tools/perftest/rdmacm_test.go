package perftest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

func TestRDMAKeys(t *testing.T) {
	d := Dest{LID: 0x12, OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x00007f0011223344,
		GID: verbs.GIDFromAddr(netip.MustParseAddr("10.0.0.1")), SRQN: 7}
	b := MarshalRDMAKeys(d, 1)
	want := []byte{
		0, 0, 0, 0x12, 0, 0, 0, 16, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, // lid out_reads qpn psn
		0, 0, 0x12, 0x34, 0, 0, 0, 0, // rkey, padding
		0, 0, 0x7f, 0, 0x11, 0x22, 0x33, 0x44, // vaddr
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1, // gid
		0, 0, 0, 7, 0, 0, 0, 1, // srqn gid_index
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("MarshalRDMAKeys:\n% x\nwant\n% x", b, want)
	}
	got, err := ParseRDMAKeys(b)
	if err != nil || got != d {
		t.Fatalf("ParseRDMAKeys: %+v, %v; want %+v", got, err, d)
	}
	if _, err := ParseRDMAKeys(b[:55]); err == nil {
		t.Error("55 bytes parsed")
	}
}

func FuzzParseRDMAKeys(f *testing.F) {
	f.Add(make([]byte, RDMAKeySize))
	f.Add([]byte("0000:0001:000011:abcdef"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseRDMAKeys(b)
		if err != nil {
			return
		}
		if d2, err := ParseRDMAKeys(MarshalRDMAKeys(d, 0)); err != nil || d2 != d {
			t.Fatalf("round trip %+v -> %+v, %v", d, d2, err)
		}
	})
}

func TestFormatTestInfoRDMACM(t *testing.T) {
	c := Defaults(Write, BW)
	c.Iters, c.RDMACM = 5, true
	if _, err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	got := FormatTestInfo(&c, TestInfo{Device: "rxe0", MTU: 1024, GIDIndex: 1})
	// perftest_parameters.c ctx_print_test_info with work_rdma_cm on a
	// server.
	want := " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n" + resultLine +
		" Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n" + resultLine
	if !strings.HasSuffix(got, want) {
		t.Errorf("write_bw -R server:\n%s\nwant it to end\n%s", got, want)
	}
	c.ServerName = "10.0.0.1"
	got = FormatTestInfo(&c, TestInfo{Device: "rxe0", MTU: 1024, GIDIndex: 1})
	if want := " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n" + resultLine; !strings.HasSuffix(got, want) {
		t.Errorf("write_bw -R client:\n%s", got)
	}
	c = Defaults(Write, BW)
	c.Conn, c.RDMACM = UC, true
	msgs, err := c.resolve()
	if err == nil || len(msgs) != 2 || msgs[1].Text != " UC is not supported in librdmacm\n" {
		t.Errorf("UC with -R: %v %v", msgs, err)
	}
}

// runCMPair runs a server and a client of cfg over an in-memory fabric,
// each with its own CM, connecting through it (-R or -z).
func runCMPair(t *testing.T, cfg Config) (srv, cli *side) {
	t.Helper()
	return runCMPairOn(t, cfg, nil)
}

// runCMPairOn is runCMPair with setup, when not nil, given the fabric
// before the two start.
func runCMPairOn(t *testing.T, cfg Config, setup func(f *fabric.Fabric)) (srv, cli *side) {
	t.Helper()
	f := fabric.New(fabric.Config{Seed: 1})
	t.Cleanup(func() { f.Close() })
	if setup != nil {
		setup(f)
	}
	cms, devs := tooltest.CMsOn(t, f, "10.0.0.1", "10.0.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, cli = &side{}, &side{}
	scfg, ccfg := cfg, cfg
	ccfg.ServerName = "10.0.0.1"
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		srv.res, srv.err = Run(ctx, scfg, Env{Env: toolnic.Env{Dev: devs[0], CM: cms[0], Out: &srv.out, Err: &srv.errOut, Stall: 20 * time.Second}})
	}()
	go func() {
		defer wg.Done()
		cli.res, cli.err = Run(ctx, ccfg, Env{Env: toolnic.Env{Dev: devs[1], CM: cms[1], Out: &cli.out, Err: &cli.errOut,
			Stall: 20 * time.Second, ConnectRetry: 10 * time.Second}})
	}()
	wg.Wait()
	return srv, cli
}

func TestRDMACMPairs(t *testing.T) {
	for _, tt := range []struct {
		name string
		verb Verb
		test TestKind
		mod  func(*Config)
	}{
		{"write_bw -R", Write, BW, func(c *Config) { c.Iters, c.Size, c.Check = 50, 5000, true }},
		{"write_bw -R 3 QPs", Write, BW, func(c *Config) { c.Iters, c.Size, c.NumQP, c.Check = 40, 300, 3, true }},
		{"read_bw -R", Read, BW, func(c *Config) { c.Iters, c.Size, c.Check = 30, 100, true }},
		{"send_bw -R", Send, BW, func(c *Config) { c.Iters, c.Size, c.Check = 60, 2000, true }},
		{"atomic_bw -R", Atomic, BW, func(c *Config) { c.Iters, c.Check = 100, true }},
		{"write_lat -R", Write, Lat, func(c *Config) { c.Iters, c.Size = 20, 64 }},
		{"read_lat -R", Read, Lat, func(c *Config) { c.Iters, c.Size, c.Check = 20, 1000, true }},
		{"send_lat -R", Send, Lat, func(c *Config) { c.Iters, c.Size = 20, 100 }},
		{"atomic_lat -R", Atomic, Lat, func(c *Config) { c.Iters, c.Check = 20, true }},
		{"send_bw -R UD", Send, BW, func(c *Config) { c.Iters, c.Size, c.Conn = 50, 1024, UD }},
		{"send_lat -R UD", Send, Lat, func(c *Config) { c.Iters, c.Size, c.Conn = 50, 512, UD }},
		{"write_bw -z", Write, BW, func(c *Config) { c.Iters, c.Size, c.Check, c.RDMACM, c.CommRDMACM = 20, 4096, true, false, true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults(tt.verb, tt.test)
			cfg.RDMACM = true
			tt.mod(&cfg)
			srv, cli := runCMPair(t, cfg)
			if srv.err != nil || cli.err != nil {
				t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.err, srv.out.String(), srv.errOut.String(), cli.err, cli.out.String(), cli.errOut.String())
			}
			want := " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm"
			if !cfg.RDMACM {
				want = " rdma_cm QPs\t : OFF\n Data ex. method : rdma_cm"
			}
			for _, s := range []*side{srv, cli} {
				if !strings.Contains(s.out.String(), want) {
					t.Errorf("no %q in:\n%s", want, s.out.String())
				}
				// ctx_print_pingpong_data prints by the exchange's verb,
				// SEND over rdma_cm: no OUT, RKey or VAddr (as rxe's
				// perftest 4.5 prints with -R).
				if strings.Contains(s.out.String(), "RKey") || strings.Contains(s.out.String(), " OUT ") {
					t.Errorf("address lines with RKey or OUT over rdma_cm:\n%s", s.out.String())
				}
			}
			if cfg.Check && !srv.res.Checked && !cli.res.Checked {
				t.Errorf("--check checked nothing")
			}
			if cfg.RDMACM && srv.res.Local[0].QPN != cli.res.Remote[0].QPN {
				t.Errorf("the client's remote QPN %#x is not the server's %#x", cli.res.Remote[0].QPN, srv.res.Local[0].QPN)
			}
		})
	}
}

// TestRDMACMServerListensBeforeSync: the client connects as soon as it has
// the server's half of the sync before the CM connection, while the server
// waits for that half's ACK. With the client's ACKs held back 30 ms, a
// server that listened only after the sync (as perftest does) rejects the
// REQ with reason 8, invalid service ID, and a client without perftest's
// retry (the rxe guest's perftest 4.5) fails; softnic's server listens
// before the sync and rejects nothing once the exchange is connected.
// (The exchange's own first REQ may be rejected: the two sides start
// together here, and the client tries again.)
func TestRDMACMServerListensBeforeSync(t *testing.T) {
	client := netip.MustParseAddr("10.0.0.2")
	var rec cmMADs
	cfg := Defaults(Write, BW)
	cfg.RDMACM, cfg.Iters, cfg.Size = true, 10, 64
	srv, cli := runCMPairOn(t, cfg, func(f *fabric.Fabric) {
		f.AddFilter(fabric.OnMatch(func(p *fabric.Packet) bool {
			return p.Parsed && p.Src == client && p.Wire.Opcode == wire.RCAck
		}, fabric.Delay(30*time.Millisecond)))
		rec.tap(f, false)
	})
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.err, srv.out.String(), srv.errOut.String(), cli.err, cli.out.String(), cli.errOut.String())
	}
	mads := rec.list()
	// the exchange's connection, then the test QP's: REQ RTU REQ RTU
	i := slices.Index(mads, "RTU")
	if i < 0 || !slices.Equal(mads[i:], []string{"RTU", "REQ", "RTU"}) {
		t.Errorf("CM MADs (REQ, RTU, REJ(reason)) on the fabric: %v; want the test QP's REQ accepted at once", mads)
	}
}

// TestRDMACMClientConnectsOneFirst checks the order of the test QPs' CM
// messages with -q 3: the client's first REQ alone, answered (REP) and
// confirmed (RTU) before the other two REQs leave, so that a REQ that
// finds no listener yet has no siblings a retry would cancel (cmClientTry);
// and softnic's server answers that REQ by itself, before the others come
// (cmServerQPs).
func TestRDMACMClientConnectsOneFirst(t *testing.T) {
	var rec cmMADs
	cfg := Defaults(Write, BW)
	cfg.RDMACM, cfg.Iters, cfg.Size, cfg.NumQP = true, 10, 64, 3
	srv, cli := runCMPairOn(t, cfg, func(f *fabric.Fabric) { rec.tap(f, true) })
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srv.err, srv.out.String(), srv.errOut.String(), cli.err, cli.out.String(), cli.errOut.String())
	}
	mads := rec.list()
	// the exchange's connection up to its RTU (its client may have come
	// before the server listened, and tried again), then the test QPs'
	i := slices.Index(mads, "RTU")
	if i < 0 {
		t.Fatalf("CM MADs on the fabric: %v; want the exchange's RTU first", mads)
	}
	test := mads[i+1:]
	if len(test) != 9 || !slices.Equal(test[:3], []string{"REQ", "REP", "RTU"}) {
		t.Errorf("the test QPs' CM MADs: %v; want the first REQ answered and confirmed before the other two REQs", test)
	}
}

// cmMADs records the CM MADs a fabric carries to QP 1, in order: "REQ",
// "RTU", "REJ(reason)", and "REP" when asked for.
type cmMADs struct {
	mu   sync.Mutex
	mads []string
}

// tap records f's CM MADs from now on; withREP names REPs too.
func (m *cmMADs) tap(f *fabric.Fabric, withREP bool) {
	f.Tap(func(p fabric.Packet) {
		if !p.Parsed || p.Wire.DestQP() != 1 {
			return
		}
		cm, err := wire.ParseCM(p.Wire.Payload)
		if err != nil {
			return
		}
		mad := wire.CMMsgShortName(cm.AttrID())
		switch cm.AttrID() {
		case wire.CMAttrREQ, wire.CMAttrRTU:
		case wire.CMAttrREP:
			if !withREP {
				return
			}
		case wire.CMAttrREJ:
			mad = fmt.Sprintf("REJ(%d)", wire.CMRej(cm).Reason())
		default:
			return
		}
		m.mu.Lock()
		m.mads = append(m.mads, mad)
		m.mu.Unlock()
	})
}

// list returns the MADs recorded so far.
func (m *cmMADs) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mads)
}
