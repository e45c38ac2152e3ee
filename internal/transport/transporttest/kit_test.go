package transporttest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/internal/transport"
	"github.com/softnic/softnic/wire"
)

// errTB is a testing.TB that keeps what Errorf reports.
type errTB struct {
	testing.TB
	errs []string
}

func (e *errTB) Helper() {}

func (e *errTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// packet builds a captured packet from headers and a payload.
func packet(t *testing.T, h wire.Headers, payload []byte) *Packet {
	t.Helper()
	e := wire.Encap{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 0xC000, DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF}
	b := make([]byte, transport.MaxDatagram)
	n, err := wire.Build(b, &e, &h, payload)
	if err != nil {
		t.Fatal(err)
	}
	p := &Packet{Packet: fabric.Packet{Src: e.Src, Dst: e.Dst, Encap: e, Data: b[:n]}, At: Epoch}
	if err := wire.Parse(p.Data, &p.Wire); err != nil {
		t.Fatal(err)
	}
	p.Parsed = true
	return p
}

// TestCheck: every checker passes on the packet it describes and reports
// one error, naming the packet, what it found and what it wanted, on a
// packet that differs.
func TestCheck(t *testing.T) {
	nak := packet(t, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck, PSN: 7, DestQP: 0x12},
		AETH: wire.AETHFields{Syndrome: wire.NakPSNSequence, MSN: 3}}, nil)
	write := packet(t, wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCWriteFirst, PSN: 0x10, SE: false},
		RETH: wire.RETHFields{VA: 0x1000, RKey: 0x55, DMALen: 3000}}, make([]byte, 1024))
	send := packet(t, wire.Headers{BTH: wire.BTHFields{Opcode: wire.UDSendOnlyImm, PSN: 1, SE: true},
		DETH: wire.DETHFields{QKey: 0x11, SrcQP: 0x22}, Imm: 0xabcd}, []byte("hey"))
	xrc := packet(t, wire.Headers{BTH: wire.BTHFields{Opcode: wire.ClassXRC | wire.RCSendOnly, PSN: 1},
		XRCETH: wire.XRCETHFields{XRCSRQ: 9}}, nil)
	for _, c := range []struct {
		p        *Packet
		ok, bad  Checker
		wantDesc string
	}{
		{nak, Opcode(wire.RCAck), Opcode(wire.RCSendOnly), "opcode RC_ACKNOWLEDGE, want RC_SEND_ONLY"},
		{nak, PSN(7), PSN(8), "PSN 7, want 8"},
		{nak, DestQP(0x12), DestQP(0x13), "destination QP 0x12, want 0x13"},
		{nak, Syndrome(wire.NakPSNSequence), Syndrome(wire.AckUnlimited), "syndrome NAK_PSN_SEQ_ERR"},
		{write, PSN(0x10), Syndrome(wire.AckUnlimited), "no AETH"},
		{nak, MSN(3), MSN(4), "MSN 3, want 4"},
		{nak, AckReq(false), AckReq(true), "AckReq false, want true"},
		{nak, Class(wire.ClassRC), Class(wire.ClassUC), "class 0x0, want 0x20"},
		{write, RETH(wire.RETHFields{VA: 0x1000, RKey: 0x55, DMALen: 3000}), RETH(wire.RETHFields{}), "want none"},
		{nak, RETH(wire.RETHFields{}), RETH(wire.RETHFields{VA: 1}), "no RETH"},
		{write, HasRETH(true), HasRETH(false), "RETH present true, want false"},
		{write, Mask(wire.MaskStart, true), Mask(wire.MaskEnd, true), "present false, want true"},
		{write, PayloadLen(1024), PayloadLen(1023), "payload of 1024 bytes, want 1023"},
		{send, Payload([]byte("hey")), Payload([]byte("hex")), "payload 68 65 79, want 68 65 78"},
		{send, Pad(), PSN(2), "PSN 1, want 2"},
		{send, DETH(0x11, 0x22), DETH(0x11, 0x23), "source QP 0x22, want 0x11 0x23"},
		{send, Imm(0xabcd), Imm(0xabce), "immediate 0xabcd, want 0xabce"},
		{xrc, XRCSRQ(9), XRCSRQ(8), "XRC SRQ 9, want 8"},
		{send, DETH(0x11, 0x22), XRCSRQ(9), "no XRCETH"},
		{send, SE(true), SE(false), "SE true, want false"},
		{send, From(netip.MustParseAddr("10.0.0.1")), From(netip.MustParseAddr("10.0.0.3")), "from 10.0.0.1, want 10.0.0.3"},
		{send, Ports(0xC000, wire.UDPPort), Ports(0xC001, wire.UDPPort), "want 49153->4791"},
		{send, IPHeader(0, 64, 0), IPHeader(0, 63, 0), "hop limit 64"},
		{send, At(Epoch), At(Epoch.Add(time.Second)), "want 1s"},
	} {
		var tb errTB
		Check(&tb, c.p, c.ok)
		if len(tb.errs) != 0 {
			t.Errorf("%s: a matching checker reported %q", c.p.Desc(), tb.errs)
		}
		tb.errs = nil
		Check(&tb, c.p, c.bad)
		if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], c.wantDesc) || !strings.HasPrefix(tb.errs[0], c.p.Desc()) {
			t.Errorf("%s: a differing checker reported %q, want one error with %q", c.p.Desc(), tb.errs, c.wantDesc)
		}
	}
	if got, want := nak.Desc(), "ACKNOWLEDGE/7 NAK_PSN_SEQ_ERR"; got != want {
		t.Errorf("Desc %q, want %q", got, want)
	}
	if got, want := write.Desc(), "RDMA_WRITE_FIRST/16"; got != want {
		t.Errorf("Desc %q, want %q", got, want)
	}
}

// fakeQP is a Handler that keeps the opcodes of the packets delivered to
// it, and counts the times it runs.
type fakeQP struct {
	inbox []*transport.RxPacket
	got   []wire.Opcode
	runs  int
}

func (q *fakeQP) Deliver(p *transport.RxPacket) bool {
	q.inbox = append(q.inbox, p)
	return true
}

func (q *fakeQP) Process(out transport.Output) bool {
	q.runs++
	for _, p := range q.inbox {
		q.got = append(q.got, p.Pkt.Opcode)
		p.Release()
	}
	q.inbox = q.inbox[:0]
	return false
}

func (q *fakeQP) Close() {}

// TestNodeReceiveChecks: a node delivers only what passes the engine's
// checks, counting each refusal as the engine does, and runs a QP only
// when it has packets or asked to run.
func TestNodeReceiveChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNet(t, 1)
		nd := n.Node("10.0.0.2")
		port := nd.Port(ibv.QPTypeRC)
		qp := &fakeQP{}
		port.Bind(qp)
		raw := n.Raw("10.0.0.1", nd.Addr(), 0xC000)
		send := func(op wire.Opcode, qpn uint32, pkey uint16) {
			raw.Send(wire.Headers{BTH: wire.BTHFields{Opcode: op, DestQP: qpn, PKey: pkey}}, nil)
		}
		send(wire.RCSendOnly, port.QPN(), wire.DefaultPKey)
		send(wire.RCSendOnly, port.QPN(), 0x7FFF) // low 15 bits match: accepted (pkey_match)
		send(wire.RCSendOnly, port.QPN(), 0x1234) // other P_Key
		send(wire.UCSendOnly, port.QPN(), wire.DefaultPKey)
		send(wire.RCSendOnly, port.QPN()+1, wire.DefaultPKey)
		n.Fabric().AddFilter(fabric.OnNth(1, nil, fabric.Corrupt))
		send(wire.RCSendOnly, port.QPN(), wire.DefaultPKey) // corrupted: bad ICRC
		n.Settle()
		if want := []wire.Opcode{wire.RCSendOnly, wire.RCSendOnly}; !slices.Equal(qp.got, want) {
			t.Errorf("delivered %v, want %v", qp.got, want)
		}
		c := &nd.Counters
		for _, k := range []struct {
			name      string
			got, want uint64
		}{
			{"rcvd_pkts", c.RcvdPkts.Load(), 6},
			{"bad P_Key", c.DropPKey.Load(), 1},
			{"no such QP or class", c.DropNoQP.Load(), 2},
			{"ICRC", c.ICRCErr.Load() + c.DropMalformed.Load(), 1},
		} {
			if k.got != k.want {
				t.Errorf("%s %d, want %d", k.name, k.got, k.want)
			}
		}

		runs := qp.runs
		n.Settle()
		if qp.runs != runs {
			t.Errorf("an idle QP ran %d times more", qp.runs-runs)
		}
		port.Wake()
		n.Settle()
		if qp.runs != runs+1 {
			t.Errorf("a woken QP ran %d times, want once", qp.runs-runs)
		}
	})
}

// TestRunTime: Run moves the clock by exactly its duration, firing the
// timers due on the way; RunUntil stops at the timer that makes its
// condition hold and says how long that took.
func TestRunTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNet(t, 1)
		var fired []time.Duration
		for _, d := range []time.Duration{3 * time.Millisecond, time.Millisecond, 7 * time.Millisecond} {
			n.Clock().AfterFunc(d, func() { fired = append(fired, n.Since(Epoch)) })
		}
		n.Run(5 * time.Millisecond)
		if want := []time.Duration{time.Millisecond, 3 * time.Millisecond}; !slices.Equal(fired, want) || n.Since(Epoch) != 5*time.Millisecond {
			t.Errorf("after Run(5ms): fired at %v, clock at %v", fired, n.Since(Epoch))
		}
		took := n.RunUntil("the third timer", time.Second, func() bool { return len(fired) == 3 })
		if took != 2*time.Millisecond || n.Since(Epoch) != 7*time.Millisecond {
			t.Errorf("RunUntil took %v, clock at %v; want 2ms, 7ms", took, n.Since(Epoch))
		}
	})
}
