package xsrqpingpong

import (
	"bytes"
	"context"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/tools/toolnic"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/tools/tooltest"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// lineRE is ADDR_FORMAT.
var lineRE = regexp.MustCompile(`(?m)^ *(local|remote): LID ([0-9a-f]{4}), QPN RECV ([0-9a-f]{6}) SEND ([0-9a-f]{6}), PSN ([0-9a-f]{6}), SRQN ([0-9a-f]{6}), GID (\S+)$`)

type side struct {
	out bytes.Buffer
	err error
}

// runPair runs a server and a client on two devices of f, the
// out-of-band exchange on 127.0.0.1.
func runPair(t *testing.T, f *fabric.Fabric, cfg Config) (srv, cli *side) {
	t.Helper()
	devs := tooltest.Devices(t, f, "10.0.0.1", "10.0.0.2")
	srv, cli = &side{}, &side{}
	tooltest.ClientServer(t, devs[0], devs[1], 10*time.Second, func(ctx context.Context, env toolnic.Env) {
		env.Out = &srv.out
		srv.err = Run(ctx, cfg, env)
	}, func(ctx context.Context, env toolnic.Env, port int) {
		env.Out = &cli.out
		ccfg := cfg
		ccfg.ServerName, ccfg.Port = "127.0.0.1", port
		cli.err = Run(ctx, ccfg, env)
	})
	return srv, cli
}

// lines returns a side's local and remote address lines, parsed.
func lines(t *testing.T, out string) (local, remote dest) {
	t.Helper()
	m := lineRE.FindAllStringSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("want a local and a remote line:\n%s", out)
	}
	for _, l := range m {
		var v [5]uint64
		for i := range v {
			v[i], _ = strconv.ParseUint(l[2+i], 16, 32)
		}
		d := dest{LID: uint16(v[0]), RecvQPN: uint32(v[1]), SendQPN: uint32(v[2]), PSN: uint32(v[3]), SRQN: uint32(v[4])}
		if l[1] == "local" {
			local = d
		} else {
			remote = d
		}
	}
	return local, remote
}

// TestPair runs the tool's two sides and checks their output and the
// traffic: every request packet is an XRC SEND whose XRCETH names the
// SRQ number the receiving side printed, -n messages each way of -s
// bytes, each in ceil(s/MTU) packets.
func TestPair(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 1})
	defer f.Close()
	var mu sync.Mutex
	// By destination, the SRQ numbers the XRCETHs named, each with the
	// PSNs of its request packets (a set: a retransmission under load
	// repeats a PSN).
	srqnsTo := map[netip.Addr]map[uint32]map[wire.PSN]bool{}
	f.Tap(func(p fabric.Packet) {
		if !p.Parsed || !p.Wire.Is(wire.MaskRequest) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if p.Wire.Opcode.Class() != wire.ClassXRC || !p.Wire.Is(wire.MaskSend) {
			t.Errorf("request %v", p.Wire.Opcode)
		}
		if srqnsTo[p.Dst] == nil {
			srqnsTo[p.Dst] = map[uint32]map[wire.PSN]bool{}
		}
		n := p.Wire.XRCETH().XRCSRQ()
		if srqnsTo[p.Dst][n] == nil {
			srqnsTo[p.Dst][n] = map[wire.PSN]bool{}
		}
		srqnsTo[p.Dst][n][p.Wire.PSN()] = true
	})
	cfg := Defaults()
	cfg.NumTests, cfg.Size = 20, 3000
	srv, cli := runPair(t, f, cfg)
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", srv.err, srv.out.String(), cli.err, cli.out.String())
	}
	for _, s := range []*side{srv, cli} {
		if !bytes.HasSuffix(s.out.Bytes(), []byte("success\n")) {
			t.Errorf("no success line:\n%s", s.out.String())
		}
	}
	sl, sr := lines(t, srv.out.String())
	cl, cr := lines(t, cli.out.String())
	if sl != cr || cl != sr {
		t.Errorf("the sides disagree: server %+v/%+v, client %+v/%+v", sl, sr, cl, cr)
	}
	mu.Lock()
	defer mu.Unlock()
	// 3000 bytes at MTU 1024: three packets per message.
	for addr, srqn := range map[netip.Addr]uint32{netip.MustParseAddr("10.0.0.1"): sl.SRQN, netip.MustParseAddr("10.0.0.2"): cl.SRQN} {
		got := srqnsTo[addr]
		if len(got) != 1 || len(got[srqn]) != 3*cfg.NumTests {
			t.Errorf("requests to %v: %d SRQ numbers, %d PSNs to %#x; want one, %d", addr, len(got), len(got[srqn]), srqn, 3*cfg.NumTests)
		}
	}
}

// TestPairLossy: the run survives a fabric that loses, duplicates and
// reorders packets.
func TestPairLossy(t *testing.T) {
	f := fabric.New(fabric.Config{Seed: 7})
	defer f.Close()
	f.SetImpairment(fabric.Impairment{Loss: 0.05, Duplicate: 0.05, Reorder: 0.05})
	cfg := Defaults()
	cfg.NumTests, cfg.Size = 50, 5000
	srv, cli := runPair(t, f, cfg)
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", srv.err, srv.out.String(), cli.err, cli.out.String())
	}
	if st := f.Stats(); st.DropImpairment.Packets == 0 {
		t.Fatalf("nothing lost: %+v", st)
	}
}

// TestDestMessage checks the 66-byte address message: its exact bytes
// (MSG_FORMAT with its NUL) and the parse back, and refusals.
func TestDestMessage(t *testing.T) {
	g := verbs.GIDFromAddr(netip.MustParseAddr("10.0.0.2"))
	d := dest{LID: 0, RecvQPN: 0x11, SendQPN: 0x12, PSN: 0xabcdef, SRQN: 1, GID: g}
	b := d.format()
	want := "0000:000011:000012:abcdef:000001:00000000000000000000ffff0a000002\x00"
	if string(b[:]) != want {
		t.Fatalf("message %q, want %q", b[:], want)
	}
	got, err := parseDest(b[:])
	if err != nil || got != d {
		t.Fatalf("parse: %+v, %v; want %+v", got, err, d)
	}
	if l := d.line("local"); l != "   local: LID 0000, QPN RECV 000011 SEND 000012, PSN abcdef, SRQN 000001, GID ::ffff:10.0.0.2\n" {
		t.Errorf("line %q", l)
	}
	for _, bad := range []string{"", "0000:000011", "0000:zz0011:000012:abcdef:000001:00000000000000000000ffff0a000002",
		"0000:000011:000012:abcdef:000001:0000"} {
		if _, err := parseDest([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
