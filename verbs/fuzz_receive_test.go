package verbs_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// FuzzNICReceive feeds hostile packets to a NIC whose RC QP is in RTS and
// connected to the sender: arbitrary bytes, framed as up to eight
// datagrams, each given the QP's number and a correct ICRC so that it gets
// past the receive checks into the transport. Nothing from the network
// may crash the NIC: the engine must count and drop, or NAK, whatever it
// gets, and afterwards the device must still close cleanly (synctest
// fails on any goroutine left behind).
//
// Input framing: a 2-byte big-endian length, then that many bytes, repeated.
func FuzzNICReceive(f *testing.F) {
	seed := func(hs ...wire.Headers) []byte {
		var in []byte
		for _, h := range hs {
			h.BTH.PKey = wire.DefaultPKey
			b := make([]byte, link.MaxDatagram)
			e := wire.Encap{Src: netipAddr("10.0.0.1"), Dst: netipAddr("10.0.0.2"), DstPort: wire.UDPPort}
			n, err := wire.Build(b, &e, &h, make([]byte, payloadFor(h.BTH.Opcode)))
			if err != nil {
				f.Fatal(err)
			}
			in = binary.BigEndian.AppendUint16(in, uint16(n))
			in = append(in, b[:n]...)
		}
		return in
	}
	reth := func(op wire.Opcode, psn uint32, va uint64, n uint32) wire.Headers {
		return wire.Headers{BTH: wire.BTHFields{Opcode: op, PSN: wire.PSN(psn), AckReq: true},
			RETH: wire.RETHFields{VA: va, RKey: 0x100, DMALen: n}}
	}
	f.Add(seed(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendOnly, AckReq: true}}))
	f.Add(seed(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendFirst}},
		wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCSendLast, PSN: 1, AckReq: true}}))
	f.Add(seed(reth(wire.RCWriteOnly, 0, 0, 64), reth(wire.RCReadRequest, 1, 0, 5000)))
	f.Add(seed(reth(wire.RCReadRequest, 0, 0, 1<<20), reth(wire.RCReadRequest, 0, 0, 100)))
	f.Add(seed(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFetchAdd, AckReq: true},
		AtomicETH: wire.AtomicETHFields{RKey: 0x100, SwapAdd: 1}}))
	f.Add(seed(wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCAck},
		AETH: wire.AETHFields{Syndrome: wire.NakPSNSequence}},
		wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCReadResponseOnly, PSN: 3}}))
	f.Add(seed(reth(wire.RCAtomicWrite, 0, 8, 8), wire.Headers{BTH: wire.BTHFields{Opcode: wire.RCFlush, PSN: 1},
		RETH: wire.RETHFields{RKey: 0x100, DMALen: 16}, FETH: wire.FETHFields{PlacementType: 1}}))
	f.Add([]byte{0, 3, 1, 2, 3})

	f.Fuzz(func(t *testing.T, in []byte) {
		synctest.Test(t, func(t *testing.T) {
			fab := fabric.New(fabric.Config{Seed: 1})
			defer fab.Close()
			b, raw := newRawPeer(t, fab, pairOpts{timeout: 10, retry: 3, rnr: 2}, 0)
			postRecv(t, b, recvWR(b, 1, 0, 4096), recvWR(b, 2, 4096, 4096))
			// Something of b's own in flight, so responses have a requester to reach.
			post(t, b, rdmaWR(b, b, 7, ibv.WRRDMARead, 8192, 0, 3000))

			if _, err := raw.ep.WriteBatch(hostile(in, raw.dst, &raw.encap)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second) // fake time: every timer the packets started fires
			synctest.Wait()
			_ = b.qp.State()
			_ = pollAll(b.cq)
		})
	})
}

// hostile frames fuzz input as up to eight datagrams (a 2-byte length,
// then the bytes), each aimed at QP dst with an ICRC made right for e, so
// it reaches the transport.
func hostile(in []byte, dst uint32, e *wire.Encap) []link.Datagram {
	var msgs []link.Datagram
	for len(in) >= 2 && len(msgs) < 8 {
		n := int(binary.BigEndian.Uint16(in))
		in = in[2:]
		n = min(n, len(in), link.MaxDatagram)
		pkt := append([]byte(nil), in[:n]...)
		in = in[n:]
		if len(pkt) >= wire.BTHLen {
			wire.BTH(pkt).SetDestQP(dst)
		}
		wire.SetICRC(e, pkt)
		msgs = append(msgs, link.Datagram{Encap: *e, Buf: pkt})
	}
	return msgs
}

// FuzzNICReceiveUD is FuzzNICReceive against a UD QP in RTS with
// receives posted, attached to the multicast group 239.1.2.3: hostile
// datagrams with valid ICRCs, each sent to the QP and to the group
// (DestQP 0xFFFFFF), must be counted and dropped or received, never crash
// the NIC.
func FuzzNICReceiveUD(f *testing.F) {
	group := netipAddr("239.1.2.3")
	udTo := func(dst netip.Addr, destQP uint32, op wire.Opcode, qkey uint32, n int) []byte {
		h := wire.Headers{BTH: wire.BTHFields{Opcode: op, PKey: wire.DefaultPKey, DestQP: destQP},
			DETH: wire.DETHFields{QKey: qkey, SrcQP: 0x99}, Imm: 7}
		b := make([]byte, link.MaxDatagram)
		e := wire.Encap{Src: netipAddr("10.0.0.1"), Dst: dst, DstPort: wire.UDPPort}
		m, err := wire.Build(b, &e, &h, make([]byte, n))
		if err != nil {
			f.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint16(nil, uint16(m)), b[:m]...)
	}
	ud := func(op wire.Opcode, qkey uint32, n int) []byte { return udTo(netipAddr("10.0.0.2"), 0, op, qkey, n) }
	f.Add(ud(wire.UDSendOnly, 0x1111, 64))
	f.Add(udTo(group, wire.MulticastQPN, wire.UDSendOnly, 0x1111, 200)) // a multicast datagram
	f.Add(ud(wire.UDSendOnlyImm, 0x1111, 0))
	f.Add(ud(wire.UDSendOnly, 0x2222, 4096))
	f.Add(ud(wire.RCSendOnly, 0x1111, 8))

	f.Fuzz(func(t *testing.T, in []byte) {
		synctest.Test(t, func(t *testing.T) {
			fab := fabric.New(fabric.Config{Seed: 1})
			defer fab.Close()
			ep, err := fab.Attach(netipAddr("10.0.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			b := newUDEnd(t, fab, "10.0.0.2", udOpts{qkey: 0x1111})
			if err := b.qp.AttachMcast(verbs.GIDFromAddr(group), 0); err != nil {
				t.Fatal(err)
			}
			b.postRecvs(t, 4, 0, 4200, 1)
			e := wire.Encap{Src: netipAddr("10.0.0.1"), Dst: netipAddr("10.0.0.2"),
				SrcPort: wire.RxeSrcPort(0x99), DstPort: wire.UDPPort, HopLimit: 64, FragOff: wire.IPv4DF}
			if _, err := ep.WriteBatch(hostile(in, b.qp.QPN(), &e)); err != nil {
				t.Fatal(err)
			}
			e.Dst = group
			if _, err := ep.WriteBatch(hostile(in, wire.MulticastQPN, &e)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			_ = pollAll(b.cq)
		})
	})
}

// payloadFor returns a payload length the opcode's rule allows.
func payloadFor(op wire.Opcode) int {
	switch op.Info().Payload {
	case wire.PayloadFull:
		return 1024
	case wire.PayloadLast, wire.PayloadUpToPMTU:
		return 64
	case wire.PayloadExact8:
		return 8
	}
	return 0
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
