package ibcm

import (
	"testing"

	"github.com/softnic/softnic/wire"
)

// FuzzReceive feeds arbitrary MADs to an agent holding IDs in many states
// (listening, REQ sent, REP sent, established, timewait, SIDR): nothing
// panics, and closing the agent leaves no ID and no timer behind.
func FuzzReceive(f *testing.F) {
	// Seeds: every message of a real exchange, and its comm IDs' neighbours.
	bd := newBed(&testing.T{})
	var seeds [][]byte
	bd.p.drop = func(p pkt) bool { seeds = append(seeds, p.mad); return false }
	act, pas := bd.established()
	act.SendDREQ(nil)
	bd.p.pump()
	pas.SendDREP(nil)
	bd.p.pump()
	for _, s := range seeds {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	for _, attr := range []uint16{wire.CMAttrMRA, wire.CMAttrREJ, wire.CMAttrSIDRREQ, wire.CMAttrSIDRREP, wire.CMAttrLAP, wire.CMAttrAPR} {
		f.Add([]byte(wire.PutCM(make([]byte, wire.MADLen), attr, 1)), uint8(0))
	}
	f.Add([]byte{1, 7, 2, 3}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, from uint8) {
		bd := newBed(t)
		act, pas := bd.established()
		// More IDs in other states.
		bd.connect(0x40) // REQ_SENT, then REQ_RCVD at B
		bd.p.pump()
		r2 := bd.rb.last(t).ID
		r2.SendREP(&RepParam{QPNum: 3}) // REP_SENT
		bd.p.drop = func(pkt) bool { return true }
		bd.p.pump()
		sid, _ := bd.a.CreateID(bd.ra.handle, nil)
		sid.SendSIDRReq(&SIDRReqParam{DGID: addrB, ServiceID: service, Timeout: 1000})
		bd.p.pump()
		bd.p.drop = nil
		_ = act
		_ = pas
		src := addrA
		if from == 1 {
			src = addrB
		}
		// Patch comm IDs in so that the fuzzed MAD can reach live IDs.
		bd.a.Receive(b, src)
		bd.b.Receive(b, src)
		if len(b) >= wire.MADLen+8 {
			m := append([]byte(nil), b[:wire.MADLen]...)
			lid := act.LocalID()
			m[24], m[25], m[26], m[27] = byte(lid>>24), byte(lid>>16), byte(lid>>8), byte(lid)
			m[28], m[29], m[30], m[31] = byte(lid>>24), byte(lid>>16), byte(lid>>8), byte(lid)
			bd.b.Receive(m, src)
			bd.a.Receive(m, src)
		}
		for i := 0; i < 10; i++ {
			bd.p.pump()
			if !bd.clk.AdvanceToNext() {
				break
			}
		}
		bd.a.Close()
		bd.b.Close()
		bd.p.pump()
		for bd.clk.AdvanceToNext() {
		}
		if bd.a.IDs() != 0 || bd.b.IDs() != 0 {
			t.Fatalf("IDs left: %d %d", bd.a.IDs(), bd.b.IDs())
		}
	})
}
