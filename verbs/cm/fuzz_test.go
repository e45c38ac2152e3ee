package cm_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/wire"
)

// FuzzMADs sends arbitrary 256-byte MADs from a third host's QP1 to a CM
// holding a listener and an established connection (short ones padded
// to a whole MAD when patch asks): nothing panics, the connection still
// disconnects cleanly, and no goroutine is left (synctest). The IB CM's
// own fuzz target (verbs/cm/internal/ibcm FuzzReceive) reaches live comm IDs.
func FuzzMADs(f *testing.F) {
	for _, attr := range []uint16{wire.CMAttrREQ, wire.CMAttrMRA, wire.CMAttrREJ, wire.CMAttrREP, wire.CMAttrRTU,
		wire.CMAttrDREQ, wire.CMAttrDREP, wire.CMAttrSIDRREQ, wire.CMAttrSIDRREP, wire.CMAttrLAP} {
		m := wire.PutCM(make([]byte, wire.MADLen), attr, 1)
		f.Add([]byte(m), uint8(0))
		f.Add([]byte(m), uint8(3))
	}
	req := wire.CMReq(wire.PutCM(make([]byte, wire.MADLen), wire.CMAttrREQ, 1))
	req.SetServiceID(wire.RDMAServiceID(wire.RDMAPSTCP, port))
	g := addrB.As16()
	req.SetPrimaryRemotePortGID(g[:])
	hdr := make([]byte, wire.CMAHdrLen)
	wire.PutCMAHeader(hdr, wire.CMAHeader{IPVersion: 4, SrcPort: 1, Src: netip.MustParseAddr("10.0.0.3"), Dst: addrB})
	req.SetPrivateData(hdr)
	f.Add([]byte(req.MAD()), uint8(0))
	f.Fuzz(func(t *testing.T, mad []byte, patch uint8) {
		if len(mad) > wire.MADLen {
			mad = mad[:wire.MADLen]
		}
		synctest.Test(t, func(t *testing.T) {
			bd := newBed(t)
			bd.listen()
			cli, srv := bd.connectRC()
			ep, err := bd.f.Attach(netip.MustParseAddr("10.0.0.3"))
			if err != nil {
				t.Fatal(err)
			}
			dev, _ := verbs.Open(verbs.Config{Link: ep})
			defer dev.Close()
			pd, _ := dev.AllocPD()
			cq, _ := dev.CreateCQ(8, nil)
			qp, err := pd.CreateGSIQP(verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: cq, RecvCQ: cq,
				Cap: ibv.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			qp.Modify(&ibv.QPAttr{State: ibv.QPStateInit, PortNum: 1, QKey: verbs.GSIQKey},
				ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrQKey)
			qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTR}, ibv.QPAttrState)
			qp.Modify(&ibv.QPAttr{State: ibv.QPStateRTS}, ibv.QPAttrState|ibv.QPAttrSQPSN)
			buf := make([]byte, wire.MADLen)
			copy(buf, mad)
			if patch&1 != 0 && len(buf) >= 28 {
				// A remote comm ID near the small ones.
				binary.BigEndian.PutUint32(buf[28:], uint32(patch>>1))
			}
			mr, _ := pd.RegMR(buf, ibv.AccessLocalWrite)
			ah, _ := pd.CreateAH(ibv.AHAttr{IsGlobal: true, PortNum: 1, GRH: ibv.GlobalRoute{DGID: addrB, HopLimit: 64}})
			n := len(mad)
			if patch&2 != 0 {
				n = wire.MADLen
			}
			qp.PostSend(ibv.SendWR{Opcode: ibv.WRSend, SGList: []ibv.SGE{mr.SGE(0, n)}, AH: ah, RemoteQPN: 1, RemoteQKey: verbs.GSIQKey})
			synctest.Wait()
			// The connection still works both ways: it disconnects cleanly.
			cli.Disconnect()
			for {
				ev := next(t, bd.b.ch)
				ev.Ack()
				if ev.Type == cm.EventDisconnected && ev.ID == srv {
					break
				}
			}
			srv.Disconnect()
			ah.Destroy()
			qp.Destroy()
			mr.Dereg()
			cq.Destroy()
			pd.Dealloc()
		})
	})
}
