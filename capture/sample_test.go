package capture_test

import (
	"net/netip"
	"testing"

	"github.com/softnic/softnic/wire"
)

// sample is one RoCEv2 datagram built with wire.Build.
type sample struct {
	name    string
	encap   wire.Encap
	payload []byte // the UDP payload, BTH through ICRC
	want    string // the RoCE layer's String
}

var (
	encap4 = wire.Encap{
		Src: netip.MustParseAddr("10.77.0.3"), Dst: netip.MustParseAddr("10.77.0.2"),
		SrcPort: 0xC123, DstPort: wire.UDPPort, HopLimit: 64, ID: 0x0c8e, FragOff: wire.IPv4DF,
		TrafficClass: 106,
	}
	encap6 = wire.Encap{
		Src: netip.MustParseAddr("fd00:77::3"), Dst: netip.MustParseAddr("fd00:77::2"),
		SrcPort: 0xD00D, DstPort: wire.UDPPort, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x12345,
	}
)

// samplePackets builds one packet of every extension header for e.
func samplePackets(t testing.TB, e wire.Encap) []sample {
	t.Helper()
	bth := func(op wire.Opcode, qpn uint32, psn wire.PSN, ack bool) wire.BTHFields {
		return wire.BTHFields{Opcode: op, PKey: wire.DefaultPKey, DestQP: qpn, PSN: psn, AckReq: ack}
	}
	pay := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 1)
		}
		return b
	}
	cases := []struct {
		name    string
		h       wire.Headers
		payload []byte
		want    string
	}{
		{"send only", wire.Headers{BTH: bth(wire.RCSendOnly, 0x11, 0x87c0ac, true)}, pay(61),
			"RC_SEND_ONLY qpn=0x11 psn=0x87c0ac ackreq=1 payload=61"},
		{"send imm", wire.Headers{BTH: bth(wire.RCSendOnlyImm, 0x11, 1, true), Imm: 0xdeadbeef}, pay(8),
			"RC_SEND_ONLY_WITH_IMMEDIATE qpn=0x11 psn=0x1 ackreq=1 ImmDt[0xdeadbeef] payload=8"},
		{"send inv", wire.Headers{BTH: bth(wire.RCSendOnlyInv, 0x11, 2, true), InvRKey: 0x1234}, pay(3),
			"RC_SEND_ONLY_WITH_INVALIDATE qpn=0x11 psn=0x2 ackreq=1 IETH[rkey=0x1234] payload=3"},
		{"write first", wire.Headers{BTH: bth(wire.RCWriteFirst, 0x15, 0xffffff, false),
			RETH: wire.RETHFields{VA: 0x56310fb6b388, RKey: 0x6b2, DMALen: 5000}}, pay(256),
			"RC_RDMA_WRITE_FIRST qpn=0x15 psn=0xffffff ackreq=0 RETH[va=0x56310fb6b388 rkey=0x6b2 len=5000] payload=256"},
		{"read request", wire.Headers{BTH: bth(wire.RCReadRequest, 0x17, 0, true),
			RETH: wire.RETHFields{VA: 1, RKey: 2, DMALen: 3}}, nil,
			"RC_RDMA_READ_REQUEST qpn=0x17 psn=0x0 ackreq=1 RETH[va=0x1 rkey=0x2 len=3] payload=0"},
		{"nak", wire.Headers{BTH: bth(wire.RCAck, 0x17, 5, false),
			AETH: wire.AETHFields{Syndrome: wire.NakPSNSequence, MSN: 9}}, nil,
			"RC_ACKNOWLEDGE qpn=0x17 psn=0x5 ackreq=0 AETH[NAK_PSN_SEQ_ERR msn=9] payload=0"},
		{"atomic ack", wire.Headers{BTH: bth(wire.RCAtomicAck, 0x1b, 6, false),
			AETH: wire.AETHFields{Syndrome: wire.AckUnlimited, MSN: 1}, AtomicAckETH: wire.AtomicAckETHFields{Orig: 0x4e892ed93f5bb8a6}}, nil,
			"RC_ATOMIC_ACKNOWLEDGE qpn=0x1b psn=0x6 ackreq=0 AETH[ACK(credits=31) msn=1] AtomicAckETH[orig=0x4e892ed93f5bb8a6] payload=0"},
		{"cmp swap", wire.Headers{BTH: bth(wire.RCCompareSwap, 0x1b, 7, true),
			AtomicETH: wire.AtomicETHFields{VA: 0x1000, RKey: 0xc80, SwapAdd: 5, Compare: 4}}, nil,
			"RC_COMPARE_SWAP qpn=0x1b psn=0x7 ackreq=1 AtomicETH[va=0x1000 rkey=0xc80 swap=0x5 compare=0x4] payload=0"},
		{"fetch add", wire.Headers{BTH: bth(wire.RCFetchAdd, 0x1a, 8, true),
			AtomicETH: wire.AtomicETHFields{VA: 0x2000, RKey: 0xb78, SwapAdd: 1}}, nil,
			"RC_FETCH_ADD qpn=0x1a psn=0x8 ackreq=1 AtomicETH[va=0x2000 rkey=0xb78 add=0x1] payload=0"},
		{"flush", wire.Headers{BTH: bth(wire.RCFlush, 0x1c, 9, true),
			FETH: wire.FETHFields{PlacementType: wire.FlushPersistent, Selectivity: wire.FlushMR},
			RETH: wire.RETHFields{VA: 0x3000, RKey: 0x77, DMALen: 4096}}, nil,
			"RC_FLUSH qpn=0x1c psn=0x9 ackreq=1 FETH[type=persistent selectivity=mr] RETH[va=0x3000 rkey=0x77 len=4096] payload=0"},
		{"atomic write", wire.Headers{BTH: bth(wire.RCAtomicWrite, 0x1c, 10, true),
			RETH: wire.RETHFields{VA: 0x4000, RKey: 0x78, DMALen: 8}}, pay(8),
			"RC_ATOMIC_WRITE qpn=0x1c psn=0xa ackreq=1 RETH[va=0x4000 rkey=0x78 len=8] payload=8"},
		{"ud send", wire.Headers{BTH: bth(wire.UDSendOnly, 0x1, 0, true),
			DETH: wire.DETHFields{QKey: 0x80010000, SrcQP: 1}}, pay(256),
			"UD_SEND_ONLY qpn=0x1 psn=0x0 ackreq=1 DETH[qkey=0x80010000 srcqp=0x1] payload=256"},
		{"xrc send", wire.Headers{BTH: bth(wire.ClassXRC|wire.RCSendOnly.Op(), 0x30, 11, true),
			XRCETH: wire.XRCETHFields{XRCSRQ: 0x42}}, pay(5),
			"XRC_SEND_ONLY qpn=0x30 psn=0xb ackreq=1 XRCETH[srq=0x42] payload=5"},
		{"rd send", wire.Headers{BTH: bth(wire.ClassRD|wire.RCSendOnly.Op(), 0x31, 12, false),
			RDETH: wire.RDETHFields{EECnxt: 0x99}, DETH: wire.DETHFields{QKey: 7, SrcQP: 0x32}}, pay(4),
			"RD_SEND_ONLY qpn=0x31 psn=0xc ackreq=0 RDETH[eecnxt=0x99] DETH[qkey=0x7 srcqp=0x32] payload=4"},
		{"cnp", wire.Headers{BTH: wire.BTHFields{Opcode: wire.CNP, PKey: wire.DefaultPKey, BECN: true, DestQP: 0x11}}, nil,
			"CNP qpn=0x11 psn=0x0 ackreq=0 becn=1 payload=0"},
		{"flags", wire.Headers{BTH: wire.BTHFields{Opcode: wire.UCSendLastImm, SE: true, MigReq: true, FECN: true,
			PKey: 0x8001, DestQP: 0x12, PSN: 13}, Imm: 1}, pay(1),
			"UC_SEND_LAST_WITH_IMMEDIATE qpn=0x12 psn=0xd ackreq=0 se=1 migreq=1 fecn=1 pkey=0x8001 ImmDt[0x1] payload=1"},
	}
	var out []sample
	for _, c := range cases {
		b := make([]byte, wire.PacketLen(c.h.BTH.Opcode, len(c.payload)))
		n, err := wire.Build(b, &e, &c.h, c.payload)
		if err != nil {
			t.Fatalf("%s: wire.Build: %v", c.name, err)
		}
		out = append(out, sample{name: c.name, encap: e, payload: b[:n], want: c.want})
	}
	return out
}
