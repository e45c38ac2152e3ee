package verbs_test

// UD TSO (ibv_wr_send_tso, IBV_WR_TSO): a WR's payload cut into pieces
// of mss bytes, each an ordinary UD SEND_ONLY datagram with a copy of the
// header in front, one WC_TSO completion for the WR. Every piece is
// checked byte by byte at a softnic UD receiver and on the wire.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

const tsoQKey = 0x7150

// tsoPair makes a sender a whose UD QP has max_tso_header maxHdr and
// send_ops_flags SEND|TSO (4 SGEs, 256 inline bytes), and a receiver b,
// both at port MTU mtu.
func tsoPair(t testing.TB, f *fabric.Fabric, maxHdr int, mtu ibv.MTU) (a, b *udEnd) {
	t.Helper()
	a = newUDEnd(t, f, "10.0.0.1", udOpts{qkey: tsoQKey, portMTU: mtu})
	b = newUDEnd(t, f, "10.0.0.2", udOpts{qkey: tsoQKey, portMTU: mtu})
	must(t, a.qp.Destroy())
	qp, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq,
		SendOpsFlags: verbs.SendOpsSend | verbs.SendOpsTSO, MaxTSOHeader: maxHdr,
		Cap: ibv.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 256}})
	must(t, err)
	if _, ia := qp.Query(); ia.MaxTSOHeader != maxHdr {
		t.Fatalf("QP max_tso_header %d, want %d", ia.MaxTSOHeader, maxHdr)
	}
	udToRTS(t, qp, tsoQKey)
	a.qp = qp
	return a, b
}

// tsoWR is a TSO WR's content: header, MSS and payload, the payload from
// SGEs of a's buffer or inline.
type tsoWR struct {
	hdr    []byte
	mss    uint16
	sgl    []ibv.SGE
	inline []byte
}

// post posts w on a's QP to b, with PostSend or the builders, WRID wrid.
func (w *tsoWR) post(a, b *udEnd, ah *verbs.AH, builder bool, wrid uint64) error {
	if !builder {
		wr := ibv.SendWR{WRID: wrid, Opcode: ibv.WRTSO, Flags: ibv.SendSignaled, SGList: w.sgl,
			TSOHeader: w.hdr, MSS: w.mss, AH: ah, RemoteQPN: b.qp.QPN(), RemoteQKey: tsoQKey}
		if w.inline != nil {
			wr.SGList, wr.InlineData = nil, w.inline
			wr.Flags |= ibv.SendInline
		}
		_, err := a.qp.PostSend(wr)
		return err
	}
	x, err := a.qp.Ex()
	if err != nil {
		return err
	}
	x.WrStart()
	x.WRID, x.WRFlags = wrid, ibv.SendSignaled
	hdr := append([]byte(nil), w.hdr...)
	x.WrSendTSO(hdr, w.mss)
	clear(hdr) // the builder copied it
	x.WrSetUDAddr(ah, b.qp.QPN(), tsoQKey)
	if w.inline != nil {
		x.WrSetInlineData(w.inline)
	} else {
		x.WrSetSGEList(w.sgl)
	}
	return x.WrComplete()
}

// payload is what w's SGEs or inline data hold.
func (w *tsoWR) payload(a *udEnd) []byte {
	if w.inline != nil {
		return w.inline
	}
	var p []byte
	for _, s := range w.sgl {
		off := int(s.Addr - a.mr.Addr())
		p = append(p, a.buf[off:off+int(s.Length)]...)
	}
	return p
}

// pieces cuts payload at mss: what each datagram carries after the header.
func pieces(payload []byte, mss int) [][]byte {
	if len(payload) == 0 {
		return [][]byte{nil}
	}
	var ps [][]byte
	for len(payload) > 0 {
		n := min(mss, len(payload))
		ps = append(ps, payload[:n])
		payload = payload[n:]
	}
	return ps
}

// checkTSOWire checks the datagrams a TSO WR put on the wire: each an
// ordinary UD SEND_ONLY (no immediate) with a DETH of the sender's QPN
// and the Q_Key, to b's QP, PSNs consecutive from psn0, a valid ICRC and
// the header copy followed by its piece as payload.
func checkTSOWire(t *testing.T, pkts []fabric.Packet, a, b *udEnd, psn0 wire.PSN, hdr []byte, want [][]byte) {
	t.Helper()
	if len(pkts) != len(want) {
		t.Fatalf("%d datagrams on the wire, want %d", len(pkts), len(want))
	}
	for i, p := range pkts {
		var w wire.Packet
		if err := wire.Parse(p.Data, &w); err != nil {
			t.Fatalf("datagram %d does not parse: %v", i, err)
		}
		e := p.Encap
		switch d := w.DETH(); {
		case w.Opcode != wire.UDSendOnly:
			t.Errorf("datagram %d opcode %v, want UD_SEND_ONLY", i, w.Opcode)
		case !w.Is(wire.HasDETH | wire.MaskRecvWQE | wire.MaskStart | wire.MaskEnd):
			t.Errorf("datagram %d mask %#x: not a one-packet message with a DETH", i, w.Mask())
		case d.QKey() != tsoQKey || d.SrcQP() != a.qp.QPN():
			t.Errorf("datagram %d DETH q_key %#x src_qp %#x, want %#x %#x", i, d.QKey(), d.SrcQP(), tsoQKey, a.qp.QPN())
		case w.DestQP() != b.qp.QPN():
			t.Errorf("datagram %d dest QP %#x, want %#x", i, w.DestQP(), b.qp.QPN())
		case w.PSN() != psn0.Add(uint32(i)):
			t.Errorf("datagram %d PSN %d, want %d", i, w.PSN(), psn0.Add(uint32(i)))
		case wire.CheckICRC(&e, p.Data) != nil:
			t.Errorf("datagram %d ICRC: %v", i, wire.CheckICRC(&e, p.Data))
		case w.Pad != -len(w.Payload)&3:
			t.Errorf("datagram %d pad %d for %d bytes", i, w.Pad, len(w.Payload))
		}
		checkBytes(t, fmt.Sprintf("datagram %d payload", i), w.Payload, append(append([]byte(nil), hdr...), want[i]...))
	}
}

// TestUDTSO sends TSO WRs at the edges of segmentation, with PostSend
// and with the builders, and checks the sender's single WC_TSO
// completion (byte_len the payload), each piece's receive completion and
// bytes (GRH, header copy, piece) and each datagram on the wire.
func TestUDTSO(t *testing.T) {
	hdr := func(n int) []byte { return pattern(n, 77) }
	cases := []struct {
		name   string
		maxHdr int
		mtu    ibv.MTU
		wr     func(a *udEnd) tsoWR
	}{
		{"exact multiple", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(20), mss: 1000, sgl: []ibv.SGE{a.mr.SGE(0, 3000)}}
		}},
		{"short last piece", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(20), mss: 1000, sgl: []ibv.SGE{a.mr.SGE(0, 2501)}}
		}},
		{"one piece", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(20), mss: 1000, sgl: []ibv.SGE{a.mr.SGE(0, 999)}}
		}},
		{"one full piece", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(20), mss: 1000, sgl: []ibv.SGE{a.mr.SGE(0, 1000)}}
		}},
		{"no payload", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(20), mss: 1000}
		}},
		{"no header", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{mss: 1024, sgl: []ibv.SGE{a.mr.SGE(0, 2048)}}
		}},
		{"header of max size, mss to the MTU", verbs.MaxTSOHeader, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(verbs.MaxTSOHeader), mss: 1024 - verbs.MaxTSOHeader, sgl: []ibv.SGE{a.mr.SGE(0, 4000)}}
		}},
		{"SGE list spanning pieces", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(14), mss: 500, sgl: []ibv.SGE{a.mr.SGE(100, 300), a.mr.SGE(5000, 1234), a.mr.SGE(9001, 466), a.mr.SGE(20000, 1)}}
		}},
		{"inline", 64, ibv.MTU1024, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(10), mss: 64, inline: pattern(256, 5)}
		}},
		{"payload of max_tso", 64, ibv.MTU4096, func(a *udEnd) tsoWR {
			return tsoWR{hdr: hdr(64), mss: 4032, sgl: []ibv.SGE{a.mr.SGE(0, 1<<17), a.mr.SGE(1<<17, 1<<17)}}
		}},
	}
	for _, builder := range []bool{false, true} {
		mode := map[bool]string{false: "post_send", true: "wr_post"}[builder]
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := fabric.New(fabric.Config{Seed: 1})
					defer f.Close()
					tp := newTap(f)
					a, b := tsoPair(t, f, c.maxHdr, c.mtu)
					fill(a.buf, 3)
					ah := a.ahTo(t, b, 0, 64, 0)
					w := c.wr(a)
					payload := w.payload(a)
					want := pieces(payload, int(w.mss))
					const slot = 8192
					// One ordinary SEND first, so the TSO pieces start at PSN 1.
					b.postRecvs(t, 1, 1<<19, slot, 99)
					a.send(t, ah, b.qp.QPN(), tsoQKey, 1, 0, 8)
					_ = waitWC(t, a.cq, 1)
					_ = waitWC(t, b.cq, 1)
					n0 := len(tp.all())
					b.postRecvs(t, len(want), 0, slot, 100)

					must(t, w.post(a, b, ah, builder, 2))
					wc := waitWC(t, a.cq, 1)[0]
					if wc.WRID != 2 || wc.Status != ibv.WCSuccess || wc.Opcode != ibv.WCTSO || wc.ByteLen != uint32(len(payload)) {
						t.Fatalf("send completion %+v, want WRID 2, TSO, byte_len %d", wc, len(payload))
					}
					rwc := waitWC(t, b.cq, len(want))
					for i, r := range rwc {
						n := verbs.GRHLen + len(w.hdr) + len(want[i])
						if r.WRID != 100+uint64(i) || r.Status != ibv.WCSuccess || r.Opcode != ibv.WCRecv ||
							r.ByteLen != uint32(n) || r.SrcQP != a.qp.QPN() || r.Flags&ibv.WCWithImm != 0 {
							t.Fatalf("receive %d: %+v, want WRID %d, RECV, byte_len %d", i, r, 100+i, n)
						}
						at := i*slot + verbs.GRHLen
						checkBytes(t, fmt.Sprintf("piece %d header", i), b.buf[at:at+len(w.hdr)], w.hdr)
						checkBytes(t, fmt.Sprintf("piece %d data", i), b.buf[at+len(w.hdr):at+len(w.hdr)+len(want[i])], want[i])
					}
					noWC(t, a.cq, 0)
					noWC(t, b.cq, 0)
					checkTSOWire(t, tp.all()[n0:], a, b, 1, w.hdr, want)
					if got := b.dev.Counters().RcvdPkts; got != uint64(1+len(want)) {
						t.Errorf("receiver counted %d packets, want %d", got, 1+len(want))
					}
				})
			})
		}
	}
}

// TestUDTSOLimits: each limit of a TSO WR, taken at the limit (the
// cases of TestUDTSO) and refused one past it with EINVAL, with
// PostSend and with the builders, sending nothing and completing
// nothing: a header over max_tso_header, mss 0, header + mss over the
// port MTU, a payload over max_tso, and TSO on a UD QP created without
// max_tso_header.
func TestUDTSOLimits(t *testing.T) {
	type lim struct {
		name string
		wr   func(a *udEnd) tsoWR
	}
	const maxHdr = 40
	cases := []lim{
		{"header over max_tso_header", func(a *udEnd) tsoWR {
			return tsoWR{hdr: make([]byte, maxHdr+1), mss: 100, sgl: []ibv.SGE{a.mr.SGE(0, 300)}}
		}},
		{"mss 0", func(a *udEnd) tsoWR {
			return tsoWR{hdr: make([]byte, 8), mss: 0, sgl: []ibv.SGE{a.mr.SGE(0, 300)}}
		}},
		{"header + mss over the MTU", func(a *udEnd) tsoWR {
			return tsoWR{hdr: make([]byte, maxHdr), mss: 1024 - maxHdr + 1, sgl: []ibv.SGE{a.mr.SGE(0, 3000)}}
		}},
		{"payload over max_tso", func(a *udEnd) tsoWR {
			mt := a.dev.QueryDeviceEx().TSOCaps.MaxTSO
			return tsoWR{hdr: make([]byte, 8), mss: 1000, sgl: []ibv.SGE{a.mr.SGE(0, int(mt)), a.mr.SGE(0, 1)}}
		}},
		{"inline over max_inline_data", func(a *udEnd) tsoWR {
			return tsoWR{hdr: make([]byte, 8), mss: 100, inline: make([]byte, 257)}
		}},
	}
	for _, builder := range []bool{false, true} {
		mode := map[bool]string{false: "post_send", true: "wr_post"}[builder]
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := fabric.New(fabric.Config{})
					defer f.Close()
					a, b := tsoPair(t, f, maxHdr, ibv.MTU1024)
					ah := a.ahTo(t, b, 0, 64, 0)
					w := c.wr(a)
					err := w.post(a, b, ah, builder, 1)
					if !errors.Is(err, verbs.EINVAL) {
						t.Fatalf("got %v, want EINVAL", err)
					}
					noWC(t, a.cq, 0)
					if got := a.dev.Counters().SentPkts; got != 0 {
						t.Errorf("%d packets sent, want none", got)
					}
				})
			})
		}
	}
	t.Run("no max_tso_header", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := fabric.New(fabric.Config{})
			defer f.Close()
			a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: tsoQKey, ops: verbs.SendOpsSend | verbs.SendOpsTSO})
			b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: tsoQKey})
			ah := a.ahTo(t, b, 0, 64, 0)
			for _, builder := range []bool{false, true} {
				w := tsoWR{hdr: []byte{1}, mss: 100, sgl: []ibv.SGE{a.mr.SGE(0, 300)}}
				if err := w.post(a, b, ah, builder, 1); !errors.Is(err, verbs.EINVAL) {
					t.Errorf("builder %v: got %v, want EINVAL", builder, err)
				}
			}
			noWC(t, a.cq, 0)
		})
	})
}

// TestUDTSOCreate: max_tso_header is a UD attribute bounded by
// MaxTSOHeader, the builder needs SendOpsTSO, RC and UC QPs take
// neither TSO WRs nor the flag, and QueryDeviceEx reports tso_caps.
func TestUDTSOCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a := newUDEnd(t, f, "10.0.0.1", udOpts{qkey: tsoQKey, ops: verbs.SendOpsSend})
		b := newUDEnd(t, f, "10.0.0.2", udOpts{qkey: tsoQKey})

		tc := a.dev.QueryDeviceEx().TSOCaps
		if tc.MaxTSO != 256<<10 || tc.SupportedQPTs != 1<<ibv.QPTypeUD || !tc.Supports(ibv.QPTypeUD) || tc.Supports(ibv.QPTypeRC) {
			t.Errorf("tso_caps %+v, want max_tso 262144, supported_qpts UD only", tc)
		}

		cap := ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
		for _, c := range []struct {
			typ  ibv.QPType
			hdr  int
			ops  verbs.SendOpsFlags
			want error
		}{
			{ibv.QPTypeUD, verbs.MaxTSOHeader, verbs.SendOpsTSO, nil},
			{ibv.QPTypeUD, verbs.MaxTSOHeader + 1, 0, verbs.EINVAL},
			{ibv.QPTypeUD, -1, 0, verbs.EINVAL},
			{ibv.QPTypeRC, 16, 0, verbs.EINVAL},
			{ibv.QPTypeUC, 16, 0, verbs.EINVAL},
			{ibv.QPTypeRC, 0, verbs.SendOpsTSO, verbs.EOPNOTSUPP},
			{ibv.QPTypeUC, 0, verbs.SendOpsTSO, verbs.EOPNOTSUPP},
		} {
			qp, err := a.pd.CreateQP(verbs.QPInitAttr{Type: c.typ, SendCQ: a.cq, RecvCQ: a.cq, Cap: cap, MaxTSOHeader: c.hdr, SendOpsFlags: c.ops})
			if c.want == nil {
				must(t, err)
				must(t, qp.Destroy())
			} else if !errors.Is(err, c.want) {
				t.Errorf("%v max_tso_header %d ops %v: got %v, want %v", c.typ, c.hdr, c.ops, err, c.want)
			}
		}

		// The builder on a QP without SendOpsTSO.
		must(t, a.qp.Destroy())
		qp, err := a.pd.CreateQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: a.cq, RecvCQ: a.cq, Cap: cap,
			MaxTSOHeader: 16, SendOpsFlags: verbs.SendOpsSend})
		must(t, err)
		udToRTS(t, qp, tsoQKey)
		a.qp = qp
		ah := a.ahTo(t, b, 0, 64, 0)
		w := tsoWR{hdr: []byte{1, 2}, mss: 100, sgl: []ibv.SGE{a.mr.SGE(0, 300)}}
		if err := w.post(a, b, ah, true, 1); !errors.Is(err, verbs.EOPNOTSUPP) {
			t.Errorf("WrSendTSO without SendOpsTSO: got %v, want EOPNOTSUPP", err)
		}
		// PostSend takes it on that QP (send_ops_flags gate the builders only).
		b.postRecvs(t, 3, 0, 4096, 10)
		must(t, w.post(a, b, ah, false, 2))
		if wc := waitWC(t, a.cq, 1)[0]; wc.Opcode != ibv.WCTSO || wc.Status != ibv.WCSuccess {
			t.Errorf("completion %+v, want TSO", wc)
		}
		if got := waitWC(t, b.cq, 3); !bytes.Equal(b.buf[verbs.GRHLen:verbs.GRHLen+2], []byte{1, 2}) {
			t.Errorf("first piece starts % x, want 01 02 (%d receives)", b.buf[verbs.GRHLen:verbs.GRHLen+2], len(got))
		}
	})
}

// TestUDTSORC: a TSO WR on a connected RC QP is EINVAL, whatever its
// fields (TSO is UD only).
func TestUDTSORC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fabric.New(fabric.Config{})
		defer f.Close()
		a, _ := mpair(t, f, mopts{typ: ibv.QPTypeRC})
		_, err := a.qp.PostSend(ibv.SendWR{WRID: 1, Opcode: ibv.WRTSO, Flags: ibv.SendSignaled,
			SGList: []ibv.SGE{a.mr.SGE(0, 300)}, TSOHeader: []byte{1}, MSS: 100})
		if !errors.Is(err, verbs.EINVAL) {
			t.Fatalf("TSO on RC: got %v, want EINVAL", err)
		}
	})
}
