package cm_test

import (
	"bytes"
	"math/bits"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/clock"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
	"github.com/softnic/softnic/wire"
)

// rxeMADs returns the CM MADs of the rxe rping capture (rping -c on
// 10.77.0.3 port 47459 to rping -s on 10.77.0.2 port 7174, kernel 6.1):
// REQ, REP, RTU, DREQ, DREP.
func rxeMADs(t *testing.T) []wire.MAD {
	t.Helper()
	dgs, err := capture.ReadFile(filepath.Join("..", "..", "wire", "testdata", "rping_cm.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var out []wire.MAD
	for _, d := range dgs {
		var p wire.Packet
		if wire.Parse(d.Payload, &p) == nil && p.DestQP() == 1 && len(p.Payload) >= wire.MADLen {
			out = append(out, wire.MAD(bytes.Clone(p.Payload[:wire.MADLen])))
		}
	}
	if len(out) != 5 {
		t.Fatalf("%d MADs in the capture", len(out))
	}
	return out
}

// TestRpingExchangeAsRxe runs rping's connection — its addresses and
// ports, its connection parameters, the server accepting with none (as
// rping does), the client disconnecting — and compares every MAD with
// rxe's byte for byte, once the values each stack chooses for itself
// (comm IDs, TIDs, CA GUIDs, QPNs, starting PSNs) are carried over.
func TestRpingExchangeAsRxe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rxe := rxeMADs(t)
		client, server := netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.2")
		f := fabric.New(fabric.Config{Seed: 5})
		defer f.Close()
		clk := clock.NewManual(time.Unix(1e6, 0))
		var mu sync.Mutex
		var mads []wire.MAD
		f.Tap(func(p fabric.Packet) {
			if p.Parsed && p.Wire.DestQP() == 1 {
				mu.Lock()
				mads = append(mads, wire.MAD(bytes.Clone(p.Wire.Payload[:wire.MADLen])))
				mu.Unlock()
			}
		})
		mk := func(a netip.Addr) *host {
			ep, _ := f.Attach(a)
			// rxe's port MTU on a 1500-byte link: path MTU 1024.
			dev, err := verbs.Open(verbs.Config{Link: ep, PortMTU: ibv.MTU1024})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cm.New(cm.Config{Devices: []*verbs.Device{dev}, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return &host{dev: dev, cm: c, ch: c.CreateEventChannel()}
		}
		hc, hs := mk(client), mk(server)
		defer func() {
			for _, h := range []*host{hc, hs} {
				h.cm.Close()
				h.dev.Close()
			}
		}()
		l, _ := hs.cm.CreateID(hs.ch, nil, cm.PSTCP, ibv.QPTypeRC)
		l.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), 7174))
		l.Listen(3)
		cli, _ := hc.cm.CreateID(hc.ch, nil, cm.PSTCP, ibv.QPTypeRC)
		cli.ResolveAddr(netip.AddrPortFrom(client, 47459), netip.AddrPortFrom(server, 7174), 2*time.Second)
		expect(t, hc.ch, cm.EventAddrResolved)
		cli.ResolveRoute(2 * time.Second)
		expect(t, hc.ch, cm.EventRouteResolved)
		mkQP(t, cli)
		cli.Connect(&cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
		srv := expect(t, hs.ch, cm.EventConnectRequest).ID
		mkQP(t, srv)
		srv.Accept(nil)
		expect(t, hc.ch, cm.EventEstablished)
		expect(t, hs.ch, cm.EventEstablished)
		cli.Disconnect()
		expect(t, hs.ch, cm.EventDisconnected)
		srv.Disconnect()
		expect(t, hc.ch, cm.EventDisconnected)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		if len(mads) != 5 {
			t.Fatalf("%d MADs, want 5", len(mads))
		}
		req, rep := wire.CMReq(mads[0]), wire.CMRep(mads[1])
		cid, sid := req.LocalCommID(), rep.LocalCommID()
		// cm_form_tid: the agent's hi_tid over the byte-swapped comm ID.
		tid := uint64(1)<<32 | uint64(bits.ReverseBytes32(cid))
		// Carry our own choices into rxe's messages.
		for i := range rxe {
			h := rxe[i].Hdr()
			h.TID = tid
			wire.PutMADHdr(rxe[i], h)
		}
		r := wire.CMReq(rxe[0])
		r.SetLocalCommID(cid)
		r.SetLocalCAGUID(req.LocalCAGUID())
		r.SetLocalQPN(req.LocalQPN())
		r.SetStartingPSN(req.StartingPSN())
		p := wire.CMRep(rxe[1])
		p.SetLocalCommID(sid)
		p.SetRemoteCommID(cid)
		p.SetLocalCAGUID(rep.LocalCAGUID())
		p.SetLocalQPN(rep.LocalQPN())
		p.SetStartingPSN(rep.StartingPSN())
		u := wire.CMRtu(rxe[2])
		u.SetLocalCommID(cid)
		u.SetRemoteCommID(sid)
		d := wire.CMDreq(rxe[3])
		d.SetLocalCommID(cid)
		d.SetRemoteCommID(sid)
		d.SetRemoteQPN(rep.LocalQPN())
		e := wire.CMDrep(rxe[4])
		e.SetLocalCommID(sid)
		e.SetRemoteCommID(cid)
		for i, name := range []string{"REQ", "REP", "RTU", "DREQ", "DREP"} {
			if !bytes.Equal(mads[i], rxe[i]) {
				t.Errorf("%s:\n ours % x\n rxe  % x", name, mads[i], rxe[i])
			}
		}
		for _, id := range []*cm.ID{cli, srv} {
			id.DestroyQP()
			id.Destroy()
		}
		l.Destroy()
	})
}
